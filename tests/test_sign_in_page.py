"""Signing in on the chat page, in real Chromium (tests/js/sign_in.mjs): a server without credential-less
chats offers a sign-in instead of a dead end, with a personal token or at the OIDC issuer (a real one,
`oidc-provider-mock`, in a thread), and the chat then talks as that principal. Reproduced first: the page
said "Could not load the chat … (--anonymous-chats allows them)" and offered nothing."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
from collections.abc import Iterator

import httpx
import oidc_provider_mock
import pytest

from signoff.demo.agent import demo_agent
from signoff.demo.walkthrough import demo_policy
from signoff.ledger import MemoryLedger
from signoff.server.app import Settings, create_app
from signoff.server.login import OidcLogin
from tests.jsclient import JS_DIR, ROOT, ensure_installed
from tests.pages import CHROMIUM, artifacts
from tests.servers import in_loop


@pytest.fixture(scope="module")
def issuer() -> Iterator[str]:
    with oidc_provider_mock.run_server_in_thread() as server:
        yield f"http://localhost:{server.server_port}"


async def _sign_in(scenario: str, issuer: str) -> dict[str, str]:
    assert CHROMIUM.exists(), f"{CHROMIUM} is missing: the page tests drive Debian's chromium package"
    ensure_installed()
    async with httpx.AsyncClient() as provider:
        claims = {"name": "Alice Liddell", "roles": ["finance"]}
        assert (await provider.put(f"{issuer}/users/alice", json=claims)).status_code == 204
    async with MemoryLedger() as ledger:
        _, token = await ledger.principals.register("alice", ["finance"], actor="setup")
        login = OidcLogin(issuer=issuer, client_id="signoff", client_secret="secret")
        app = create_app(demo_agent(), ledger, Settings(token="admin", login=login), policy=demo_policy())
        async with in_loop(app) as host:
            env = {
                **os.environ,
                "SIGNOFF_BASE": f"http://{host}",
                "SIGNOFF_PRINCIPALS": json.dumps({"alice": token}),
                "SIGNOFF_ARTIFACTS": str(artifacts()),
            }
            command = ["node", str(JS_DIR / "sign_in.mjs"), scenario]
            done = await asyncio.to_thread(
                subprocess.run, command, capture_output=True, text=True, timeout=120, cwd=ROOT, env=env
            )
    assert done.returncode == 0, f"{done.stderr}{done.stdout}"
    report: dict[str, str] = json.loads(done.stdout)
    return report


async def test_a_personal_token_signs_in_on_the_chat_page(issuer: str) -> None:
    assert await _sign_in("token", issuer) == {"me": "alice"}


async def test_the_issuers_login_signs_in_on_the_chat_page(issuer: str) -> None:
    assert await _sign_in("oidc", issuer) == {"me": "Alice Liddell"}
