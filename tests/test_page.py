"""The chat page and the approvals inbox in a real browser: tests/js/page.mjs drives the system Chromium
through playwright-core against one real `signoff demo` process, one scenario per test.

Each scenario fails on any expectation not met and on any console error or warning, uncaught page error or
failed request that it did not expect. Screenshots of each key state go to artifacts/screenshots/
(SIGNOFF_ARTIFACTS chooses another folder), named <scenario>-<nn>-<state>.png.

The pages act as principals: each chat page as its browser session's, the inbox as its token's (the demo's
admin token, or the personal tokens of alice and bob, of finance, whom `quorum` needs).
"""

from __future__ import annotations

import json
import subprocess
import unicodedata
from collections.abc import Iterator
from typing import Any

import pytest

from signoff.core.policy import render_description
from signoff.core.visible import hidden, reveal, script
from signoff.demo.runtime import RUNTIMES
from tests.conftest import SIGNOFF
from tests.jsclient import ROOT, needs_node
from tests.pages import run_page
from tests.servers import DemoServer, demo_server

BROWSER_TIMEOUT = 3.0
SCENARIOS = (
    "pay-approve",
    "pay-deny",
    "two-payments",
    "location-granted",
    "location-denied",
    "location-silent",
    "play",
    "inbox-blocking",
    "inbox-race",
    "reload-pending",
    "inbox-edit-grants",
    "quorum",
    "hidden-text",
    "inbox-long-value",
    "inbox-linked",
    "not-yours",
)
TASK_SCENARIOS = ("export-report", "export-cancel")
"""Long-running tools (seed 004): the demo's `export report` runs about ten seconds, with progress."""

pytestmark = needs_node


