"""Secrets stay secret: no line a server writes, no audit entry or outbox record it keeps, no metric and no
answer it gives holds one.

Each kind of secret is made to flow the way most likely to spill it (a refused credential, a failed
delivery, a bad signature, a wrong password, a forged or expired link, a refused requestState) through a
real `signoff` process, and afterwards everything an operator or a client reads is searched for it: the
process's stdout and stderr, every field of the audit and of the outbox (what `signoff audit list` and
`signoff outbox list` show), `GET /metrics`, and every answer the server gave.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import logging
import os
import re
import secrets
import socket
import subprocess
import time
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

import httpx
import msgspec
import pytest
from aiosmtpd.controller import Controller
from aiosmtpd.smtp import AuthResult, LoginPassword
from mcp.shared.exceptions import MCPError
from mcp_types import InputRequiredResult
from pydantic_ai import Agent
from slack_sdk.signature import SignatureVerifier
from standardwebhooks.webhooks import Webhook
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from uvicorn.config import LOGGING_CONFIG
from uvicorn.logging import AccessFormatter

from signoff.channels.review import PURPOSE, Review, mint, read
from signoff.core.call import ToolCall
from signoff.core.errors import LedgerUnavailable
from signoff.core.policy import Policy
from signoff.core.principal import Authority
from signoff.ledger import MemoryLedger, open_ledger
from signoff.server.app import Settings, create_app
from signoff.server.run import ReviewLinks
from tests.conftest import SIGNOFF
from tests.servers import audited, in_loop, signoff_server
from tests.test_email import Mailbox, ask, form_nonce, link_in, people, post, smtp_server
from tests.test_mcp_gateway import APPROVE, POLICY, UPSTREAM, Gateway, answering, client, text
from tests.test_webhooks import until

PREFIXES = ("sop_", "whsec_", "xoxb-")
"""Well-known prefixes of secrets: a line that cut one off would still hold the secret."""


def forms(secret: str) -> set[str]:
    """`secret` as a line could hold it: as it is, percent-encoded, JSON-escaped, and without its prefix."""
    shown = {secret, quote(secret, safe=""), json.dumps(secret)[1:-1]}
    return shown | {secret.removeprefix(p) for p in PREFIXES if secret.startswith(p)}


@dataclass
class Exposure:
    """Everything a server shows that a secret must never reach, by where it was read."""

    places: dict[str, str] = field(default_factory=dict)
    answers: list[str] = field(default_factory=list)

    def answered(self, response: httpx.Response) -> httpx.Response:
        """`response`, its status, headers and body kept to be searched."""
        self.answers.append(f"{response.status_code} {dict(response.headers)}\n{response.text}")
        return response

    def refused(self, error: MCPError) -> None:
        """A JSON-RPC error the server answered, as it came."""
        self.answers.append(error.error.model_dump_json())

    async def read_metrics(self, base: str, admin: str) -> None:
        async with httpx.AsyncClient() as http:
            metrics = await http.get(f"{base}/metrics", headers=bearer(admin))
        assert metrics.status_code == 200, metrics.text
        self.places["metrics"] = metrics.text

    async def read_after(self, directory: Path, name: str, ledger: str) -> None:
        """What the stopped server `name` wrote, and what its ledger keeps."""
        for stream in ("stdout", "stderr"):
            self.places[stream] = (directory / f"{name}.{stream}").read_text(errors="replace")
        async with open_ledger(ledger) as opened:
            entries = await opened.audit.entries(0, 100_000)
            notices = await opened.outbox.query()
        self.places["audit"] = "\n".join(msgspec.json.encode(e).decode() for e in entries)
        self.places["outbox"] = "\n".join(msgspec.json.encode(n).decode() for n in notices)

    def showing(self, *hidden: str) -> list[str]:
        """The places that show any form of any of `hidden`."""
        texts = {**self.places, "answers": "\n".join(self.answers)}
        return sorted(
            place for place, text in texts.items() if any(f in text for s in hidden for f in forms(s))
        )


def bearer(token: str) -> dict[str, str]:
    return {"authorization": f"Bearer {token}"}


def sqlite(directory: Path) -> str:
    return f"sqlite:///{directory / 'ledger.db'}"


def signoff(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [SIGNOFF, *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "COLUMNS": "200", **(env or {})},
        check=False,
    )


async def audited_kinds(ledger: str, *kinds: str) -> None:
    """Until the server has written its counted refusals of each of `kinds` (once their second ended)."""
    async with open_ledger(ledger) as opened:
        await audited(opened, lambda entries: set(kinds) <= {e.detail.get("kind") for e in entries})


def free_port() -> int:
    """A port nothing listens on."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_the_search_finds_a_secret_in_every_place_and_form() -> None:
    """The check every test below relies on: a secret shows, in any of its forms and in any place."""
    secret = "sop_" + secrets.token_urlsafe(24) + "/+="
    for place in ("stdout", "stderr", "audit", "outbox", "metrics"):
        for shown in forms(secret):
            assert Exposure({place: f"before {shown} after"}).showing(secret) == [place]
    assert Exposure(answers=[f'{{"error": "{secret[4:]}"}}']).showing(secret) == ["answers"]
    assert Exposure({"stderr": secret[:-1]}, [secret[5:]]).showing(secret) == []  # parts are not it


