"""The shape that keeps one door (issue 41): read off the source, so a new surface that decides, proves
or picks a status on its own fails here before it ships.

- A decision is recorded by the core's `decide` step, which only the ledger's approvals part runs.
- A `Proven` principal is made only where a credential is checked: the server's edge, the ledger's
  principals, the CLI's operator and the stdio gateway's OS user, and the chat's owner as the edge handed
  it on. Every other module receives one.
- Every surface that decides hands the ledger a decision made of a `Proven` (`Decision.of(approved, proven,
  ...)`), never of a bare name or `Principal`, which would be a program's own decision.
- An HTTP status is chosen in `server/http.py` only.
"""

from __future__ import annotations

import ast
from pathlib import Path

from tests.conftest import ROOT

PACKAGE = ROOT / "src" / "signoff"
MODULES = sorted(PACKAGE.rglob("*.py"))


def _name(path: Path) -> str:
    return str(path.relative_to(PACKAGE))


def _tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text())


def test_only_the_ledger_runs_the_cores_decide_step() -> None:
    """Who runs `core.approval.decide` records a decision: only `ledger/approvals.py` may."""
    runs = set()
    for path in MODULES:
        tree = _tree(path)
        imported = [(n.module, a) for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) for a in n.names]
        aliases = {
            a.asname or a.name for m, a in imported if m == "signoff.core.approval" and a.name == "decide"
        }
        modules = {a.asname or a.name for m, a in imported if m == "signoff.core" and a.name == "approval"}
        for node in ast.walk(tree):
            called = node.func if isinstance(node, ast.Call) else None
            if isinstance(called, ast.Name) and called.id in aliases:
                runs.add(_name(path))
            if (
                isinstance(called, ast.Attribute)
                and called.attr == "decide"
                and isinstance(called.value, ast.Name)
                and called.value.id in modules
            ):
                runs.add(_name(path))
    assert runs == {"ledger/approvals.py"}


PROVERS = {
    "core/principal.py": "the type itself, and `spending`, which only narrows a proven principal",
    "server/auth.py": "the edge: bearer tokens, OIDC, the host app's login, a browser session",
    "ledger/principals.py": "a personal token's record, a linked Slack user, a review link's principal",
    "cli/common.py": "the operator: the operating system's user, holding the audit key",
    "cli/gateway.py": "the stdio gateway's OS user, as the operator's",
    "integrations/chat/trust.py": "a chat's owner: the principal the edge proved for this very request",
}


def test_a_proven_principal_is_made_only_where_a_credential_is_checked() -> None:
    makers = set()
    for path in MODULES:
        for node in ast.walk(_tree(path)):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "Proven":
                makers.add(_name(path))
    assert makers <= set(PROVERS), sorted(makers - set(PROVERS))
    assert "server/auth.py" in makers and "ledger/principals.py" in makers


SURFACES = {
    "server/approvals.py",
    "server/review.py",
    "server/slack.py",
    "integrations/chat/trust.py",
    "mcp/gateway.py",
    "cli/approvals.py",
}
"""Every surface that decides on someone's behalf (the chat page and the live socket decide through
`integrations/chat/trust.py`). The gate decides too, for the program's own approvers, and so does the Agents
SDK's `ApprovalServer`, for the user its caller authenticated (that example's contract): their decisions
are `code`'s, by design."""
CODE = {"gate.py", "openai_agents/server.py"}


def test_every_surface_decides_through_the_ledger_with_a_proven_principal() -> None:
    deciders = set()
    for path in MODULES:
        tree = _tree(path)
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "decide"
                and isinstance(node.func.value, ast.Attribute)
                and node.func.value.attr == "approvals"
            ):
                deciders.add(_name(path))
    assert deciders == SURFACES | CODE
    for name in SURFACES:
        made = [
            node
            for node in ast.walk(_tree(PACKAGE / name))
            if isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and isinstance(node.func.value, ast.Name)
            and node.func.value.id == "Decision"
        ]
        assert made, name
        for call in made:
            assert isinstance(call.func, ast.Attribute)
            at = BY[call.func.attr]
            who = ast.unparse(call.args[at]) if len(call.args) > at else ""
            assert "proven" in who.lower(), f"{name}: {ast.unparse(call)} names no proven principal"


BY = {"of": 1, "approve": 0, "deny": 0, "edit": 1}
"""Where each of `Decision`'s constructors takes who decides."""

STATUS_CALLS = {"Response", "HTMLResponse", "PlainTextResponse", "JSONResponse", "json_response", "error"}


def test_a_status_is_chosen_in_one_place() -> None:
    """No literal HTTP status outside `server/http.py`: every refusal is a kind its `STATUS` maps."""
    chosen = []
    for path in MODULES:
        if _name(path) == "server/http.py":
            continue
        for node in ast.walk(_tree(path)):
            if not isinstance(node, ast.Call):
                continue
            func = node.func
            called = (
                func.id
                if isinstance(func, ast.Name)
                else func.attr
                if isinstance(func, ast.Attribute)
                else ""
            )
            given = [k.value for k in node.keywords if k.arg in ("status", "status_code")]
            if called in STATUS_CALLS:
                given += node.args[1:2] if called != "error" else node.args[:1]
            chosen += [
                f"{_name(path)}:{node.lineno}: {ast.unparse(node)}"
                for value in given
                if isinstance(value, ast.Constant) and isinstance(value.value, int)
            ]
    assert chosen == []


def test_no_refusal_is_a_private_exception() -> None:
    """What the server refuses is a `SignoffError` kind, never a private `Exception` of a module (a client
    gone before its body arrived is no refusal: nobody is answered)."""
    private = []
    for path in (PACKAGE / "server").rglob("*.py"):
        for node in ast.walk(_tree(path)):
            if isinstance(node, ast.ClassDef) and any(
                isinstance(b, ast.Name) and b.id == "Exception" for b in node.bases
            ):
                private.append(f"{_name(path)}: {node.name}")
    assert private == ["server/edge.py: _Gone"]
