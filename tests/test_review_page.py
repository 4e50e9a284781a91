"""The pages an approver uses on a phone, in a real Chromium (tests/js/review.mjs) against `signoff demo
--mailbox`: a payment to a long recipient that starts with a right-to-left override is mailed to the two
finance approvers; the mailbox, the email review page and the inbox, at 390 and 1,280 pixels, never scroll
sideways and keep their headers on one line; one approver decides from the review page with JavaScript on,
the other with JavaScript off, through the plain form, and the payment is approved by both, by email.

Screenshots go to artifacts/screenshots/ (SIGNOFF_ARTIFACTS chooses another folder) as
review-<scenario>-<nn>-<state>.png.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.jsclient import JS_DIR, ROOT, ensure_installed, needs_node
from tests.pages import CHROMIUM, artifacts
from tests.servers import signoff_server

TOKEN = "review-page-admin"
RECIPIENT = "\u202eokanaH" + "x" * 400
"""Shows as "Hanako…" unless revealed, and is one word wider than any screen."""

pytestmark = needs_node


@dataclass(frozen=True)
class Demo:
    base: str
    links: list[str]
    """The review links mailed to fiona and to frank, one each."""
    log: Path


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Demo]:
    directory = tmp_path_factory.mktemp("review-page")
    args = ["demo", "--mailbox", "--ledger", f"sqlite:///{directory / 'demo.db'}"]
    with (
        signoff_server(directory, args, TOKEN, timeout=30) as (base, _),
        httpx.Client(base_url=base) as client,
    ):
        chat = {
            "id": "review-page",
            "messages": [
                {
                    "id": "u1",
                    "role": "user",
                    "parts": [{"type": "text", "text": f"pay 700 USD to {RECIPIENT}"}],
                }
            ],
        }
        reply = client.post("/api/chat", json=chat, timeout=30)
        assert '"tool-approval-request"' in reply.text, reply.text[-2000:]
        deadline = time.monotonic() + 20
        links: list[str] = []
        while len(links) < 2:
            assert time.monotonic() < deadline, client.get("/mailbox").text[-2000:]
            time.sleep(0.2)
            links = sorted(
                set(re.findall(r"href='(http://[^']+/approvals/email/[^']+)'", client.get("/mailbox").text))
            )
        yield Demo(base, links, directory / "demo.stderr")


def run_review(demo: Demo, scenario: str) -> None:
    """Runs one tests/js/review.mjs scenario; a failure shows its output and the server's."""
    assert CHROMIUM.exists(), f"{CHROMIUM} is missing: the page tests drive Debian's chromium package"
    ensure_installed()
    env = {
        **os.environ,
        "SIGNOFF_BASE": demo.base,
        "SIGNOFF_TOKEN": TOKEN,
        "SIGNOFF_LINKS": json.dumps(demo.links),
        "SIGNOFF_ARTIFACTS": str(artifacts()),
    }
    command = ["node", str(JS_DIR / "review.mjs"), scenario]
    done = subprocess.run(
        command, capture_output=True, text=True, timeout=120, cwd=ROOT, env=env, check=False
    )
    server = "\n".join(demo.log.read_text(errors="replace").splitlines()[-40:])
    assert done.returncode == 0, (
        f"review.mjs {scenario} exited {done.returncode}\n{done.stderr}{done.stdout}\n{server}"
    )


def test_every_page_fits_a_phone_and_a_laptop(demo: Demo) -> None:
    run_review(demo, "look")
    looked = approval(demo)
    assert looked["state"] == "pending" and "votes" not in looked  # a GET never decides


def test_the_review_page_decides_with_javascript_on_and_off(demo: Demo) -> None:
    run_review(demo, "decide")
    decided = approval(demo)
    assert decided["state"] == "approved"
    assert sorted((v["by"], v["via"]) for v in decided["votes"]) == [("fiona", "email"), ("frank", "email")]


def approval(demo: Demo) -> dict[str, Any]:
    """The demo's one approval, as the REST API shows it to the admin."""
    found = httpx.get(f"{demo.base}/api/approvals", headers={"authorization": f"Bearer {TOKEN}"}).json()
    (only,) = found["approvals"]
    result: dict[str, Any] = only
    return result
