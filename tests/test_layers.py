"""Imports point downward only, through the layers in DESIGN.md; the core imports nothing above it."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.conftest import ROOT

PACKAGE = ROOT / "src" / "signoff"
# Lower number = lower layer. A module may import its own layer and anything below it.
LAYERS = {
    "core": 0,
    "ledger": 1,
    "approvers": 1,
    "gate": 2,
    "tasks": 2,
    "protocol": 2,
    "integrations": 3,
    "pydantic_ai": 3,
    "adk": 3,
    "server": 4,
    "demo": 4,
    "cli": 5,
}
IO_MODULES = {"asyncio", "aiosqlite", "sqlite3", "socket", "subprocess", "os", "pathlib", "io", "threading"}


def layer_of(module: str) -> str | None:
    parts = module.split(".")
    if parts[0] != "signoff" or len(parts) < 2:
        return None
    return parts[1]


def imports(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append(node.module)
    return found


MODULES = sorted(p for p in PACKAGE.rglob("*.py") if p.parent != PACKAGE or p.name != "__init__.py")


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_imports_point_downward(path: Path) -> None:
    own = layer_of("signoff." + ".".join(path.relative_to(PACKAGE).with_suffix("").parts))
    assert own in LAYERS, f"{path} is in no layer of DESIGN.md"
    for module in imports(path):
        target = layer_of(module)
        if target is not None and target != own:
            assert LAYERS[target] <= LAYERS[own], f"{path.name} ({own}) imports {module} ({target})"


@pytest.mark.parametrize("path", sorted((PACKAGE / "core").glob("*.py")), ids=lambda p: p.name)
def test_the_core_is_sans_io(path: Path) -> None:
    for module in imports(path):
        assert module.split(".")[0] not in IO_MODULES, f"core/{path.name} imports {module}"


@pytest.mark.parametrize("path", sorted((PACKAGE / "protocol").glob("*.py")), ids=lambda p: p.name)
def test_the_protocol_is_pure(path: Path) -> None:
    """The protocol shares the gate's layer but needs none of it: only the core, and no I/O."""
    for module in imports(path):
        assert module.split(".")[0] not in IO_MODULES, f"protocol/{path.name} imports {module}"
        assert layer_of(module) in {None, "core", "protocol"}, f"protocol/{path.name} imports {module}"
