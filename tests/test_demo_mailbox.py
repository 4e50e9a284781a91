"""`signoff demo --mailbox`, as a new user runs it: a large payment is asked in the chat, the two finance
approvers' emails arrive at /mailbox, and deciding from both links approves it."""

from __future__ import annotations

import re
import time
from pathlib import Path

import httpx

from tests.servers import signoff_server

CHAT = {
    "id": "mail-1",
    "messages": [{"id": "u1", "role": "user", "parts": [{"type": "text", "text": "pay 700 USD to Bob"}]}],
}


def test_the_demo_mails_finance_and_decides_from_the_links(tmp_path: Path) -> None:
    args = ["demo", "--mailbox", "--ledger", f"sqlite:///{tmp_path / 'demo.db'}"]
    with signoff_server(tmp_path, args, "admin-token", timeout=30) as (base, _):
        stdout = (tmp_path / "demo.stdout").read_text()
        assert f"mailbox: {base}/mailbox" in stdout
        with httpx.Client(base_url=base, timeout=30) as client:
            reply = client.post("/api/chat", json=CHAT)
            assert '"tool-approval-request"' in reply.text, reply.text[-2000:]
            deadline = time.monotonic() + 20
            links: list[str] = []
            while len(links) < 2:
                assert time.monotonic() < deadline, client.get("/mailbox").text
                time.sleep(0.2)
                page = client.get("/mailbox").text
                links = sorted(set(re.findall(r"href='(http://[^']+/approvals/email/[^']+)'", page)))
            assert "To fiona@demo.local" in page and "To frank@demo.local" in page
            assert "Approval needed: Pay 700" in page
            for link in links:
                review = client.get(link)
                assert review.status_code == 200 and "Approve" in review.text
                nonce = re.search(r"name='nonce' value='([^']+)'", review.text)
                assert nonce is not None
                done = client.post(
                    link, data={"nonce": nonce.group(1), "decision": "approve"}, headers={"origin": base}
                )
                assert done.status_code == 200, done.text
            approvals = client.get("/api/approvals", headers={"authorization": "Bearer admin-token"}).json()
            (approval,) = approvals["approvals"]
            assert approval["state"] == "approved"
            assert sorted((v["by"], v["via"]) for v in approval["votes"]) == [
                ("fiona", "email"), ("frank", "email")
            ]  # fmt: skip
