"""Issue 41's "no 500 from any input" for what schemathesis (tests/test_openapi.py) cannot reach: the two
routes a person's answer comes back through, which take forms rather than the REST API's JSON, and the MCP
gateway's JSON-RPC. Hypothesis fuzzes real processes: one `signoff serve` with a Slack channel (a local
stand-in for Slack's Web API) and an email channel (a real SMTP server), and one `signoff mcp-gateway` in
front of tests/mcp_upstream.py.

- Slack interactions, signed with the app's signing secret so that they reach past the signature: the
  real payload's shape with any JSON value in any position, real and made-up approval ids, linked and
  unlinked users; then raw bodies, timestamps and signatures.
- The email review form, posted from the server's own origin: any fields, repeated, many, up to the edge's
  1 MiB and past it, not UTF-8, the page's real nonce sometimes, to the genuine link, a mutated one or any.
- JSON-RPC to `/mcp`: methods, the real `tools/call` shape over calls that wait for a person, their real
  `requestState` cut or changed, answers to the gateway's form, batches and bodies that are not JSON.

No answer may be a 5xx, no traceback may reach a server's stderr, and nothing fuzzed may decide. The only
decisions a generator could make by chance are genuine ones (the linked approver's click on an approval
announced to them; the review page's own form, with its nonce and a choice): the generators never make
them, since one would settle or spend what the rest of the run attacks, and each is tested once on its
own, so the fuzz is seen to aim at the code that decides.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import hashlib
import hmac
import json
import os
import re
import shlex
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Final, Literal
from urllib.parse import parse_qsl, quote, urlencode

import httpx
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from mcp.shared.inbound import encode_header_value
from mcp_types import CLIENT_CAPABILITIES_META_KEY, PROTOCOL_VERSION_META_KEY
from slack_sdk.signature import SignatureVerifier

from signoff.channels.review import PATH as REVIEW_PATH
from signoff.channels.slack import APPROVE, DENY, REASON
from signoff.core.approval import Approval, State
from signoff.core.call import ToolCall
from signoff.core.policy import Policy
from signoff.gate import Gate, Pending
from signoff.ledger import open_ledger
from signoff.mcp import CONVERSATION
from signoff.server.edge import MAX_BODY
from signoff.server.slack import PATH as SLACK_PATH
from tests.servers import signoff_server
from tests.test_email import link_in, mail_for, smtp_server
from tests.test_mcp_gateway import MODERN, POLICY, UPSTREAM, Gateway, _principals

FUZZ = settings(
    deadline=None,
    # not Phase.explain: explaining a failure runs it against the server hundreds of times more
    phases=[Phase.explicit, Phase.reuse, Phase.generate, Phase.target, Phase.shrink],
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
)
FORM = "application/x-www-form-urlencoded"
SIGNING = "fuzzhelper-signing-secret-6f0c2a9b"
SIGNED: Final = "signed"
"""In place of a signature header's bytes: Slack's own signature, over the request's timestamp and body."""
APPROVER = "U0CAROL"
"""The one linked Slack user whom a rule admits: carol, of finance, on the payments announced in Slack."""
SLACK_USERS = [APPROVER, "U0DAVE", "U0ERIN", "U0NOBODY", "W0GHOST", "u0carol", "U0CAROL ", "U0CAROL\u200b"]
"""Carol; dave, the requester, under four eyes; erin, linked but of ops; nobody's; carol, nearly."""
PEOPLE = (
    ("bob", ["finance"], "bob@example.com", None),
    ("carol", ["finance"], None, APPROVER),
    ("dave", ["finance"], None, "U0DAVE"),
    ("erin", ["ops"], None, "U0ERIN"),
)
SERVE_POLICY = """
[[tools.pay]]
when = "amount > 1000"
action = "ask"
approvers = ["role:finance"]
quorum = 2
requester_may_approve = false
notify = ["slack:payments", "email:finance"]

[[tools.pay]]
action = "ask"
approvers = ["role:finance"]
requester_may_approve = false
notify = ["email:finance"]

[[tools.refund]]
action = "ask"
approvers = ["bob"]
notify = ["slack:payments"]
"""
ASKED = {
    "big": ToolCall("c-big", "pay", {"amount": 5000, "to": "fuzz-big"}),
    "small": ToolCall("c-small", "pay", {"amount": 50, "to": "fuzz-small"}),
    "refund": ToolCall("c-refund", "refund", {"amount": 70, "to": "fuzz-refund"}),
    "clicked": ToolCall("c-clicked", "pay", {"amount": 2000, "to": "fuzz-clicked"}),
}
"""Dave's calls, each waiting for a person: `big` is announced in Slack and by email (two of finance,
dave not among them), `small` by email only, `refund` in Slack to bob only. `clicked` and `small` are the
genuine click's and the genuine form's, which no fuzz aims at."""
FUZZED = ("big", "small", "refund")
CALLS = [{"amount": 12, "to": "fuzz-mcp"}, {"amount": 5000, "to": "fuzz-mcp-four-eyes"}]
"""The gateway's calls that wait for a person: alice's, hers to answer, and one for two of finance."""