@pytest.fixture(scope="module", params=RUNTIMES)
def server(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[DemoServer]:
    """One server per agent framework for every scenario; each scenario uses chats of its own. Browser
    calls answer within milliseconds here, so a short browser timeout lets `location-silent` watch one
    run out."""
    folder = tmp_path_factory.mktemp("page")
    with demo_server(folder, browser_timeout=BROWSER_TIMEOUT, runtime=request.param) as running:
        yield running


@pytest.fixture(scope="module")
def finance(server: DemoServer) -> dict[str, str]:
    """alice and bob, with the role finance, made with the CLI in the demo's ledger: the demo's policy asks
    two of finance for a payment over 500. Their personal tokens, by name."""
    return {name: add_principal(server, name, "finance") for name in ("alice", "bob")}


def add_principal(server: DemoServer, name: str, role: str) -> str:
    """`signoff principals add` against the running demo's ledger file; the token is its last line."""
    command = [SIGNOFF, "principals", "add", name, "--role", role, "--ledger", f"sqlite:///{server.db}"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, f"{' '.join(command)} exited {done.returncode}: {done.stderr}"
    return done.stdout.strip().splitlines()[-1]


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_page(server: DemoServer, finance: dict[str, str], scenario: str) -> None:
    run_page(server, scenario, principals=finance)


@pytest.mark.parametrize("scenario", TASK_SCENARIOS)
def test_page_tasks(server: DemoServer, scenario: str) -> None:
    run_page(server, scenario)


# -- the pages' port of signoff.core.visible -----------------------------------------------------------------

FRONTEND = ROOT / "frontend"
REVEAL_SAMPLES = [
    "Pay 50 USD to \u202eokanaH",
    "M\u0430llory",
    "Mallory",
    "東京タワー",
    "Tokyoタワー",
    "東京\uff21\uff22\uff23",
    "\uff21\uff22\uff23def",
    "\uff48\uff45\uff4c\uff4c\uff4fワールド",
    "\U0001d407anako",
    "\u212aate",
    "\u03a9mega and \u2126mega",
    "Πpivet",
    "a\u200bb",
    "line\nbreak\ttab\u00a0nbsp",
    "\ufeffbom \u061cx \u0000nul",
    "café cafe\u0301 naïve_x1",
    "한국어abc 한국어日本",
    "hello_мир \u0633\u0644\u0627\u0645abc",
    "ﾊﾝｶｸ ｶﾀｶﾅカタカナ 々 〆切",
]
"""Latin, Cyrillic, Greek and fullwidth mixes, Japanese that must not be marked, hidden characters."""
# Scripts whose unrelated letters Python's `script` lumps together by the first word of their names ("OLD
# ITALIC", "OLD PERSIAN"), and Tangut ideographs, whose names Python 3.11's unicodedata lacks ("UNKNOWN"):
# there the TypeScript port is stricter, and that is fine.
LUMPED = {"OLD", "LINEAR", "TAI", "INSCRIPTIONAL", "MEROITIC", "UNKNOWN"}
REVEAL_JS = """
import { readFileSync } from "node:fs";
import { transformSync } from "rolldown/utils";
const { code } = transformSync("visible.ts", readFileSync("src/shared/visible.ts", "utf8"));
const visible = await import(`data:text/javascript;base64,${Buffer.from(code).toString("base64")}`);
const hidden = [], letters = {};
for (let cp = 0; cp <= 0x10ffff; cp++) {
  if (cp >= 0xd800 && cp <= 0xdfff) continue;
  const char = String.fromCodePoint(cp);
  if (visible.hidden(char)) hidden.push(cp);
  const script = visible.script(char);
  if (script !== undefined) letters[cp] = script;
}
const samples = JSON.parse(readFileSync(0, "utf8")).map(visible.reveal);
console.log(JSON.stringify({ samples, hidden, letters }));
"""


@needs_node
def test_reveal_is_the_same_as_pythons() -> None:
    """frontend/src/shared/visible.ts shows text as signoff.core.visible does: the same samples, the same
    hidden characters and the same letters counted as one script, wherever Python's Unicode (14) has them."""
    assert (FRONTEND / "node_modules" / "rolldown").is_dir(), "scripts/build-frontend installs rolldown"
    done = subprocess.run(
        ["node", "--input-type=module", "-e", REVEAL_JS],
        input=json.dumps(REVEAL_SAMPLES),
        capture_output=True,
        text=True,
        timeout=120,
        cwd=FRONTEND,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    shown = json.loads(done.stdout)
    assert shown["samples"] == [reveal(text) for text in REVEAL_SAMPLES]
    known = [cp for cp in range(0x110000) if unicodedata.category(chr(cp)) not in ("Cn", "Cs")]
    assert {cp for cp in known if hidden(chr(cp))} == set(shown["hidden"]) & set(known)
    # the same partition of letters into scripts, whatever each side calls a script
    ours: dict[str, set[str]] = {}
    theirs: dict[str, set[str]] = {}
    for cp in known:
        python, typescript = script(chr(cp)), shown["letters"].get(str(cp))
        assert (python is None) == (typescript is None), hex(cp)
        if python is not None and typescript is not None and python not in LUMPED:
            ours.setdefault(python, set()).add(typescript)
            theirs.setdefault(typescript, set()).add(python)
    assert {k: v for k, v in ours.items() if len(v) > 1} == {}
    assert {k: v for k, v in theirs.items() if len(v) > 1} == {}


# -- the pages' port of render_description -------------------------------------------------------------------

TITLE_SAMPLES: list[tuple[str, dict[str, Any]]] = [
    ("Pay {amount} {currency} to {recipient}", {"amount": 50, "currency": "USD", "recipient": "Hanako"}),
    ("Play {track}", {}),
    (
        "Ship {order.id} to {order.to.city} ({order.lines})",
        {"order": {"id": 7, "to": {"city": "Tōkyō"}, "lines": [1, 2.5, None]}},
    ),
    ("Send {who.name}", {"who": "alice"}),
    ("Pay {a} {b} {c}", {"a": "\u202eokanaH", "b": "line\nbreak", "c": "no\u00a0break space"}),
    ("{ {} {1} {été} {a.} {flag}", {"1": "one", "été": "summer", "flag": True}),
]
"""Placeholders that resolve, walk objects or miss; values shown as JSON (non-strings, unprintable text)."""
TITLE_JS = """
import { readFileSync } from "node:fs";
import { transformSync } from "rolldown/utils";
const { code } = transformSync("title.ts", readFileSync("src/chat/title.ts", "utf8"));
const title = await import(`data:text/javascript;base64,${Buffer.from(code).toString("base64")}`);
const samples = JSON.parse(readFileSync(0, "utf8"));
console.log(JSON.stringify(samples.map(([text, args]) => title.fillTitle(text, args))));
"""


@needs_node
def test_titles_read_as_pythons_descriptions() -> None:
    """frontend/src/chat/title.ts fills a tool's title as signoff.core.policy.render_description fills an
    approval's description, so a card reads the same whether or not the call was asked about."""
    done = subprocess.run(
        ["node", "--input-type=module", "-e", TITLE_JS],
        input=json.dumps(TITLE_SAMPLES),
        capture_output=True,
        text=True,
        timeout=60,
        cwd=FRONTEND,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == [render_description(text, args) for text, args in TITLE_SAMPLES]


# -- browser calls the page does not implement ---------------------------------------------------------------

DISPATCH_JS = """
import { rolldown } from "rolldown";
const bundle = await rolldown({ input: "src/chat/browser/dispatch.ts", logLevel: "silent" });
const { output: [chunk] } = await bundle.generate({ format: "esm" });
const dispatch = await import(`data:text/javascript;base64,${Buffer.from(chunk.code).toString("base64")}`);
const call = { type: "tool-take_photo", toolCallId: "call-1", state: "input-available", input: {} };
const located = async () => ({ output: { latitude: 35.68 } });
const registry = new Map([["get_location", located]]);
console.log(JSON.stringify({
  declared: dispatch.handedOver(new Set(["take_photo"]), call),
  undeclared: dispatch.handedOver(new Set(["get_location"]), call),
  unknown: await dispatch.answerBrowserCall(registry, call),
  known: await dispatch.answerBrowserCall(registry, { ...call, type: "tool-get_location" }),
}));
"""


@needs_node
def test_a_browser_tool_the_page_does_not_implement_gets_an_error_at_once() -> None:
    """A call of a tool the server says the browser runs, which this page has no implementation of, is
    answered with an error (frontend/src/chat/browser/dispatch.ts) instead of leaving the reply waiting."""
    assert (FRONTEND / "node_modules" / "rolldown").is_dir(), "scripts/build-frontend installs rolldown"
    done = subprocess.run(
        ["node", "--input-type=module", "-e", DISPATCH_JS],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=FRONTEND,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {
        "declared": True,
        "undeclared": False,
        "unknown": {
            "state": "output-error",
            "errorText": "this page has no implementation of the browser tool take_photo",
        },
        "known": {"state": "output-available", "output": {"latitude": 35.68}},
    }
