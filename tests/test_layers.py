"""Imports point downward only, through the layers of docs/design.md; the core imports nothing above it; the
table, the docs and the tree agree; and no module or interface grows past what one reader can hold."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from tests.conftest import ROOT

PACKAGE = ROOT / "src" / "signoff"
# Lower number = lower layer, as docs/design.md numbers them. A module may import its own layer and
# anything below it. `pydantic_ai`, `adk` and `claude` are the public shortcuts to their integrations; `hooks`
# is Claude Code's hook events ruled on by the gate; `mcp` is the MCP gateway, and `compat` the drop-in API of
# pydantic-ai-blocking-approval (seed 003).
LAYERS = {
    "core": 0,
    "ledger": 1,
    "approvers": 2,
    "gate": 2,
    "tasks": 2,
    "upkeep": 2,
    "channels": 2,
    "protocol": 3,
    "integrations": 4,
    "pydantic_ai": 4,
    "adk": 4,
    "langchain": 4,
    "openai_agents": 4,
    "claude": 4,
    "hooks": 4,
    "mcp": 4,
    "compat": 4,
    "server": 5,
    "demo": 5,
    "cli": 6,
}
LEDGER_PARTS = (
    "approvals", "grants", "audit", "tasks", "chats", "principals", "outbox", "parts", "committer", "watcher",
    "base",
)  # fmt: skip
"""The ledger's rules and machinery, above its backends: they know a backend only by `ledger.stores`."""
BACKENDS = ("memory", "sqlite", "postgres", "redis")
MAX_LINES = 400
MAX_ABSTRACT = 12
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
    assert own in LAYERS, f"{path} is in no layer of docs/design.md"
    for module in imports(path):
        target = layer_of(module)
        if target is not None and target != own:
            assert LAYERS[target] <= LAYERS[own], f"{path.name} ({own}) imports {module} ({target})"


def documented_layers(page: str) -> dict[str, int]:
    """The layer table of a docs page: each package it names (`core/`, `gate`, `pydantic_ai`) by its layer."""
    table = page.split("| layer | package |", 1)[1].split("\n\n", 1)[0]
    found: dict[str, int] = {}
    for number, packages in re.findall(r"^\| (\d+) \| ([^|]+) \|", table, re.M):
        for name in re.findall(r"`(\w+)/?`", packages):
            found[name] = int(number)
    return found


@pytest.mark.parametrize("page", ["design.md", "architecture.md"])
def test_the_docs_draw_the_layers_the_tests_check(page: str) -> None:
    assert documented_layers((ROOT / "docs" / page).read_text()) == LAYERS


def test_every_layer_exists_and_every_package_has_one() -> None:
    tree = {p.stem for p in PACKAGE.iterdir() if p.suffix == ".py" or any(p.glob("*.py"))}
    assert tree - {"__init__"} == set(LAYERS)


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


def ledger_module(module: str) -> str | None:
    parts = module.split(".")
    return parts[2] if parts[:2] == ["signoff", "ledger"] and len(parts) > 2 else None


@pytest.mark.parametrize("name", LEDGER_PARTS)
def test_the_ledgers_rules_know_no_backend(name: str) -> None:
    for module in imports(PACKAGE / "ledger" / f"{name}.py"):
        assert ledger_module(module) not in BACKENDS, f"ledger/{name}.py imports {module}"


@pytest.mark.parametrize(
    "path",
    sorted(
        p for b in BACKENDS for p in (PACKAGE / "ledger").glob(f"{b}*") if p.suffix == ".py" or p.is_dir()
    ),
    ids=lambda p: p.name,
)
def test_a_backend_knows_the_rules_only_as_the_ledger_it_makes(path: Path) -> None:
    """A backend implements `ledger.stores`; only the module that makes its `Ledger` imports `ledger.base`,
    and no backend imports another."""
    files = [path] if path.is_file() else sorted(path.glob("*.py"))
    for file in files:
        for module in imports(file):
            found = ledger_module(module)
            assert found not in set(LEDGER_PARTS) - {"base"}, f"{file.name} imports {module}"
            assert found not in set(BACKENDS) - {path.stem}, f"{file.name} imports {module}"
            if found == "base":
                assert file.name in ("__init__.py", "memory.py"), f"{file.name} imports {module}"


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_no_module_is_over_400_lines(path: Path) -> None:
    lines = len(path.read_text().splitlines())
    assert lines <= MAX_LINES, f"{path.relative_to(PACKAGE)} has {lines} lines"