# -- values -------------------------------------------------------------------------------------------------

ODD = st.sampled_from(
    ["\u202e", "\u2066", "\u200b", "\ufeff", "\x00", "\x1b", "\r", "\n", "\x85", "\ud800", "\uff21"]
)
CHARS = st.one_of(st.characters(exclude_categories=()), ODD)
"""Any code point, lone surrogates included, and the controls and bidi marks a person can't see."""
TEXT = st.text(CHARS, max_size=30)
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.integers(0, 400).map(lambda n: -(10**n) if n % 2 else 10**n),
    st.floats(),
    st.sampled_from([1e308, -1e308, 5e-324, 2**63, -(2**63) - 1, 2**64]),
    TEXT,
)
JSON = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(TEXT, inner, max_size=4),
    max_leaves=10,
)
HEADER = st.text(
    st.characters(min_codepoint=0x20, max_codepoint=0xFF, exclude_characters="\x7f"), max_size=60
).map(lambda value: value.strip(" ").encode("latin-1"))
"""Any value HTTP lets a header carry, bytes past ASCII included."""


def mostly(real: st.SearchStrategy[Any], other: st.SearchStrategy[Any] = JSON) -> st.SearchStrategy[Any]:
    """`real` nine times in ten, and `other` (any JSON value, unless told) else; shrinking toward `real`."""
    return st.integers(0, 9).flatmap(lambda n: other if n == 9 else real)


def mutated(real: str) -> st.SearchStrategy[str]:
    """`real` cut short, or with a character changed or put in: never `real` itself."""
    at = st.integers(0, len(real) - 1)
    return st.one_of(
        at.map(lambda n: real[:n]),
        st.tuples(at, CHARS).map(lambda c: real[: c[0]] + c[1] + real[c[0] + 1 :]),
        st.tuples(at, CHARS).map(lambda c: real[: c[0]] + c[1] + real[c[0] :]),
    ).filter(lambda changed: changed != real)


def form(fields: Sequence[tuple[str, str]]) -> bytes:
    """Fields as a browser posts them; a lone surrogate goes as the bytes it would be, which are not UTF-8."""
    return urlencode(fields, errors="surrogatepass").encode()


def since(path: Path, offset: int) -> str:
    with path.open("rb") as output:
        output.seek(offset)
        return output.read().decode(errors="replace")


def served_well(answer: httpx.Response, stderr: Path, offset: int, what: str) -> None:
    """The answer is no server error, and the server logged no traceback while it made it."""
    logged, waited = since(stderr, offset), time.monotonic() + 1
    while answer.status_code >= 500 and time.monotonic() < waited:  # its traceback is logged as it leaves
        time.sleep(0.02)
        logged, before = since(stderr, offset), logged
        if logged and logged == before:
            break
    assert answer.status_code < 500, f"{what}: {answer.status_code} {answer.text[:300]}\n{logged}"
    assert "Traceback" not in logged, f"{what}: {answer.status_code}\n{logged}"


# -- the server: `signoff serve` with Slack and email -------------------------------------------------------


class SlackWebApi(BaseHTTPRequestHandler):
    """Slack's Web API as the channel uses it (chat.postMessage, chat.update, chat.postEphemeral): all ok."""

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length") or 0))
        answer = json.dumps({"ok": True, "channel": "C0PAY", "ts": "1700000000.000001"}).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def log_message(self, format: str, *args: Any) -> None:
        """Nothing: what the test shows is the server's output."""


