"""docs/architecture.md names the modules, classes and functions one approved payment passes through: each
name it gives in that walk must exist, so the page cannot drift from the code as it is restructured."""

from __future__ import annotations

import ast
import itertools
import re
import traceback
from pathlib import Path
from typing import Any
from unittest import mock

import pytest

from signoff.demo.agent import demo_agent
from signoff.demo.walkthrough import demo_policy
from signoff.gate import Gate
from signoff.integrations.pydantic_ai.chat import AgentChat
from signoff.ledger import MemoryLedger
from signoff.ledger.memory import MemoryBackend
from tests.conftest import ROOT
from tests.test_history import pay

PACKAGE = ROOT / "src" / "signoff"
PAGE = (ROOT / "docs" / "architecture.md").read_text()
WALK = PAGE.split("## One approved payment, request to chunk", 1)[1].split("\n## ", 1)[0]


def definitions() -> tuple[set[str], set[str]]:
    """Every module of the package (`integrations/chat`, `chat`), and every name defined in one, bare and
    qualified by its class or its module (`begin`, `chat.begin`, `Gate.run`, `Gate`)."""
    modules: set[str] = set()
    names: set[str] = set()
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE).with_suffix("").parts
        if parts[-1] == "__init__":  # a package: what it defines and what it exports
            parts = parts[:-1]
        modules |= {"/".join(parts[i:]) for i in range(len(parts))}
        module = parts[-1] if parts else "signoff"
        tree = ast.parse(path.read_text())
        for node in tree.body:
            if isinstance(node, ast.ClassDef):
                names |= {node.name, f"{module}.{node.name}"}
                for item in node.body:
                    if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef):
                        names |= {item.name, f"{node.name}.{item.name}"}
            elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                names |= {node.name, f"{module}.{node.name}"}
            elif isinstance(node, ast.ImportFrom) and path.name == "__init__.py":
                names |= {f"{module}.{alias.asname or alias.name}" for alias in node.names}
        # a tool defined inside the function that builds its agent (the demo's `process_payment`)
        names |= {n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)}
    return modules, names


MODULES, NAMES = definitions()
CITED = sorted(set(re.findall(r"`([A-Za-z_][\w./]*)`", WALK)))


def test_the_walk_names_enough_to_check() -> None:
    assert len(CITED) >= 15, CITED


@pytest.mark.parametrize("cited", CITED)
def test_every_name_the_walk_gives_exists(cited: str) -> None:
    if cited.endswith(".py"):
        assert cited[:-3] in MODULES, f"docs/architecture.md names {cited}, which is no module"
        return
    if "/" in cited:  # `server/streams.Streams`: a module, then a name in it
        module, _, name = cited.partition(".")
        assert module in MODULES, f"docs/architecture.md names {cited}, whose module is gone"
        if name:
            assert f"{Path(module).name}.{name}" in NAMES, (
                f"docs/architecture.md names {cited}, which is gone"
            )
        return
    assert cited in NAMES or cited in MODULES, f"docs/architecture.md names {cited}, which is defined nowhere"


HOPS = re.findall(r"^\| (\d+) \| (.+?) \| (.+?) \|$", WALK, flags=re.MULTILINE)


def defined_in(cell: str) -> bool:
    """`path/module.py` `Name.attr`: the function is defined in that module (a library's own step, such as
    "pydantic-ai's run", names none)."""
    found = re.findall(r"`([\w/]+\.py)` `([\w.]+)`", cell)
    if not found:
        return "`" not in cell
    [(module, name)] = found
    tree = ast.parse((PACKAGE / module).read_text())
    owner, _, attr = name.rpartition(".")
    for node in tree.body:
        if not owner and isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name == name:
            return True
        if isinstance(node, ast.ClassDef) and node.name == owner:
            return any(
                isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef) and item.name == attr
                for item in node.body
            )
    return False


def test_the_chat_path_to_the_durable_claim_is_at_most_twelve_hops_each_where_the_page_says() -> None:
    """Issue 32: one chat request crossed 28 file boundaries between its handler and the durable claim.
    The page lists each hop, from the SSE handler to the ledger's write, and each end is where it says."""
    assert [int(n) for n, _, _ in HOPS] == list(range(1, len(HOPS) + 1)) and 0 < len(HOPS) <= 12
    assert "ChatAPI.post" in HOPS[0][1] and "Committer.write" in HOPS[-1][2]
    for n, source, target in HOPS:
        assert defined_in(source) and defined_in(target), (n, source, target)
    for (_, _, arrived), (_, left, _) in itertools.pairwise(HOPS):
        arrived_file, left_file = re.findall(r"`([\w/]+\.py)`", arrived), re.findall(r"`([\w/]+\.py)`", left)
        assert not arrived_file or not left_file or arrived_file == left_file, (arrived, left)


async def test_the_last_hops_are_the_stack_a_claim_is_taken_on() -> None:
    """The hops from the framework's tool call to the durable claim, as the stack shows them when an approved
    payment's claim is written: each file and function where the page says, in its order. (The earlier hops
    cross tasks, the reply's and the run's, which a stack does not show; their names are checked above.)"""
    stacks: list[traceback.StackSummary] = []
    transact = MemoryBackend.transact

    async def watched(self: MemoryBackend, *args: Any) -> Any:
        stack = traceback.extract_stack()
        if any(f.name == "consume" and f.filename.endswith("ledger/approvals.py") for f in stack):
            stacks.append(stack)
        return await transact(self, *args)

    async with MemoryLedger() as ledger:
        chat = AgentChat(demo_agent(), Gate(ledger, demo_policy()))
        with mock.patch.object(MemoryBackend, "transact", watched):
            await pay(chat, 0)
    stack, _ended = stacks  # the claim, then the record of how the call ended (see `core.claim`)
    frames = [(f.filename.split("/src/signoff/")[-1], f.name) for f in stack]
    first = next(i for i, (path, _) in enumerate(frames) if path.startswith("integrations/"))
    assert "pydantic_ai" in frames[first - 1][0], frames[first - 1]  # hop 7's source: pydantic-ai's run
    ours = frames[first : next(i for i, (path, _) in enumerate(frames) if path == "ledger/committer.py") + 1]
    entered = [ours[0]] + [here for before, here in itertools.pairwise(ours) if here[0] != before[0]]
    documented = HOPS[len(HOPS) - len(entered) :]
    assert len(documented) == len(entered) >= 5
    for (n, _, target), (path, function) in zip(documented, entered, strict=True):
        assert f"`{path}`" in target and re.search(rf"[`.]{function}`", target), (n, target, path, function)