def abstract_methods(node: ast.ClassDef) -> list[str]:
    def abstract(item: ast.stmt) -> bool:
        decorators = item.decorator_list if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef) else []
        return any(getattr(d, "id", getattr(d, "attr", None)) == "abstractmethod" for d in decorators)

    return [item.name for item in node.body if abstract(item)]  # type: ignore[attr-defined]


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_no_interface_has_more_than_12_abstract_methods(path: Path) -> None:
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ClassDef):
            found = abstract_methods(node)
            assert len(found) <= MAX_ABSTRACT, f"{node.name} has {len(found)} abstract methods: {found}"


def test_every_backend_makes_a_whole_store_of_each_interface(tmp_path: Path) -> None:
    """Counted on the classes as Python builds them, inherited methods included; nothing connects."""
    from signoff.ledger import stores
    from signoff.ledger.memory import MemoryBackend
    from signoff.ledger.postgres.backend import PostgresBackend
    from signoff.ledger.redis.backend import RedisBackend
    from signoff.ledger.sqlite.backend import SqliteBackend

    interfaces = {
        "approvals": stores.ApprovalStore,
        "tasks": stores.TaskStore,
        "chats": stores.ChatStore,
        "principals": stores.PrincipalStore,
    }
    for interface in (*interfaces.values(), stores.Backend):
        assert 0 < len(interface.__abstractmethods__) <= MAX_ABSTRACT, interface.__name__
    net = stores.Pool(size=1, connect_timeout=1.0, pool_timeout=1.0, poll_interval=1.0)
    backends: list[stores.Backend] = [
        MemoryBackend(),
        SqliteBackend(tmp_path / "x.db", synchronous="normal", poll_interval=1.0),
        PostgresBackend("postgresql://nowhere", schema="s", pool=net),
        RedisBackend("redis://nowhere", prefix="p", pool=net),
    ]
    for backend in backends:
        for attribute, interface in interfaces.items():
            store = getattr(backend, attribute)
            assert isinstance(store, interface), f"{type(backend).__name__}.{attribute}"


def public_exceptions() -> list[tuple[str, str]]:
    """Every public class that derives from an exception, by module and name."""
    import importlib
    import inspect

    found = []
    for path in MODULES:
        module = "signoff." + ".".join(path.relative_to(PACKAGE).with_suffix("").parts)
        loaded = importlib.import_module(module.removesuffix(".__init__"))
        for name, value in vars(loaded).items():
            if (
                inspect.isclass(value)
                and issubclass(value, BaseException)
                and value.__module__ == loaded.__name__
            ) and not name.startswith("_"):
                found.append((loaded.__name__, name))
    return found


def test_every_public_exception_is_a_signoff_error() -> None:
    """One error family: a caller can catch `SignoffError` and know it caught everything signoff raises on
    purpose."""
    import importlib

    from signoff.core.errors import SignoffError

    exceptions = public_exceptions()
    assert len(exceptions) > 20, exceptions
    outside = [
        f"{m}.{n}"
        for m, n in exceptions
        if not issubclass(getattr(importlib.import_module(m), n), SignoffError)
    ]
    assert outside == []