@contextlib.contextmanager
def slack_web_api() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), SlackWebApi)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_port}/api/"
    finally:
        server.shutdown()
        server.server_close()


@dataclass(frozen=True)
class Served:
    base: str
    ledger: str
    stderr: Path
    http: httpx.Client
    asked: dict[str, str]
    """Each of `ASKED`'s approval ids."""
    links: dict[str, str]
    """Bob's review link for each of `big` and `small`."""

    def records(self) -> dict[str, tuple[Any, ...]]:
        """Each approval as far as a decision changes it."""
        return {key: outcome(a) for key, a in asyncio.run(_approvals(self.ledger)).items()}

    def click(
        self, body: bytes, stamp: int | bytes = 0, signature: bytes | Literal["signed"] | None = SIGNED
    ) -> httpx.Response:
        """POST `body` to the Slack route at `stamp` (seconds ago, or a header's bytes), signed or not."""
        when = str(int(time.time()) - stamp).encode() if isinstance(stamp, int) else stamp
        headers = {b"content-type": FORM.encode(), b"x-slack-request-timestamp": when}
        if isinstance(signature, str):  # SIGNED
            signature = sign(when, body).encode()
        if signature is not None:
            headers[b"x-slack-signature"] = signature
        return self.http.post(SLACK_PATH, content=body, headers=headers)

    def review(self, token: str, body: bytes) -> httpx.Response:
        """POST `body` as the review form of the link with `token`, from the server's own origin."""
        path = REVIEW_PATH + quote(token, safe="", errors="surrogatepass")
        return self.http.post(path, content=body, headers={"content-type": FORM, "origin": self.base})

    def nonce(self, name: str) -> str:
        """The nonce in the form of the review page that the link for `name` shows."""
        page = self.http.get(self.links[name])
        found = re.search(r"name='nonce' value='([^']+)'", page.text)
        assert page.status_code == 200 and found is not None, page.text
        return found.group(1)


async def _approvals(url: str) -> dict[str, Approval]:
    async with open_ledger(url) as ledger:
        return {a.id: a for a in await ledger.approvals.query()}


def outcome(approval: Approval) -> tuple[Any, ...]:
    """What a decision changes in an approval."""
    return (approval.state, approval.decision, approval.votes, approval.edited, approval.spent)


async def _people(url: str) -> None:
    async with open_ledger(url) as ledger:
        for name, roles, email, slack in PEOPLE:
            await ledger.principals.register(name, roles, actor="cli:test")
            await ledger.principals.link(name, email=email, slack=slack, actor="cli:test")


async def _ask(url: str) -> dict[str, str]:
    """Dave's calls, asked through the gate the server's policy rules with: their rules notify."""
    async with open_ledger(url) as ledger:
        gate = Gate(ledger, Policy.from_toml(SERVE_POLICY))
        asked = {}
        for name, call in ASKED.items():
            ruled = await gate.authorize(call, chat_id="fuzz", wait="deferred", requester="dave")
            assert isinstance(ruled, Pending), ruled
            asked[name] = ruled.approval.id
        return asked


def sign(stamp: bytes, body: bytes) -> str:
    """The signature Slack sends: `slack_sdk`'s, or for a body that is not UTF-8 (which its helper reads as
    text) the same HMAC over the bytes."""
    try:
        signed = SignatureVerifier(SIGNING).generate_signature(timestamp=stamp.decode("latin-1"), body=body)
    except UnicodeDecodeError:
        signed = "v0=" + hmac.new(SIGNING.encode(), b"v0:%s:%s" % (stamp, body), hashlib.sha256).hexdigest()
    assert signed is not None
    return signed


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    directory = tmp_path_factory.mktemp("fuzzhelper_serve")
    url = f"sqlite:///{directory / 'ledger.db'}"
    (directory / "policy.toml").write_text(SERVE_POLICY)
    (directory / "fuzzhelper_agent.py").write_text("from pydantic_ai import Agent\nagent = Agent('test')\n")
    asyncio.run(_people(url))
    with smtp_server() as (mailbox, port), slack_web_api() as slack:
        (directory / "channels.toml").write_text(
            f'[slack.payments]\nchannel = "C0PAY"\ntoken_env = "FUZZ_SLACK_TOKEN"\n'
            f'signing_secret_env = "FUZZ_SLACK_SIGNING"\napi_url = "{slack}"\n\n'
            f'[email.finance]\nsmtp = "smtp://127.0.0.1:{port}"\nfrom = "signoff <signoff@example.com>"\n'
        )
        args = [
            "serve", "--agent", "fuzzhelper_agent:agent", "--ledger", url,
            "--policy", str(directory / "policy.toml"), "--channels", str(directory / "channels.toml"),
        ]  # fmt: skip
        env = {"FUZZ_SLACK_TOKEN": "xoxb-fuzz", "FUZZ_SLACK_SIGNING": SIGNING, "PYTHONPATH": str(directory)}
        admin = "admin-" + os.urandom(8).hex()
        with (
            signoff_server(directory, args, admin, env=env, timeout=30) as (base, _),
            httpx.Client(base_url=base, timeout=30) as http,
        ):
            asked = asyncio.run(_ask(url))
            mails = asyncio.run(mail_for(mailbox, "bob@example.com", len(ASKED) - 1))  # not the refund
            links = {}
            for name in ("big", "small"):
                (mail,) = [m for m in mails if f"fuzz-{name}" in str(m.get_body(("plain",)))]
                links[name] = link_in(mail, base)
            yield Served(base, url, directory / "serve.stderr", http, asked, links)


