"""The official MCP conformance suite (`@modelcontextprotocol/conformance`, its `server` command) against
`tests/mcp_conformance/fixture_server.py`, the suite's server fixture: first directly, then behind
`signoff mcp-gateway` spawning that fixture over stdio with a policy that allows every call. A scenario
that passes directly must pass through the gateway too, in two sets:
- 2026-07-28: every server scenario the suite marks applicable at 2026-07-28 (`--suite all
  --spec-version 2026-07-28`, a superset of its frozen requirement set), stateless, input rounds included;
- the legacy elicitation set: the scenarios whose tool asks its client mid-call (`elicitation/create`),
  at the 2025-11-25 wire with its initialize handshake.
And `input-required-result-tampered-state` must pass against the gateway's own pending path: with a
policy that asks about the scenario's tool, the InputRequiredResult the suite tampers with is the
gateway's, not the upstream's.

The suite can't send a credential, and every MCP request to the gateway needs a bearer token:
`BearerProxy` stands in front of the gateway and adds one to each request, changing no other byte either
way (the Host and Origin the suite sends, for its DNS-rebinding scenario, reach the gateway as sent).

Each scenario's verdict is the suite's own (its summary's ✓): no check failed or warned. The table each
set prints also names, under each scenario that passes directly, its checks that succeeded directly but
not through the gateway, even where the scenario still passes (a check the suite skips for a capability
the gateway doesn't declare, say).

`tests/mcp_conformance/install.sh` (run here once, and by scripts/test) installs the pinned suite and
Node 22, which runs it whatever `node` is on PATH: the suite's bundle needs Node >= 22.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import re
import secrets
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from signoff.ledger import open_ledger
from tests.conftest import ROOT
from tests.servers import signoff_server

HERE = ROOT / "tests" / "mcp_conformance"
NODE = HERE / "node_modules" / "node" / "bin" / "node"
PACKAGE = HERE / "node_modules" / "@modelcontextprotocol" / "conformance"
SUITE = PACKAGE / "dist" / "index.js"
FIXTURE = [sys.executable, str(HERE / "fixture_server.py")]
TAMPERED = "input-required-result-tampered-state"

LEGACY_ELICITATION = ("tools-call-elicitation", "elicitation-sep1034-defaults", "elicitation-sep1330-enums")
"""The scenarios whose tool asks mid-call (`elicitation/create`), before 2026-07-28's input rounds."""
SETS: dict[str, list[list[str]]] = {
    "2026-07-28": [["--suite", "all", "--spec-version", "2026-07-28"]],
    "legacy elicitation": [["--scenario", s, "--spec-version", "2025-11-25"] for s in LEGACY_ELICITATION],
}
"""Each set, as the suite's runs of it."""

ALLOW_ALL = 'mode = "approve_all"\n'
"""Every call runs without a person: under `approve_all` the default rule's `ask` is an allow."""
ASK_TAMPERED = """
[[tools.test_input_required_result_tampered_state]]
action = "ask"
"""

_RESULTS = re.compile(r"^server-(?P<scenario>.+)-\d{4}-\d{2}-\d{2}T[\d-]+Z$")
_SEVERITY = ("FAILURE", "WARNING", "SUCCESS", "INFO", "SKIPPED")
"""The suite's check statuses, the most severe first (a status it may add later counts as a failure)."""


def _severity(status: str) -> int:
    return _SEVERITY.index(status) if status in _SEVERITY else 0


# -- the suite -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Outcome:
    """One scenario's checks: each check id's status (the most severe of its occurrences), and why those
    that failed or warned did."""

    checks: dict[str, str]
    why: dict[str, str]

    def count(self, status: str) -> int:
        return sum(1 for found in self.checks.values() if found == status)

    @property
    def passed(self) -> bool:
        """As the suite's summary has it (✓): no failure, no warning; and something was checked."""
        return not self.count("FAILURE") and not self.count("WARNING") and self.count("SUCCESS") > 0

    @property
    def verdict(self) -> str:
        if self.passed:
            return "pass"
        if failures := self.count("FAILURE"):
            return f"FAIL ({failures} of {len(self.checks)} checks)"
        if warnings := self.count("WARNING"):
            return f"warn ({warnings} of {len(self.checks)} checks)"
        return "nothing checked"