def import_graph() -> dict[str, set[str]]:
    """Each module of the package and the package's modules it imports, anywhere in it: type-only and
    function-level imports included."""
    names = {
        ".".join(p.relative_to(PACKAGE.parent).with_suffix("").parts).removesuffix(".__init__"): p
        for p in PACKAGE.rglob("*.py")
    }
    graph: dict[str, set[str]] = {}
    for name, path in names.items():
        package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
        found: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                found |= {a.name for a in node.names if a.name in names}
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*up, base] if base else up)
                for alias in node.names:
                    full = f"{base}.{alias.name}"
                    found.add(full if full in names else base)
        graph[name] = {t for t in found if t in names and t != name}
    return graph


def circles(graph: dict[str, set[str]]) -> list[set[str]]:
    """The import circles: each set of modules that import one another, round about (Tarjan's SCCs)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[set[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        for target in graph[module]:
            if target not in index:
                visit(target)
                low[module] = min(low[module], low[target])
            elif target in stack:
                low[module] = min(low[module], index[target])
        if low[module] == index[module]:
            circle = set()
            while True:
                member = stack.pop()
                circle.add(member)
                if member == module:
                    break
            if len(circle) > 1:
                found.append(circle)

    for module in graph:
        if module not in index:
            visit(module)
    return found


def test_no_import_circle_in_the_ledger_or_between_folders() -> None:
    """A backend's stores know what they need of it (a protocol), not the backend that makes them; and no
    folder imports one that imports it back, type-only imports included."""
    for circle in circles(import_graph()):
        folders = {m.split(".")[1] for m in circle}
        assert "ledger" not in folders, (
            f"the ledger's modules import one another round about: {sorted(circle)}"
        )
        assert len(folders) == 1, f"folders import one another round about: {sorted(circle)}"


ADAPTERS = [
    PACKAGE / "integrations" / "pydantic_ai",
    PACKAGE / "integrations" / "adk",
    PACKAGE / "openai_agents",
    PACKAGE / "langchain",
]
ADAPTER_FILES = [p for folder in ADAPTERS for p in sorted(folder.glob("*.py"))]
TOY = ROOT / "tests" / "test_toy_framework.py"
FACADE = "signoff.integrations.framework"
APPROVAL_SERVER = PACKAGE / "openai_agents" / "server.py"
"""The Agents SDK example's `ApprovalServer`: it keeps a paused run's state under its request id, outside
any chat, so it writes that record itself."""


@pytest.mark.parametrize("path", [p for p in ADAPTER_FILES if p != APPROVAL_SERVER], ids=str)
def test_an_adapter_leaves_the_chats_record_to_the_driver(path: Path) -> None:
    """Issue 32: the driver loads and saves a chat, its held version included; an adapter that read or
    wrote the record itself would step around the version check and the history it keeps."""
    source = path.read_text()
    assert ".chats." not in source and "held=" not in source, path


def integrations_used(path: Path) -> set[str]:
    """The modules of `signoff.integrations` that `path` imports, outside its own folder: a bare
    `from signoff.integrations import x` counts as the module `signoff.integrations.x`."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module == "signoff.integrations":
            found |= {f"signoff.integrations.{alias.name}" for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
    folder = path.parent.relative_to(PACKAGE).parts if path.is_relative_to(PACKAGE) else ()
    return {
        m
        for m in found
        if m.split(".")[:2] == ["signoff", "integrations"] and m.split(".")[1:3] != list(folder)
    }


@pytest.mark.parametrize("path", [*ADAPTER_FILES, TOY], ids=str)
def test_an_adapter_uses_nothing_of_the_integrations_but_the_facade(path: Path) -> None:
    """Issue 45: every framework adapter (the toy too) reaches the chat machinery through the facade, so
    the machinery can move between its modules without touching an adapter, and the facade lists all that
    a new framework needs."""
    assert integrations_used(path) <= {FACADE}, f"{path.name} imports {integrations_used(path) - {FACADE}}"


def test_the_facade_test_sees_a_stray_import(tmp_path: Path) -> None:
    stray = tmp_path / "stray.py"
    stray.write_text("from signoff.integrations import gated\nimport signoff.integrations.chat.turn\n")
    assert integrations_used(stray) == {"signoff.integrations.gated", "signoff.integrations.chat.turn"}
