"""A page from another local origin, in the victim's own Chromium, knowing a chat id and its approval id: it
can neither read the chat nor continue it, nor approve over `WS /api/live` or a POST; the owner's page
still can (tests/js/cross_site.mjs drives both pages)."""

from __future__ import annotations

import json
import os
import subprocess
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from tests.jsclient import JS_DIR, ensure_installed, needs_node
from tests.servers import demo_server

pytestmark = needs_node
EVIL_HTML = b"<!doctype html><title>cute cats</title><p>nothing to see here</p>"


class _EvilPage(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("content-type", "text/html")
        self.end_headers()
        self.wfile.write(EVIL_HTML)

    def log_message(self, format: str, *args: object) -> None:
        """Quiet: the test's output is the attack's report."""


@pytest.fixture
def evil_site() -> Iterator[str]:
    """Another origin on the same host: for the browser another site's page, with the victim's cookies."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _EvilPage)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()


def test_a_page_on_another_site_cannot_read_continue_or_approve(tmp_path: Path, evil_site: str) -> None:
    ensure_installed()
    with demo_server(tmp_path) as demo:
        env = {**os.environ, "SIGNOFF_BASE": demo.base, "EVIL_PAGE": f"{evil_site}/evil.html"}
        done = subprocess.run(
            ["node", str(JS_DIR / "cross_site.mjs")], capture_output=True, text=True, timeout=120, env=env
        )
        assert done.returncode == 0, done.stderr
        report = json.loads(done.stdout)
    view = demo.ledger(report["chat"])  # read after the server stopped: it writes the counted refusals then

    attack = report["attack"]
    assert attack["read"].startswith("blocked"), attack
    assert attack["approveJson"].startswith("blocked"), "a JSON POST needs a preflight this server refuses"
    assert attack["approveSimple"] == attack["continueSimple"] == "sent (opaque)"
    assert attack["socket"].startswith("closed") and "before opening" in attack["socket"], attack

    [approval] = view.approvals
    assert approval.id == report["approvalId"] and str(approval.state) == "consumed"
    assert approval.by.startswith("browser:") and approval.requester == approval.by, "the owner decided"
    assert approval.call.args["amount"] == 77, "the attacker's `pay 99` never reached the chat"
    refused = [e for e in view.audit if e.action == "refuse" and e.subject == "site"]
    assert {e.detail["origin"] for e in refused} == {evil_site}
    assert {path for e in refused for path in e.detail["paths"]} >= {
        f"/api/chat/{report['chat']}",
        f"/api/chat/{report['chat']}/approvals/{report['approvalId']}",
        "/api/chat",
        "/api/live",
    }