# -- Slack --------------------------------------------------------------------------------------------------


def interactions(asked: dict[str, str]) -> st.SearchStrategy[Any]:
    """Block actions as Slack sends them, with any JSON anywhere, on the fuzzed approvals and made-up ones;
    never carol's Approve or Deny on the payment she may decide (see `decides`)."""
    real = [asked[name] for name in FUZZED]
    made_up = st.sampled_from(["", "apr_", "apr_" + "A" * 27, "apr_%", "apr_\x00"])
    approval_ids = mostly(
        st.sampled_from(real), st.one_of(st.sampled_from(real).flatmap(mutated), made_up, JSON)
    )
    action_ids = mostly(st.sampled_from([APPROVE, DENY]), st.sampled_from([REASON, "signoff_edit"]) | JSON)
    action = st.fixed_dictionaries(
        {"action_id": action_ids, "value": approval_ids},
        optional={"type": mostly(st.just("button")), "block_id": JSON},
    )
    reason = st.one_of(TEXT, st.none(), st.sampled_from([1999, 2000, 2001, 100_000]).map(lambda n: "é" * n))
    typed = st.fixed_dictionaries({"type": st.just("plain_text_input")}, optional={"value": mostly(reason)})
    values = st.fixed_dictionaries({"reason": mostly(st.fixed_dictionaries({REASON: mostly(typed)}))})
    state = st.fixed_dictionaries({"values": mostly(values)})
    payload = st.fixed_dictionaries(
        {
            "type": mostly(st.just("block_actions"), st.sampled_from(["view_submission", "shortcut"]) | JSON),
            "user": mostly(st.fixed_dictionaries({"id": mostly(st.sampled_from(SLACK_USERS))})),
            "actions": mostly(st.lists(action, min_size=1, max_size=3), st.just([]) | JSON),
        },
        optional={
            "channel": mostly(st.fixed_dictionaries({}, optional={"id": mostly(TEXT)})),
            "state": mostly(state),
            "team": JSON,
        },
    )
    return mostly(payload).filter(lambda p: not decides(p, asked["big"]))


def decides(payload: Any, approval_id: str) -> bool:
    """Whether `payload` could be carol's own click on `approval_id`: the one genuine decision, whatever
    the types of the parts the route reads besides."""
    if not isinstance(payload, dict) or payload.get("type") != "block_actions":
        return False
    user, actions = payload.get("user"), payload.get("actions")
    first = actions[0] if isinstance(actions, list) and actions else None
    return (
        isinstance(user, dict)
        and user.get("id") == APPROVER
        and isinstance(first, dict)
        and first.get("action_id") in (APPROVE, DENY)
        and first.get("value") == approval_id
    )


def test_no_signed_interaction_is_a_server_error_or_a_decision(served: Served) -> None:
    start, before = served.stderr.stat().st_size, served.records()

    @settings(FUZZ, max_examples=200)
    @given(payload=interactions(served.asked))
    def fuzz(payload: Any) -> None:
        offset = served.stderr.stat().st_size
        answer = served.click(form([("payload", json.dumps(payload))]))
        served_well(answer, served.stderr, offset, f"payload {json.dumps(payload)[:500]}")

    fuzz()
    assert served.records() == before
    assert "Traceback" not in since(served.stderr, start)


