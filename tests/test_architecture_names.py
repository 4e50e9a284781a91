"""docs/architecture.md names the modules, classes and functions one approved payment passes through: each
name it gives in that walk must exist, so the page cannot drift from the code as it is restructured."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from tests.conftest import ROOT

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
