"""One voice for errors (issue 42, item 10): every failing CLI case, run as the `signoff` program, says one
line on stderr, `error: <what>: <why>`, with no traceback and no box, and exits non-zero; help is wrapped by
Rich, never where the source broke a line."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
import typer

from signoff.cli.app import app
from signoff.core.expr import ExprError, compile_condition
from signoff.ledger.keyfile import load_keyring
from tests.conftest import SIGNOFF

BOX = set("─│╭╮╰╯┏┓┗┛━┃")
MISSING = "cannot read: No such file or directory"

FILES = {
    "agent_mod.py": "from pydantic_ai import Agent\nfrom pydantic_ai.models.test import TestModel\n\n"
    "agent = Agent(TestModel())\n",
    "broken_mod.py": "def f(:\n    pass\n",
    "bad.toml": "[[tools.x\n",
    "when.toml": '[[tools.process_payment]]\naction = "ask"\nwhen = "amount >"\n',
    "vault_mod.py": "from pydantic_ai import Agent\nfrom pydantic_ai.models.test import TestModel\n\n"
    "class Vault:\n    def __init__(self, key: str) -> None:\n        self.key = key\n\n"
    "agent = Agent(TestModel(), deps_type=Vault)\nmade = 1\n",
}
SERVE = ["serve", "--port", "0", "--agent"]
GATEWAY = ["mcp-gateway", "--port", "0", "--upstream-url", "http://127.0.0.1:9/mcp"]

CASES: list[tuple[list[str], str, int]] = [
    # a file that can't be read: the same words for every option that takes one
    ([*SERVE, "agent_mod:agent", "--policy", "missing.toml"], f"missing.toml: {MISSING}", 1),
    ([*SERVE, "agent_mod:agent", "--channels", "missing.toml"], f"missing.toml: {MISSING}", 1),
    ([*GATEWAY, "--policy", "missing.toml"], f"missing.toml: {MISSING}", 1),
    (
        ["approvals", "approve", "apr_x", "--args", "{}", "--policy", "missing.toml"],
        f"missing.toml: {MISSING}",
        2,
    ),
    (["audit", "verify", "--checkpoint", "missing.jsonl"], f"missing.jsonl: {MISSING}", 1),
    # what a file says
    ([*SERVE, "agent_mod:agent", "--policy", "bad.toml"], "bad.toml: invalid TOML: Expected ']]' …", 1),
    ([*SERVE, "agent_mod:agent", "--channels", "bad.toml"], "bad.toml: invalid TOML: Expected ']]' …", 1),
    (
        [*SERVE, "agent_mod:agent", "--policy", "when.toml"],
        "when.toml: tools.process_payment[0].when: syntax error: invalid syntax at column 9",
        1,
    ),
    # --agent
    ([*SERVE, "agent_mod:missing"], "--agent agent_mod:missing: agent_mod has no attribute missing", 1),
    (
        [*SERVE, "json:dumps"],
        "--agent json:dumps: a function, not a pydantic-ai Agent, a Google ADK agent, an OpenAI Agents SDK"
        " Agent or a compiled LangGraph graph",
        1,
    ),
    ([*SERVE, "nowhere:agent"], "--agent nowhere:agent: cannot import nowhere: No module named 'nowhere'", 1),
    (
        [*SERVE, "broken_mod:agent"],
        "--agent broken_mod:agent: …broken_mod.py: invalid Python: invalid syntax …",
        1,
    ),
    ([*SERVE, "json"], "--agent json: must be module:attribute, such as myapp.agents:agent", 1),
    # an agent none can serve as it is: refused when it starts, never at its first approval
    (
        [*SERVE, "vault_mod:agent"],
        "the agent's deps_type Vault can't be made without arguments (TypeError: …): give a function that"
        " makes its deps, create_app(…, deps=…) or --deps module:function",
        1,
    ),
    ([*SERVE, "vault_mod:agent", "--deps", "vault_mod:made"], "--deps vault_mod:made: not a function …", 1),
    # the ledger, and what it holds
    (["approvals", "list", "--ledger", "mysql://x"], "unsupported ledger URL 'mysql://x': expected …", 1),
    (["approvals", "show", "apr_x"], "no ledger at …cli.db: pass --ledger URL or set SIGNOFF_LEDGER", 1),
    (["approvals", "approve", "apr_x"], "no approval apr_x", 1),
    # the command line itself
    (
        ["approvals", "show"],
        "signoff approvals show: missing argument …; see signoff approvals show --help",
        2,
    ),
    (["serve", "--deps", "x:y"], "--deps: is for a chat, and needs --agent", 2),
    (["approvals", "list", "--bogus"], "signoff approvals list: no such option: --bogus; see … --help", 2),
    (
        ["approvals", "show", "a", "b"],
        "signoff approvals show: got unexpected extra argument(s) (b); see signoff approvals show --help",
        2,
    ),
    (["nosuch"], "signoff: no such command 'nosuch'; see signoff --help", 2),
    (
        ["approvals", "approve", "apr_x", "--remember", "forever"],
        "--remember: must be once, session or always",
        2,
    ),
    (["approvals", "approve", "apr_x", "--args", "{nope"], "--args: not JSON: …", 2),
    (["approvals", "list", "--state", "soon"], "--state: 'soon' is not one of 'pending', …", 2),
    (["audit", "list", "--limit", "many"], "--limit: …", 2),
    (["demo", "--workers", "0"], "--workers: …", 2),
    (["demo", "--wait", "soon"], "--wait: must be deferred or blocking", 2),
    (
        ["demo", "--oidc-issuer", "https://idp"],
        "--oidc-audience: OIDC also needs --oidc-audience, --oidc-jwks",
        2,
    ),
    (["principals", "link", "bob"], "--email: give --email, --slack or both", 2),
    (["demo", "--oidc-client-id", "signoff"], "--oidc-client-id: needs --oidc-issuer, the issuer …", 2),
]


@pytest.fixture(autouse=True)
def audit_key() -> None:
    """The run's audit key, made now: a command that makes it says so, on a line of its own."""
    load_keyring()