# -- the admin token ----------------------------------------------------------------------------------------

DECIDE = {"approved": True}

COMMANDS = {
    "demo": (["demo"], []),
    "serve": (["serve", "--agent", "quiet_agent:agent"], []),
    "mcp-gateway": (["mcp-gateway"], ["--", *UPSTREAM]),
}
"""Every command that serves, with what it needs before and after the shared options."""


async def use_admin(base: str, admin: str, seen: Exposure) -> None:
    """The admin token used, mistyped, and sent with the wrong scheme: the last two are refused, and the
    refusals audited."""
    async with httpx.AsyncClient(base_url=base) as http:
        me = seen.answered(await http.get("/api/me", headers=bearer(admin)))
        assert me.status_code == 200 and me.json()["id"] == "admin"
        typo = seen.answered(await http.get("/api/approvals", headers=bearer(admin + "x")))
        scheme = await http.get("/api/approvals", headers={"authorization": f"Token {admin}"})
        assert typo.status_code == seen.answered(scheme).status_code == 401
        missing = await http.post("/api/approvals/apr_missing/decision", json=DECIDE, headers=bearer(admin))
        assert seen.answered(missing).status_code == 404
    await seen.read_metrics(base, admin)


@pytest.mark.parametrize("command", COMMANDS)
async def test_an_admin_token_from_the_environment_is_never_shown(command: str, tmp_path: Path) -> None:
    """`SIGNOFF_API_TOKEN` lands in no output: the ready lines say where the token came from instead."""
    admin = "admin-" + secrets.token_urlsafe(24)
    (tmp_path / "quiet_agent.py").write_text("from pydantic_ai import Agent\nagent = Agent('test')\n")
    before, after = COMMANDS[command]
    args = [*before, "--ledger", sqlite(tmp_path), *after]
    seen = Exposure()
    with signoff_server(tmp_path, args, admin, env={"PYTHONPATH": str(tmp_path)}) as (base, _):
        await use_admin(base, admin, seen)
        await audited_kinds(sqlite(tmp_path), "bad-token", "bad-scheme")
    await seen.read_after(tmp_path, command, sqlite(tmp_path))
    assert "approvals API token: from SIGNOFF_API_TOKEN\n" in seen.places["stdout"]
    assert seen.showing(admin) == []


async def test_a_generated_admin_token_is_printed_once_and_nowhere_else(tmp_path: Path) -> None:
    """Nobody else knows a token signoff made, so it is printed once, on stdout; it shows nowhere else."""
    seen = Exposure()
    with signoff_server(tmp_path, ["demo", "--ledger", sqlite(tmp_path)], "") as (base, _):
        stdout = tmp_path / "demo.stdout"
        await until(lambda: "approvals API token: " in stdout.read_text())
        printed = re.search(r"^approvals API token: (\S+)$", stdout.read_text(), re.M)
        assert printed is not None and printed.group(1) != "from"
        admin = printed.group(1)
        await use_admin(base, admin, seen)
        await audited_kinds(sqlite(tmp_path), "bad-token", "bad-scheme")
    await seen.read_after(tmp_path, "demo", sqlite(tmp_path))
    assert seen.places["stdout"].count(admin) == 1
    seen.places["stdout"] = seen.places["stdout"].replace(printed.group(0), "")
    assert seen.showing(admin) == []