@functools.cache
def installed() -> None:
    """The pinned suite and Node 22, installed once per session (install.sh is a no-op when up to date)."""
    done = subprocess.run(["bash", str(HERE / "install.sh")], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, f"tests/mcp_conformance/install.sh failed:\n{done.stderr}{done.stdout}"


def conformance(url: str, runs: list[list[str]], out: Path) -> dict[str, Outcome]:
    """The suite's `server` command against `url`, once per run; each scenario's outcome, from the
    `checks.json` it saves under `out`."""
    installed()
    logs = []
    for number, run in enumerate(runs):
        command = [str(NODE), str(SUITE), "server", "--url", url, *run, "--output-dir", str(out)]
        done = subprocess.run(command, cwd=out.parent, capture_output=True, text=True, timeout=300)
        logs.append(f"$ conformance server {' '.join(command[4:])}: exit {done.returncode}\n")
        logs[-1] += done.stdout[-3000:] + done.stderr[-3000:]
        (out.parent / f"{out.name}.{number}.log").write_text(logs[-1])
    outcomes: dict[str, Outcome] = {}
    for directory in sorted(out.iterdir()) if out.exists() else []:
        match = _RESULTS.match(directory.name)
        if match is None or not (directory / "checks.json").exists():
            continue
        checks: dict[str, str] = {}
        why: dict[str, str] = {}
        for check in json.loads((directory / "checks.json").read_text()):
            known = checks.get(check["id"], "SKIPPED")
            checks[check["id"]] = min(known, check["status"], key=_severity)
            if check["status"] in ("FAILURE", "WARNING"):
                why[check["id"]] = check.get("errorMessage") or check.get("description", "")
        outcomes[match["scenario"]] = Outcome(checks, why)
    assert outcomes, "the suite saved no results:\n" + "\n".join(logs)
    return outcomes


def required_2026_07_28() -> list[str]:
    """The server scenarios of the suite's frozen 2026-07-28 requirement set."""
    text = (PACKAGE / "requirements" / "2026-07-28.yaml").read_text()
    block = re.search(r"^server:\n((?:  - .+\n)+)", text, re.MULTILINE)
    assert block is not None, "the suite's requirements/2026-07-28.yaml has no server list"
    return re.findall(r"^  - (\S+)", block[1], re.MULTILINE)


# -- what it runs against --------------------------------------------------------------------------------


@contextlib.contextmanager
def fixture_over_http(directory: Path) -> Iterator[str]:
    """The fixture serving streamable HTTP on a free port; yields its MCP URL."""
    out, err = directory / "fixture.stdout", directory / "fixture.stderr"
    with out.open("wb") as stdout, err.open("wb") as stderr:
        command = [*FIXTURE, "--http", "0"]
        process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=stdout, stderr=stderr)
    try:
        for _ in range(400):
            if found := re.search(r"fixture: (\S+)", out.read_text()):
                break
            assert process.poll() is None, f"the fixture exited:\n{err.read_text()}"
            threading.Event().wait(0.05)
        else:
            raise AssertionError(f"the fixture did not start:\n{err.read_text()}")
        yield found[1]
    finally:
        process.terminate()
        process.wait(10)


@contextlib.contextmanager
def gateway(directory: Path, policy: str) -> Iterator[str]:
    """`signoff mcp-gateway` spawning the fixture over stdio, with `policy`, a ledger of its own and a random
    admin token, behind a `BearerProxy` holding that token; yields the proxy's MCP URL."""
    directory.mkdir()
    (directory / "policy.toml").write_text(policy)
    token = secrets.token_urlsafe(24)
    args = [
        "mcp-gateway", "--ledger", f"sqlite:///{directory / 'ledger.db'}",
        "--policy", str(directory / "policy.toml"), "--state-key-file", str(directory / "state.keys"),
        "--hold", "1", "--", *FIXTURE,
    ]  # fmt: skip
    with signoff_server(directory, args, token, timeout=30) as (base, _), BearerProxy(base, token) as proxied:
        yield f"{proxied}/mcp"