@pytest.mark.parametrize(("args", "said", "code"), CASES, ids=[" ".join(c[0]) for c in CASES])
def test_a_failure_is_one_line(
    cli_env: dict[str, str], tmp_path: Path, args: list[str], said: str, code: int
) -> None:
    """`…` in `said` stands for any text."""
    for name, text in FILES.items():
        (tmp_path / name).write_text(text)
    result = subprocess.run(
        [SIGNOFF, *args], env=cli_env, cwd=tmp_path, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == code, result.stderr
    assert result.stderr.endswith("\n") and result.stderr.count("\n") == 1, result.stderr
    pattern = ".*".join(re.escape(part) for part in f"error: {said}".split("…"))
    assert re.fullmatch(pattern, result.stderr.rstrip("\n")), result.stderr
    assert "Traceback" not in result.stdout + result.stderr
    assert not BOX & set(result.stdout + result.stderr)


@pytest.mark.parametrize(
    ("text", "line", "column"),
    [
        ("amount >", 1, 9),
        ("amount >   ", 1, 9),
        ("  amount ==", 1, 12),
        ("a > 1 and", 1, 10),
        ("a > 1 and\n  ", 1, 10),
        ("é >", 1, 4),
    ],
)
def test_a_condition_that_ends_too_soon_names_where_it_ends(text: str, line: int, column: int) -> None:
    """Python reports no offset when the text runs out: the column is just past its last character."""
    with pytest.raises(ExprError) as info:
        compile_condition(text)
    assert (info.value.line, info.value.column) == (line, column)


def test_help_is_wrapped_by_rich_not_where_the_source_broke_it() -> None:
    """Every command's first paragraph reads on one line of its group's help, given the width; a narrow
    terminal gets it wrapped to its width."""
    groups: list[tuple[list[str], typer.Typer | None]] = [([], None)]
    groups += [([info.name or ""], info.typer_instance) for info in app.registered_groups]
    root = typer.main.get_command(app)
    assert isinstance(root, typer.main.TyperGroup)
    for path, _ in groups:
        group = root if not path else root.commands[path[0]]
        shown = subprocess.run(
            [SIGNOFF, *path, "--help"], env={"COLUMNS": "300"}, capture_output=True, text=True, timeout=60
        ).stdout
        lines = [" ".join(line.strip(" │").split()) for line in shown.splitlines()]
        for name, command in group.commands.items():  # type: ignore[attr-defined]
            first = " ".join((command.help or "").split("\n\n")[0].split()).replace("`", "")
            first = first.replace("\\", "")
            assert any(line == f"{name} {first}" for line in lines), (path, name, first, shown)
    narrow = subprocess.run(
        [SIGNOFF, "approvals", "approve", "--help"], env={"COLUMNS": "60"}, capture_output=True, text=True
    ).stdout
    assert max(len(line) for line in narrow.splitlines()) <= 60
    assert "An edit is a new call: the policy rules on it" in " ".join(narrow.split())