def raw_bodies(payloads: st.SearchStrategy[Any]) -> st.SearchStrategy[bytes]:
    """Bodies the route does not take: other fields, several, a JSON body, bytes that are not UTF-8."""
    names = st.one_of(st.sampled_from(["payload", "Payload", "payload[]", "token", ""]), TEXT)
    values = st.one_of(payloads.map(json.dumps), TEXT)
    fields = st.lists(st.tuples(names, values), max_size=4).map(form)
    return st.one_of(
        fields,
        st.tuples(fields, st.binary(max_size=20)).map(lambda f: f[0] + b"\xff" + f[1]),  # not UTF-8
        st.binary(max_size=200),
        payloads.map(lambda p: json.dumps(p).encode()),  # the JSON, not in a form
        st.integers(2, 5000).map(lambda n: b"&".join([b"payload=%7B%7D"] * n)),
        st.sampled_from([b"payload", b"payload=", b"=", b"&&", b"payload=%", b"payload=%zz", b"payload=%ff"]),
    )


FRESH = st.integers(-290, 290)
"""Seconds ago, within the five minutes a Slack signature is good for."""
STAMPS = st.one_of(
    st.integers(-1000, 1000),
    st.integers(1, 6000).map(lambda n: b"9" * n),
    st.integers(4200, 6000).map(lambda n: str(int(time.time())).rjust(n, "0").encode()),
    st.sampled_from([b"", b"-1", b"+1700000000", b"1e9", b"0x10", "\xb9\xb2\xb3".encode("latin-1")]),
    HEADER,
)
"""Seconds ago, or a timestamp header's bytes: more digits than Python converts, zeros in front of now,
signs, exponents, superscript digits, anything."""
SIGNATURES = st.one_of(
    st.none(), HEADER, st.binary(min_size=32, max_size=32).map(lambda b: b"v0=" + b.hex().encode())
)


@pytest.mark.parametrize("part", ["body", "stamp", "signature"])
def test_no_raw_slack_request_is_a_server_error_or_a_decision(served: Served, part: str) -> None:
    """Each part of a request fuzzed in turn, the others as Slack sends them."""
    start, before = served.stderr.stat().st_size, served.records()
    clicks = interactions(served.asked)
    parts = {"body": clicks.map(lambda p: form([("payload", json.dumps(p))])), "stamp": FRESH}
    parts["signature"] = st.just(SIGNED)
    parts[part] = {"body": raw_bodies(clicks), "stamp": STAMPS, "signature": SIGNATURES}[part]

    @settings(FUZZ, max_examples=100)
    @given(**parts)
    def fuzz(body: bytes, stamp: int | bytes, signature: bytes | Literal["signed"] | None) -> None:
        offset = served.stderr.stat().st_size
        answer = served.click(body, stamp, signature)
        what = f"body {body[:200]!r} stamp {stamp!r} signature {signature!r}"
        served_well(answer, served.stderr, offset, what)

    fuzz()
    assert served.records() == before
    assert "Traceback" not in since(served.stderr, start)


def test_a_genuine_click_decides(served: Served) -> None:
    """What the fuzz never sends, sent once: carol's Approve, a vote of her own."""
    start = served.stderr.stat().st_size
    clicked = served.asked["clicked"]
    payload = {
        "type": "block_actions",
        "user": {"id": APPROVER},
        "channel": {"id": "C0PAY"},
        "actions": [{"action_id": APPROVE, "value": clicked, "type": "button"}],
    }
    served_well(served.click(form([("payload", json.dumps(payload))])), served.stderr, start, "carol's click")
    state, _, votes, _, _ = served.records()[clicked]
    assert state is State.PENDING and [(v.decision.by, v.decision.via) for v in votes] == [("carol", "slack")]


# -- the email review form ----------------------------------------------------------------------------------