class BearerProxy:
    """A TCP proxy on a free local port in front of `base` (`http://127.0.0.1:<port>`) that puts
    `Authorization: Bearer <token>` in each HTTP/1.1 request it passes on (for the suite, which can't send
    one) and changes nothing else: request lines, headers and bodies go up as sent, and responses, SSE
    streams included, come back byte for byte."""

    def __init__(self, base: str, token: str) -> None:
        self.port = int(base.rsplit(":", 1)[1])
        self.header = f"Authorization: Bearer {token}\r\n".encode()
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="bearer proxy", daemon=True)
        self.connections: set[asyncio.Task[None]] = set()
        self.sides: set[asyncio.Future[None]] = set()

    def __enter__(self) -> str:
        self.thread.start()
        listening = asyncio.start_server(self._connection, "127.0.0.1", 0)
        self.server = asyncio.run_coroutine_threadsafe(listening, self.loop).result(10)
        return f"http://127.0.0.1:{self.server.sockets[0].getsockname()[1]}"

    def __exit__(self, *exc: object) -> None:
        async def stop() -> None:
            """Each open connection's sides cancelled, so that it ends as it would have on its own."""
            self.server.close()
            for side in self.sides:
                side.cancel()
            if self.connections:
                await asyncio.wait(self.connections, timeout=5)

        asyncio.run_coroutine_threadsafe(stop(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()

    async def _connection(self, client: asyncio.StreamReader, back: asyncio.StreamWriter) -> None:
        try:
            upstream, up = await asyncio.open_connection("127.0.0.1", self.port)
        except OSError:
            back.close()
            return
        sides = {
            asyncio.ensure_future(self._requests(client, up)),
            asyncio.ensure_future(_pipe(upstream, back)),
        }
        connection = asyncio.current_task()
        assert connection is not None
        self.connections.add(connection)
        self.sides |= sides
        try:
            await asyncio.wait(sides, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for side in sides:
                side.cancel()
            self.sides -= sides
            self.connections.discard(connection)
            up.close()
            back.close()

    async def _requests(self, client: asyncio.StreamReader, up: asyncio.StreamWriter) -> None:
        """Each request on the connection in turn: its head, the header added, then its body."""
        with contextlib.suppress(asyncio.IncompleteReadError, ConnectionError):
            while True:
                line, _, rest = (await client.readuntil(b"\r\n\r\n")).partition(b"\r\n")
                fields = [f for f in rest.split(b"\r\n") if f and not f.lower().startswith(b"authorization:")]
                up.write(b"".join(f + b"\r\n" for f in [line, *fields]) + self.header + b"\r\n")
                named = dict(f.lower().split(b":", 1) for f in fields)
                if b"chunked" in named.get(b"transfer-encoding", b""):
                    await _chunks(client, up)
                else:
                    up.write(await client.readexactly(int(named.get(b"content-length", b"0"))))
                await up.drain()


async def _chunks(client: asyncio.StreamReader, up: asyncio.StreamWriter) -> None:
    while True:
        size = await client.readuntil(b"\r\n")
        up.write(size)
        if int(size.split(b";", 1)[0], 16) == 0:
            while (trailer := await client.readuntil(b"\r\n")) != b"\r\n":
                up.write(trailer)
            up.write(b"\r\n")
            return
        up.write(await client.readexactly(int(size.split(b";", 1)[0], 16) + 2))


async def _pipe(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
    with contextlib.suppress(ConnectionError):
        while chunk := await source.read(65536):
            sink.write(chunk)
            await sink.drain()


# -- the tests -------------------------------------------------------------------------------------------

Results = dict[str, dict[str, dict[str, Outcome]]]


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> Results:
    """Each set's outcomes, directly and through the gateway: results[set]["direct" | "gateway"]."""
    directory = tmp_path_factory.mktemp("conformance")
    found: Results = {name: {} for name in SETS}
    with fixture_over_http(directory) as url:
        for number, (name, runs) in enumerate(SETS.items()):
            found[name]["direct"] = conformance(url, runs, directory / f"direct-{number}")
    with gateway(directory / "gateway", ALLOW_ALL) as url:
        for number, (name, runs) in enumerate(SETS.items()):
            found[name]["gateway"] = conformance(url, runs, directory / f"gateway-{number}")
    return found


@pytest.mark.parametrize("name", list(SETS))
def test_no_scenario_that_passes_directly_fails_through_the_gateway(results: Results, name: str) -> None:
    direct, through = results[name]["direct"], results[name]["gateway"]
    table = _table(direct, through)
    print(f"\n{name}:\n{table}")
    passed = sorted(scenario for scenario, outcome in direct.items() if outcome.passed)
    assert len(passed) > 0, f"{name}: of the {len(direct)} scenarios run, none passed directly:\n{table}"
    if name == "2026-07-28":
        missing = sorted(set(required_2026_07_28()) - set(direct))
        assert not missing, f"{name}: scenarios of the frozen requirement set never ran: {missing}"
    regressions = {
        scenario: through[scenario].why if scenario in through else {"": "not run through the gateway"}
        for scenario in passed
        if scenario not in through or not through[scenario].passed
    }
    assert not regressions, (
        f"{name}: {len(regressions)} of the {len(passed)} that pass directly fail through the gateway:"
        + "".join(
            f"\n  {scenario}: " + "; ".join(f"{check}: {why}" for check, why in checks.items())[:700]
            for scenario, checks in regressions.items()
        )
        + f"\n{table}"
    )


def test_a_tampered_request_state_of_the_gateways_own_round_is_refused(tmp_path: Path) -> None:
    """The scenario's tool asks: round one is the gateway's own InputRequiredResult (its form, its sealed
    requestState), never forwarded upstream, and round two, that state tampered with, must be a JSON-RPC
    error, audited."""
    with gateway(tmp_path / "gateway", ASK_TAMPERED) as url:
        outcome = conformance(url, [["--scenario", TAMPERED]], tmp_path / "tampered")[TAMPERED]
    assert outcome.passed, f"{TAMPERED} on the gateway's own pending path: {outcome.verdict}: {outcome.why}"

    async def ledger() -> tuple[list[str], list[str]]:
        async with open_ledger(f"sqlite:///{tmp_path / 'gateway' / 'ledger.db'}") as opened:
            approvals = [f"{a.call.tool} {a.state.value}" for a in await opened.approvals.query()]
            refused = [
                str(e.detail.get("why")) for e in await opened.audit.entries(0, 1000) if e.action == "refuse"
            ]
            return approvals, refused

    approvals, refused = asyncio.run(ledger())
    assert approvals == ["test_input_required_result_tampered_state pending"], approvals
    assert "a tampered, expired or foreign requestState" in refused, refused


def _table(direct: dict[str, Outcome], through: dict[str, Outcome]) -> str:
    rows = [f"  {'scenario':46} {'directly':26} through the gateway"]
    for scenario, outcome in sorted(direct.items()):
        fronted = through.get(scenario)
        rows.append(f"  {scenario:46} {outcome.verdict:26} {fronted.verdict if fronted else 'not run'}")
        if fronted is not None and outcome.passed:
            lost = [  # those that failed or warned are named with their reasons above the table
                c
                for c, s in outcome.checks.items()
                if s == "SUCCESS" and fronted.checks.get(c) not in ("SUCCESS", "FAILURE", "WARNING")
            ]
            rows += [
                f"      {check}: {fronted.checks.get(check, 'absent')} through the gateway" for check in lost
            ]
    return "\n".join(rows)