def test_the_stdio_gateway_prints_no_secret(tmp_path: Path) -> None:
    """Over stdio the gateway's stdout is the protocol's and stderr its own: neither holds the admin token,
    nor the credentials an upstream URL carries."""
    admin, password, key = (secrets.token_urlsafe(24) for _ in range(3))
    upstream = f"http://signoff:{password}@127.0.0.1:{free_port()}/mcp?key={key}"
    done = signoff(
        "mcp-gateway", "--stdio", "--ledger", sqlite(tmp_path), "--upstream-url", upstream,
        "--state-key-file", str(tmp_path / "state.keys"), env={"SIGNOFF_API_TOKEN": admin},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "signoff mcp-gateway: stdio, requester mcp:" in done.stderr
    seen = Exposure({"stdout": done.stdout, "stderr": done.stderr})
    assert seen.showing(admin, password, key) == []


async def test_an_upstream_that_does_not_start_is_logged_without_the_credentials_in_its_url(
    tmp_path: Path,
) -> None:
    """An upstream URL may carry a credential (a user and password, an API key in its query); the warning
    that it did not start names the upstream, and must not hand the credential to the logs."""
    password, key = secrets.token_urlsafe(24), secrets.token_urlsafe(24)
    upstream = f"http://signoff:{password}@127.0.0.1:{free_port()}/mcp?key={key}"
    args = ["mcp-gateway", "--ledger", sqlite(tmp_path), "--upstream-url", upstream]
    with signoff_server(tmp_path, args, secrets.token_urlsafe(24)):
        stderr = tmp_path / "mcp-gateway.stderr"
        await until(lambda: "did not start" in stderr.read_text())
    assert Exposure({"stderr": stderr.read_text()}).showing(password, key) == []


# -- personal tokens ----------------------------------------------------------------------------------------


async def test_a_personal_token_is_shown_only_by_principals_add(tmp_path: Path) -> None:
    """`principals add` prints the token once, and nothing else ever does: not its use, a mistyped use, nor
    its use after `principals revoke`, refused and audited."""
    ledger, admin = sqlite(tmp_path), secrets.token_urlsafe(24)
    added = signoff("principals", "add", "alice", "--role", "finance", "--ledger", ledger)
    assert added.returncode == 0, added.stderr
    token = added.stdout.splitlines()[-1]
    assert token.startswith("sop_") and added.stdout.count(token) == 1
    seen = Exposure({"principals add, stderr": added.stderr})
    with signoff_server(tmp_path, ["demo", "--ledger", ledger], admin) as (base, _):
        async with httpx.AsyncClient(base_url=base) as http:
            me = seen.answered(await http.get("/api/me", headers=bearer(token)))
            assert me.status_code == 200 and me.json()["id"] == "alice"
            missing = await http.post(
                "/api/approvals/apr_missing/decision", json=DECIDE, headers=bearer(token)
            )
            assert seen.answered(missing).status_code == 404
            typo = seen.answered(await http.get("/api/me", headers=bearer(token + "x")))
            assert typo.status_code == 401
            revoked = signoff("principals", "revoke", "alice", "--ledger", ledger)
            assert revoked.returncode == 0, revoked.stderr
            again = seen.answered(await http.get("/api/me", headers=bearer(token)))
            assert (
                again.status_code == 401
                and again.json()["error"]["message"] == "the token is unknown or revoked"
            )
        await seen.read_metrics(base, admin)
        await audited_kinds(ledger, "unknown-token")
    await seen.read_after(tmp_path, "demo", ledger)
    seen.places["principals revoke"] = revoked.stdout + revoked.stderr
    for args in (["principals", "list"], ["audit", "list", "--limit", "10000"], ["outbox", "list"]):
        shown = signoff(*args, "--ledger", ledger)
        seen.places[" ".join(args)] = shown.stdout + shown.stderr
    assert seen.showing(token) == []


# -- channels -----------------------------------------------------------------------------------------------


async def announce(ledger: str, *channels: str) -> str:
    """An approval the rule announces on `channels`, opened in the ledger the server watches."""
    async with open_ledger(ledger) as opened:
        approval = await opened.approvals.open(
            ToolCall(f"call_{secrets.token_hex(4)}", "pay", {"amount": 700, "to": "Bob"}),
            chat_id="chat",
            description="Pay 700 USD to Bob",
            rule="pay[0]",
            requester="dave",
            authority=Authority(approvers=("role:finance",)),
            notify=channels,
        )
    return approval.id


async def notices_settled(ledger: str, approval_id: str, settled: Callable[[Any], bool]) -> None:
    """Until every notice of the approval is `settled`."""

    async def check() -> bool:
        async with open_ledger(ledger) as opened:
            notices = await opened.outbox.query(approval_id=approval_id)
        return bool(notices) and all(settled(n) for n in notices)

    await until(check, within=20.0)


@dataclass
class Receiver:
    """A webhook endpoint that checks each delivery's signature with the channel's secret, so a delivery
    shows the secret was used, and answers `status`."""

    secret: str
    status: int
    verified: int = 0

    async def hook(self, request: Request) -> Response:
        Webhook(self.secret).verify(await request.body(), dict(request.headers))
        self.verified += 1
        return Response(status_code=self.status)


async def test_webhook_secrets_stay_out_of_failed_deliveries(tmp_path: Path) -> None:
    """Three webhooks that fail in each way a delivery can: a 500 retried then given up on, a 410 that
    disables its endpoint, and an endpoint that is not there; every failure is recorded and audited."""
    keys = {name: "whsec_" + base64.b64encode(os.urandom(32)).decode() for name in ("OPS", "GONE", "DEAD")}
    failing, gone = Receiver(keys["OPS"], 500), Receiver(keys["GONE"], 410)
    app = Starlette(
        routes=[Route("/ops", failing.hook, methods=["POST"]), Route("/gone", gone.hook, methods=["POST"])]
    )
    ledger, admin = sqlite(tmp_path), secrets.token_urlsafe(24)
    seen = Exposure()
    async with in_loop(app) as receiver:
        targets = {"OPS": f"http://{receiver}/ops", "GONE": f"http://{receiver}/gone"}
        targets["DEAD"] = f"http://127.0.0.1:{free_port()}/hook"
        (tmp_path / "channels.toml").write_text(
            "".join(
                f'[webhook.{name.lower()}]\nurl = "{url}"\nsecret_env = "HOOK_{name}"\nallow_private = true\n'
                'retry_schedule = ["1s"]\ngive_up_after = "1m"\n'
                for name, url in targets.items()
            )
        )
        env = {f"HOOK_{name}": key for name, key in keys.items()}
        args = ["demo", "--ledger", ledger, "--channels", str(tmp_path / "channels.toml")]
        with signoff_server(tmp_path, args, admin, env=env) as (base, _):
            approval_id = await announce(ledger, "webhook:ops", "webhook:gone", "webhook:dead")
            await notices_settled(ledger, approval_id, lambda n: n.state == "failed")
            await seen.read_metrics(base, admin)
    await seen.read_after(tmp_path, "demo", ledger)
    assert failing.verified == 2 and gone.verified == 1
    assert "HTTP 500" in seen.places["audit"] and "channel-disabled" in seen.places["audit"]
    assert "cannot reach 127.0.0.1" in seen.places["outbox"]
    assert seen.showing(*keys.values()) == []


@dataclass
class SlackApi:
    """Slack's Web API refusing the bot token, as it does a revoked one: each call's credential kept."""

    tokens: list[str] = field(default_factory=list)

    async def method(self, request: Request) -> Response:
        self.tokens.append(request.headers.get("authorization", ""))
        return JSONResponse({"ok": False, "error": "invalid_auth"})


def slack_click(
    secret: str, approval_id: str, user: str, *, age: float = 0.0
) -> tuple[bytes, dict[str, str]]:
    """An Approve click as Slack sends it, signed with `secret` `age` seconds ago."""
    payload = {
        "type": "block_actions",
        "user": {"id": user},
        "channel": {"id": "C0PAY"},
        "actions": [{"action_id": "signoff_approve", "value": approval_id, "type": "button"}],
    }
    body = urlencode({"payload": json.dumps(payload)}).encode()
    stamp = str(int(time.time() - age))
    headers = {
        "content-type": "application/x-www-form-urlencoded",
        "x-slack-request-timestamp": stamp,
        "x-slack-signature": SignatureVerifier(secret).generate_signature(timestamp=stamp, body=body),
    }
    return body, headers


async def test_the_slack_bot_token_and_signing_secret_stay_out_of_failures(tmp_path: Path) -> None:
    """Slack refuses the bot token (the post fails, and so does the note to a user who may not decide,
    which is logged), and clicks come forged, stale, and from a user linked to nobody."""
    token, signing = "xoxb-" + secrets.token_urlsafe(24), secrets.token_hex(16)
    api = SlackApi()
    ledger, admin = sqlite(tmp_path), secrets.token_urlsafe(24)
    seen = Exposure()
    async with in_loop(Starlette(routes=[Route("/api/{method}", api.method, methods=["POST"])])) as slack:
        (tmp_path / "channels.toml").write_text(
            f'[slack.payments]\nchannel = "C0PAY"\ntoken_env = "SLACK_TOKEN"\n'
            f'signing_secret_env = "SLACK_SIGNING"\napi_url = "http://{slack}/api/"\n'
        )
        env = {"SLACK_TOKEN": token, "SLACK_SIGNING": signing}
        args = ["demo", "--ledger", ledger, "--channels", str(tmp_path / "channels.toml")]
        with signoff_server(tmp_path, args, admin, env=env) as (base, _):
            approval_id = await announce(ledger, "slack:payments")
            await notices_settled(ledger, approval_id, lambda n: n.attempts > 0 and bool(n.last_error))
            async with httpx.AsyncClient(base_url=base) as http:
                route = "/api/channels/slack/interactions"
                for click, status in (
                    (slack_click(secrets.token_hex(16), approval_id, "U0NOBODY"), 401),
                    (slack_click(signing, approval_id, "U0NOBODY", age=600), 401),
                    (slack_click(signing, approval_id, "U0NOBODY"), 200),
                ):
                    body, headers = click
                    answer = seen.answered(await http.post(route, content=body, headers=headers))
                    assert answer.status_code == status, answer.text
            stderr = tmp_path / "demo.stderr"
            await until(lambda: "Slack: could not tell U0NOBODY" in stderr.read_text())
            await audited_kinds(ledger, "bad-signature")
            await seen.read_metrics(base, admin)
    await seen.read_after(tmp_path, "demo", ledger)
    assert f"Bearer {token}" in api.tokens
    assert "Slack: invalid_auth" in seen.places["outbox"]
    assert "a Slack user linked to no principal" in seen.places["audit"]
    assert seen.showing(token, signing) == []


@contextlib.contextmanager
def smtp_with_login(password: str) -> Iterator[tuple[Mailbox, int, list[str]]]:
    """An SMTP server that takes mail only after a login as `signoff` with `password`; it keeps every
    password it was given."""
    mailbox, tried = Mailbox(), []

    def authenticate(server: Any, session: Any, envelope: Any, mechanism: str, data: Any) -> AuthResult:
        assert isinstance(data, LoginPassword)
        tried.append(data.password.decode())
        return AuthResult(success=data == LoginPassword(b"signoff", password.encode()), handled=False)

    controller = Controller(
        mailbox, hostname="127.0.0.1", port=free_port(), authenticator=authenticate,
        auth_required=True, auth_require_tls=False,
    )  # fmt: skip
    controller.start()
    try:
        yield mailbox, controller.port, tried
    finally:
        controller.stop()


@pytest.mark.filterwarnings("ignore:Requiring AUTH while not requiring TLS:UserWarning")  # a local server
async def test_smtp_passwords_stay_out_of_failed_logins(tmp_path: Path) -> None:
    """Two email channels on one SMTP server: one logs in and delivers, the other's password is wrong, so
    each of its attempts fails, and is recorded."""
    right, wrong = "right-" + secrets.token_urlsafe(24), "wrong-" + secrets.token_urlsafe(24)
    ledger, admin = sqlite(tmp_path), secrets.token_urlsafe(24)
    seen = Exposure()
    with smtp_with_login(right) as (mailbox, port, tried):
        (tmp_path / "channels.toml").write_text(
            "".join(
                f'[email.{name}]\nsmtp = "smtp://127.0.0.1:{port}"\nfrom = "s@example.com"\n'
                f'username_env = "SMTP_USER"\npassword_env = "SMTP_{name.upper()}"\n'
                for name in ("finance", "ops")
            )
        )
        env = {"SMTP_USER": "signoff", "SMTP_FINANCE": right, "SMTP_OPS": wrong}
        args = ["demo", "--ledger", ledger, "--channels", str(tmp_path / "channels.toml")]
        with signoff_server(tmp_path, args, admin, env=env) as (base, _):
            async with open_ledger(ledger) as opened:
                await people(opened)
            approval_id = await announce(ledger, "email:finance", "email:ops")
            await notices_settled(ledger, approval_id, lambda n: n.state == "delivered" or bool(n.last_error))
            await seen.read_metrics(base, admin)
    await seen.read_after(tmp_path, "demo", ledger)
    assert right in tried and wrong in tried and mailbox.to("bob@example.com")
    assert "535" in seen.places["outbox"]
    assert seen.showing(right, wrong) == []


# -- email review links -------------------------------------------------------------------------------------


@dataclass
class ReviewSite:
    """A `signoff demo` that mails review links, and bob's."""

    base: str
    ledger: str
    admin: str
    links: list[str]
    """Bob's review link to each approval, in the order they were asked for."""


@contextlib.asynccontextmanager
async def reviewing(directory: Path, *deadlines: float | None) -> AsyncIterator[ReviewSite]:
    """`signoff demo` with an email channel, and an approval for each of `deadlines` (seconds from now, or
    none) mailed to bob, with his link to each."""
    ledger, admin = sqlite(directory), secrets.token_urlsafe(24)
    with smtp_server() as (mailbox, port):
        (directory / "channels.toml").write_text(
            f'[email.finance]\nsmtp = "smtp://127.0.0.1:{port}"\nfrom = "signoff <s@example.com>"\n'
        )
        args = ["demo", "--ledger", ledger, "--channels", str(directory / "channels.toml")]
        with signoff_server(directory, args, admin) as (base, _):
            async with open_ledger(ledger) as opened:
                await people(opened)
                keys = opened.audit.keyring.derived(PURPOSE)
                asked = [await ask(opened, f"c{n}", deadline) for n, deadline in enumerate(deadlines)]
                async with asyncio.timeout(15):
                    while len(links := _links(mailbox, base, keys)) < len(deadlines):
                        await asyncio.sleep(0.05)
            yield ReviewSite(base, ledger, admin, [links[approval_id] for approval_id in asked])


def _links(mailbox: Mailbox, base: str, keys: tuple[bytes, ...]) -> dict[str, str]:
    found = {}
    for message in mailbox.to("bob@example.com"):
        body = message.get_body(("plain",))
        if body is not None and "Review and decide" in body.get_content():
            link = link_in(message, base)
            review = read(keys, link.rpartition("/")[2])
            assert review is not None
            found[review.approval] = link
    return found


def review_secrets(links: list[str]) -> list[str]:
    """Each link's token, and its MAC alone: the part nobody without the audit key can make."""
    tokens = [link.rpartition("/")[2] for link in links]
    return [*tokens, *(token.rpartition(".")[2] for token in tokens)]


async def test_email_review_tokens_stay_out_of_logs_and_audit(tmp_path: Path) -> None:
    """A link used as it should be, with a form from elsewhere, replayed after its decision, forged, and
    expired: each refusal is audited, in its principal's name, and never with the token."""
    seen = Exposure()
    async with reviewing(tmp_path, None, 2.0) as site:
        lasting, expiring = site.links
        async with httpx.AsyncClient() as http:
            assert seen.answered(await http.get(lasting)).status_code == 200
            nonce = await form_nonce(http, lasting)
            stray = seen.answered(await post(http, lasting, site.base, nonce="x" * 43, decision="approve"))
            assert stray.status_code == 403
            done = seen.answered(await post(http, lasting, site.base, nonce=nonce, decision="approve"))
            assert done.status_code == 200 and "You approved it" in done.text
            replayed = seen.answered(await post(http, lasting, site.base, nonce=nonce, decision="approve"))
            assert replayed.status_code >= 400
            forged = f"{lasting.rpartition('.')[0]}.{secrets.token_urlsafe(32)}"
            assert seen.answered(await http.get(forged)).status_code == 404
            await asyncio.sleep(2.5)
            late = seen.answered(await http.get(expiring))
            assert late.status_code == 410 and "the link expired" in late.text
        await audited_kinds(site.ledger, "bad-link")
        await seen.read_metrics(site.base, site.admin)
    await seen.read_after(tmp_path, "demo", site.ledger)
    assert seen.places["audit"].count('"action":"refuse"') >= 3
    assert seen.showing(*review_secrets(site.links)) == []


async def test_an_email_review_link_refused_at_the_edge_keeps_its_token_out_of_the_audit(
    tmp_path: Path,
) -> None:
    """A link opened by a name the server was not told it has (a channels file's `public_url` without
    `--allowed-host`), and its form posted from another site: both refused at the edge, and audited. The
    audit names the path asked for, cut to `refusals.EXAMPLE` characters, which drops the token's MAC."""
    seen = Exposure()
    async with reviewing(tmp_path, None) as site:
        (link,) = site.links
        async with httpx.AsyncClient() as http:
            foreign = seen.answered(await http.get(link, headers={"host": "signoff.example.com"}))
            assert foreign.status_code == 400
            crossing = await post(http, link, "https://elsewhere.example", nonce="x", decision="approve")
            assert seen.answered(crossing).status_code == 403
        await audited_kinds(site.ledger, "foreign-host", "cross-site")
    await seen.read_after(tmp_path, "demo", site.ledger)
    assert seen.showing(*review_secrets(site.links)) == []


async def test_a_mangled_email_review_link_keeps_its_token_out_of_the_audit(tmp_path: Path) -> None:
    """A genuine link with a character after it, as a mail client may take the `>` or `.` that follows a
    link in plain text: no key made that token, so it is a 404, counted as a refusal and audited."""
    seen = Exposure()
    async with reviewing(tmp_path, None) as site:
        (link,) = site.links
        async with httpx.AsyncClient() as http:
            assert seen.answered(await http.get(link + ">")).status_code == 404
        await audited_kinds(site.ledger, "bad-link")
    await seen.read_after(tmp_path, "demo", site.ledger)
    assert seen.showing(*review_secrets(site.links)) == []


async def test_a_review_link_met_by_an_unavailable_ledger_is_logged_without_its_token(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """In an app served in-process, as a host app mounts it: a database that is away is a 503 page, and
    what is logged of it, at any level, names no token."""
    async with MemoryLedger() as ledger:
        review = Review("apr_x", "bob", "0" * 64, ledger.approvals.clock() + 60, "ntc_x")
        token = mint(ledger.audit.keyring.derived(PURPOSE), review)

        async def away(approval_id: str) -> Any:
            raise LedgerUnavailable("the ledger's server is restarting")

        ledger.approvals.get = away  # type: ignore[method-assign]
        app = create_app(Agent("test"), ledger, Settings(token="admin"), policy=Policy())
        seen = Exposure()
        with caplog.at_level(logging.DEBUG):
            async with in_loop(app) as address, httpx.AsyncClient() as http:
                answer = seen.answered(await http.get(f"http://{address}/approvals/email/{token}"))
        assert answer.status_code == 503
    seen.places["logging"] = "\n".join(  # what the server logged, not the test's own client
        caplog.handler.format(r) for r in caplog.records if not r.name.startswith(("httpx", "httpcore"))
    )
    assert seen.showing(token) == []


def test_log_lines_of_signoffs_servers_hide_review_tokens() -> None:
    """What `signoff serve` logs through uvicorn's logging passes `ReviewLinks`: uvicorn's access line, and
    any warning that quotes a request's path."""
    token = secrets.token_urlsafe(40) + "." + secrets.token_urlsafe(32)
    path = f"/approvals/email/{token}"
    access = logging.LogRecord(
        "uvicorn.access", logging.INFO, __file__, 1, '%s - "%s %s HTTP/%s" %d',
        ("127.0.0.1:5000", "GET", f"{path}?x=1", "1.1", 404), None,
    )  # fmt: skip
    warning = logging.LogRecord(
        "signoff.server", logging.WARNING, __file__, 1, "%s %s: %s", ("GET", path, "away"), None
    )
    said = logging.LogRecord(
        "signoff.server", logging.WARNING, __file__, 1, f"POST {path} failed", None, None
    )
    hiding = ReviewLinks()
    assert all(hiding.filter(record) for record in (access, warning, said))
    lines = [
        AccessFormatter(LOGGING_CONFIG["formatters"]["access"]["fmt"], use_colors=False).format(access),
        warning.getMessage(),
        said.getMessage(),
    ]
    assert lines == [
        'INFO:     127.0.0.1:5000 - "GET /approvals/email/<token>?x=1 HTTP/1.1" 404 Not Found',
        "GET /approvals/email/<token>: away",
        "POST /approvals/email/<token> failed",
    ]


# -- MCP requestState ---------------------------------------------------------------------------------------


async def test_an_mcp_request_state_stays_out_of_refusals(tmp_path: Path) -> None:
    """An input round's sealed state, sent back tampered, by another principal, and replayed after its call
    ran: each refused with a JSON-RPC error and audited, none with the state."""
    db, runs, policy = tmp_path / "ledger.db", tmp_path / "runs.jsonl", tmp_path / "policy.toml"
    policy.write_text(POLICY)
    ledger, admin = f"sqlite:///{db}", secrets.token_urlsafe(24)
    async with open_ledger(ledger) as opened:
        tokens = {
            name: (await opened.principals.register(name, [], actor="cli:test"))[1]
            for name in ("alice", "dave")
        }
    args = [
        "mcp-gateway", "--ledger", ledger, "--policy", str(policy), "--hold", "1", "--upstream-env",
        "UPSTREAM_RUNS", "--state-key-file", str(tmp_path / "state.keys"), "--", *UPSTREAM,
    ]  # fmt: skip
    call = {"amount": 13, "to": "sealed"}
    seen = Exposure()
    with signoff_server(tmp_path, args, admin, env={"UPSTREAM_RUNS": str(runs)}) as (base, _):
        gateway = Gateway(base, db, runs, {**tokens, "admin": admin})
        async with client(gateway, "alice", elicitation_callback=answering("approve")) as mcp:
            first = await mcp.session.call_tool("pay", call, allow_input_required=True)
            assert isinstance(first, InputRequiredResult) and first.request_state
            state = first.request_state
            tampered = state[:-4] + ("AAAA" if not state.endswith("AAAA") else "BBBB")
            async with client(gateway, "dave", elicitation_callback=answering("approve")) as thief:
                for caller, given in ((mcp, tampered), (thief, state)):
                    with pytest.raises(MCPError) as refused:
                        await caller.session.call_tool(
                            "pay",
                            call,
                            request_state=given,
                            input_responses=APPROVE,
                            allow_input_required=True,
                        )
                    seen.refused(refused.value)
            ran = await mcp.session.call_tool("pay", call, request_state=state, input_responses=APPROVE)
            assert text(ran) == "paid 13.0 to sealed"
            with pytest.raises(MCPError) as replayed:
                await mcp.session.call_tool(
                    "pay", call, request_state=state, input_responses=APPROVE, allow_input_required=True
                )
            seen.refused(replayed.value)
        await seen.read_metrics(base, admin)
    await seen.read_after(tmp_path, "mcp-gateway", ledger)
    assert seen.places["audit"].count('"action":"refuse"') >= 3
    assert seen.showing(state) == []