def review_bodies(nonce: str) -> st.SearchStrategy[bytes]:
    """Forms of any fields, the page's real nonce among the values at times; never that nonce together
    with a choice (see `could_decide`)."""
    nonces = st.one_of(st.just(nonce), mutated(nonce), TEXT)
    choices = mostly(
        st.sampled_from(["approve", "deny"]), st.sampled_from(["APPROVE", "approve ", "wait", ""]) | TEXT
    )
    reasons = st.one_of(
        TEXT, st.sampled_from([2000, 2001, 65_536, MAX_BODY - 100, MAX_BODY + 1]).map(lambda n: "x" * n)
    )
    names = st.one_of(st.sampled_from(["nonce", "decision", "reason", "Nonce", "decision[]", ""]), TEXT)
    fields = st.lists(st.tuples(names, st.one_of(nonces, choices, reasons)), min_size=1, max_size=6)
    shaped = st.fixed_dictionaries({"nonce": nonces, "decision": choices}, optional={"reason": reasons}).map(
        lambda shape: list(shape.items())
    )
    forms = mostly(
        shaped, st.one_of(st.tuples(shaped, fields).map(lambda f: f[0] + f[1]), fields, st.just([]))
    )
    bodies = mostly(
        forms.map(form),
        st.one_of(
            forms.map(lambda f: form(f) + b"&reason=\xff"),  # not UTF-8
            st.binary(max_size=200),
            st.integers(4, 3000).map(lambda n: form([("reason", "x")] * n)),
        ),
    )
    return bodies.filter(lambda body: not could_decide(body, nonce))


def could_decide(body: bytes, nonce: str) -> bool:
    """Whether `body` carries the page's nonce and a choice: a superset of the forms that decide."""
    try:
        values = {value for _, value in parse_qsl(body.decode(), keep_blank_values=True)}
    except UnicodeDecodeError:
        return False
    return nonce in values and bool(values & {"approve", "deny"})


def test_no_review_form_is_a_server_error_or_a_decision(served: Served) -> None:
    token = served.links["big"].rsplit("/", 1)[1]
    start, before = served.stderr.stat().st_size, served.records()
    tokens = mostly(st.just(token), st.one_of(mutated(token), TEXT, st.sampled_from(["", ".", "a.b"])))

    @settings(FUZZ, max_examples=200)
    @given(token=tokens, body=review_bodies(served.nonce("big")))
    def fuzz(token: str, body: bytes) -> None:
        offset = served.stderr.stat().st_size
        answer = served.review(token, body)
        served_well(answer, served.stderr, offset, f"token {token!r} body {body[:200]!r}")

    fuzz()
    assert served.records() == before
    assert "Traceback" not in since(served.stderr, start)


def test_the_review_pages_own_form_decides(served: Served) -> None:
    """What the fuzz never sends, sent once: bob's Approve with the page's nonce."""
    start = served.stderr.stat().st_size
    token = served.links["small"].rsplit("/", 1)[1]
    answer = served.review(token, form([("nonce", served.nonce("small")), ("decision", "approve")]))
    served_well(answer, served.stderr, start, "bob's form")
    assert answer.status_code == 200 and "You approved it" in answer.text
    state, decision, _, _, _ = served.records()[served.asked["small"]]
    assert state is State.APPROVED and (decision.by, decision.via) == ("bob", "email")


# -- the MCP gateway ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Fronted:
    gateway: Gateway
    stderr: Path
    http: httpx.Client
    states: list[str]
    """The `requestState` of the first round of each of `CALLS`."""

    def post(self, body: bytes, headers: dict[str, str | bytes], who: str = "alice") -> httpx.Response:
        sent: dict[str, str | bytes] = {
            "authorization": f"Bearer {self.gateway.tokens[who]}",
            "accept": "application/json, text/event-stream",
            "content-type": "application/json",
            "mcp-protocol-version": MODERN,
            **headers,
        }
        raw = {k.encode(): v if isinstance(v, bytes) else v.encode() for k, v in sent.items()}
        return self.http.post("/mcp", content=body, headers=raw)

    def approvals(self) -> dict[str, Approval]:
        return asyncio.run(_approvals(f"sqlite:///{self.gateway.db}"))


FORM_CLIENT: dict[str, Any] = {"elicitation": {"form": {}}}
ENVELOPE = {PROTOCOL_VERSION_META_KEY: MODERN, CLIENT_CAPABILITIES_META_KEY: FORM_CLIENT}
"""What a 2026-07-28 client that answers forms puts in each request's `_meta`."""


def routing(message: Any) -> dict[str, str | bytes]:
    """The headers a client sends with `message`: its protocol version, method and name."""
    if not isinstance(message, dict):
        return {}
    method, params = message.get("method"), message.get("params")
    params = params if isinstance(params, dict) else {}
    meta = params.get("_meta")
    version = meta.get(PROTOCOL_VERSION_META_KEY) if isinstance(meta, dict) else None
    headers: dict[str, str | bytes] = {}
    for header, value in (
        ("mcp-protocol-version", version),
        ("mcp-method", method),
        ("mcp-name", params.get("name")),
    ):
        if isinstance(value, str):
            headers[header] = encode_header_value(value)
    return headers


@pytest.fixture(scope="module")
def fronted(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fronted]:
    """A gateway as tests/test_mcp_gateway.py runs it, holding no call (`--hold 0`), with `CALLS` asked. The
    upstream's stderr goes to a file of its own: the SDK's server logs a traceback for each request it
    fails (an unknown prompt, say), which is the upstream's to log, not the gateway's."""
    directory = tmp_path_factory.mktemp("fuzzhelper_gateway")
    db, runs, policy = directory / "ledger.db", directory / "runs.jsonl", directory / "policy.toml"
    policy.write_text(POLICY)
    tokens = asyncio.run(_principals(db))
    upstream = ["/bin/sh", "-c", f'exec "$0" "$@" 2>>{shlex.quote(str(directory / "upstream.stderr"))}']
    args = [
        "mcp-gateway", "--ledger", f"sqlite:///{db}", "--policy", str(policy), "--hold", "0",
        "--upstream-env", "UPSTREAM_RUNS", "--state-key-file", str(directory / "state.keys"),
        "--upstream-timeout", "2", "--", *upstream, *UPSTREAM,
    ]  # fmt: skip
    admin = "admin-" + os.urandom(8).hex()
    with (
        signoff_server(directory, args, admin, env={"UPSTREAM_RUNS": str(runs)}) as (base, _),
        httpx.Client(base_url=base, timeout=30) as http,
    ):
        asking = Fronted(
            Gateway(base, db, runs, {**tokens, "admin": admin}), directory / "mcp-gateway.stderr", http, []
        )
        yield dataclasses.replace(asking, states=[first_round(asking, arguments) for arguments in CALLS])


def first_round(fronted: Fronted, arguments: dict[str, Any]) -> str:
    """Alice's `pay` with `arguments`, from a client with forms: the `requestState` of its question."""
    params = {"name": "pay", "arguments": arguments, "_meta": ENVELOPE}
    message = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}
    answer = fronted.post(json.dumps(message).encode(), routing(message))
    data = [line[6:] for line in answer.text.splitlines() if line.startswith("data: ")] or [answer.text]
    result = json.loads(data[-1])["result"]
    assert result["resultType"] == "input_required", result
    return str(result["requestState"])


def messages(states: list[str]) -> st.SearchStrategy[Any]:
    """JSON-RPC requests: any method, with params in the real `tools/call` shape and any JSON anywhere, over
    the calls waiting for a person, with their states cut or changed (never as sealed)."""
    capabilities = mostly(
        st.sampled_from([{}, {"elicitation": {}}, FORM_CLIENT, {"elicitation": {"url": {}}}])
    )
    meta = st.fixed_dictionaries(
        {
            PROTOCOL_VERSION_META_KEY: mostly(
                st.just(MODERN), st.sampled_from(["2025-11-25", "2025-06-18"]) | JSON
            ),
            CLIENT_CAPABILITIES_META_KEY: capabilities,
        },
        optional={CONVERSATION: mostly(TEXT), "progressToken": JSON},
    )
    answer = st.fixed_dictionaries(
        {"action": mostly(st.sampled_from(["accept", "decline", "cancel"]))},
        optional={
            "content": mostly(
                st.fixed_dictionaries(
                    {"decision": mostly(st.sampled_from(["approve", "deny", "wait"]))},
                    optional={"reason": mostly(TEXT), "sure": JSON},
                )
            )
        },
    )
    request_states = st.one_of(
        st.sampled_from(states).flatmap(mutated), TEXT, st.sampled_from(["v1.", "v1.AAAA"])
    )
    arguments = st.one_of(
        st.sampled_from(CALLS),
        st.fixed_dictionaries({"query": TEXT}),  # lookup's, which the policy allows
        st.fixed_dictionaries({"what": TEXT}),  # confirm's, whose upstream asks a question of its own
        st.dictionaries(st.sampled_from(["amount", "to", "query", "what"]) | TEXT, JSON, max_size=3),
    )
    call = st.fixed_dictionaries(
        {
            "name": mostly(st.sampled_from(["pay", "lookup", "confirm"]), TEXT),
            "arguments": mostly(arguments),
            "_meta": mostly(meta),
        },
        optional={
            "requestState": mostly(request_states),
            "inputResponses": mostly(
                st.dictionaries(st.sampled_from(["signoff", "sure"]) | TEXT, mostly(answer))
            ),
        },
    )
    other_methods = st.fixed_dictionaries(
        {}, optional={"uri": mostly(st.sampled_from(["file:///etc/passwd", "upstream://x"])), "ref": JSON}
    )
    params = st.tuples(call, mostly(st.just({}), other_methods)).map(lambda p: {**p[1], **p[0]})
    others = ["tools/list", "resources/list", "resources/read", "prompts/get", "completion/complete",
              "initialize", "ping", "notifications/initialized"]  # fmt: skip
    methods = st.one_of(st.just("tools/call"), st.sampled_from(others))
    return st.fixed_dictionaries(
        {
            "jsonrpc": mostly(st.just("2.0")),
            "id": mostly(st.integers(0, 2**31)),
            "method": mostly(methods, TEXT),
            "params": mostly(params),
        }
    )


def rpc_bodies(states: list[str]) -> st.SearchStrategy[tuple[bytes, dict[str, str | bytes]]]:
    """A body and the headers a client sends with it: one request mostly; else a notification, a batch,
    or no JSON-RPC at all."""
    message = messages(states)
    return mostly(
        message.map(lambda m: (json.dumps(m).encode(), routing(m))),
        st.one_of(
            message.map(lambda m: {k: v for k, v in m.items() if k != "id"}).map(
                lambda m: (json.dumps(m).encode(), routing(m))
            ),
            st.lists(message, max_size=3).map(
                lambda ms: (json.dumps(ms).encode(), routing(ms[0] if ms else {}))
            ),
            st.tuples(st.binary(max_size=200), st.just({})),
            st.tuples(JSON.map(lambda v: json.dumps(v).encode()), st.just({})),
            st.tuples(st.sampled_from([b"[" * 10_000, b'{"a":' * 10_000, b"\xff\xfe{}"]), st.just({})),
        ),
    )


NAMES = mostly(st.none(), HEADER)
"""Mostly the `mcp-name` header the body names (None), else any."""


def asked_still(approval: Approval) -> bool:
    """Whether a call the fuzz made is still asked about, or expired at its rule's deadline: a `pay`
    without a string `to` meets `pay[0]`'s condition, which can't be evaluated, so that rule asks, with
    its deadline of 2 s. An expiry is the clock's, not a decision the fuzz made."""
    return approval.state is State.PENDING or (
        approval.state is State.EXPIRED and approval.closed_by == "signoff:timeout"
    )


def test_no_json_rpc_is_a_server_error_or_a_decision(fronted: Fronted) -> None:
    start, before = fronted.stderr.stat().st_size, fronted.approvals()

    @settings(FUZZ, max_examples=250)
    @given(sent=rpc_bodies(fronted.states), who=st.sampled_from(["alice", "bob"]), name=NAMES)
    def fuzz(sent: tuple[bytes, dict[str, str | bytes]], who: str, name: bytes | None) -> None:
        body, headers = sent
        offset = fronted.stderr.stat().st_size
        answer = fronted.post(body, headers if name is None else {**headers, "mcp-name": name}, who)
        served_well(answer, fronted.stderr, offset, f"as {who}: {body[:300]!r} {headers} mcp-name {name!r}")

    fuzz()
    after = fronted.approvals()
    assert {key: outcome(after[key]) for key in before} == {key: outcome(a) for key, a in before.items()}
    settled = [a for key, a in after.items() if key not in before and not asked_still(a)]
    assert settled == [], [(a.id, a.state, a.call, a.closed_by, a.closed_reason) for a in settled]
    assert fronted.gateway.ran("pay") == []
    assert "Traceback" not in since(fronted.stderr, start)
