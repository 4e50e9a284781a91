"""The chat page over the live socket (`?transport=live`, WS /api/live) in a real browser: the live-*
scenarios of tests/js/page.mjs, run as in tests/test_page.py, then checked against the server's ledger.

A live turn is one reply with one `[DONE]`, however many questions it asks; where it waits on the page it
pauses (a `finish-step`), the page's stream ends there, and the page answers the AI SDK's own way: useChat's
`addToolApprovalResponse` / `addToolOutput`, sent by `sendAutomaticallyWhen` as an ordinary `message` frame on
the same socket. Each scenario checks the frames the page sent (which answers each message carried), that each
turn had one `[DONE]` and that the page sent no POST /api/chat; here the ledger shows what each decision did.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from signoff.demo.runtime import RUNTIMES
from tests.jsclient import needs_node
from tests.pages import run_page
from tests.servers import DemoServer, demo_server

pytestmark = needs_node


@pytest.fixture(scope="module", params=RUNTIMES)
def server(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[DemoServer]:
    """One server per agent framework for every scenario; each scenario uses chats of its own."""
    folder = tmp_path_factory.mktemp("page-live")
    with demo_server(folder, browser_timeout=30, runtime=request.param) as running:
        yield running


def paid_once(server: DemoServer, report: dict[str, Any]) -> None:
    """The chat's one approval was approved by the page's own principal (its browser session, which the
    scenario reports as `me`) and consumed exactly once."""
    view = server.ledger(report["chat"])
    [approval] = view.approvals
    assert approval.state == "consumed", approval
    assert report["me"].startswith("browser:"), report
    assert approval.decision is not None and approval.decision.by == report["me"], approval
    assert len(view.actions(approval.id, "consume")) == 1


def test_approve(server: DemoServer) -> None:
    paid_once(server, run_page(server, "live-pay-approve"))


def test_deny_with_reason(server: DemoServer) -> None:
    chat_id = run_page(server, "live-pay-deny")["chat"]
    view = server.ledger(chat_id)
    [approval] = view.approvals
    assert approval.state == "denied", approval
    assert approval.decision is not None and approval.decision.reason == "not this month"
    assert view.actions(approval.id, "consume") == []


def test_location_in_the_same_turn(server: DemoServer) -> None:
    chat_id = run_page(server, "live-location")["chat"]
    [approval] = server.ledger(chat_id).approvals
    assert approval.call.tool == "get_location" and approval.state == "consumed", approval


def test_location_approved_in_the_inbox_runs_in_the_page(server: DemoServer) -> None:
    chat_id = run_page(server, "live-location-inbox")["chat"]
    [approval] = server.ledger(chat_id).approvals
    assert approval.call.tool == "get_location" and approval.state == "consumed", approval
    assert approval.decision is not None and approval.decision.by == "admin", approval


def test_play_without_asking(server: DemoServer) -> None:
    run_page(server, "live-play")


def test_reload_while_asking(server: DemoServer) -> None:
    paid_once(server, run_page(server, "live-reload"))


def test_two_approvals_in_one_turn(server: DemoServer) -> None:
    chat_id = run_page(server, "live-two-payments")["chat"]
    view = server.ledger(chat_id)
    paid = {a.call.args["recipient"]: a for a in view.approvals}
    jiro, saburo = paid["Jiro"], paid["Saburo"]
    assert jiro.state == "consumed" and len(view.actions(jiro.id, "consume")) == 1
    assert saburo.state == "denied" and saburo.decision is not None and saburo.decision.reason == "too much"
    assert view.actions(saburo.id, "consume") == []


def test_one_approval_in_the_page_one_in_the_inbox(server: DemoServer) -> None:
    report = run_page(server, "live-two-mixed")
    view = server.ledger(report["chat"])
    paid = {a.call.args["recipient"]: a for a in view.approvals}
    jiro, saburo = paid["Jiro"], paid["Saburo"]
    assert jiro.decision is not None and jiro.decision.by == report["me"], jiro
    assert jiro.state == "consumed" and len(view.actions(jiro.id, "consume")) == 1
    assert saburo.state == "denied" and saburo.decision is not None and saburo.decision.by == "admin", saburo
    assert saburo.decision.reason == "too much" and view.actions(saburo.id, "consume") == []


def test_remember_decides_on_the_server_alone(server: DemoServer) -> None:
    chat_id = run_page(server, "live-remember")["chat"]
    view = server.ledger(chat_id)
    [approval] = view.approvals  # the second payment ran on the session grant, without asking
    assert approval.decision is not None and approval.decision.remember == "session"
    assert len(view.actions(approval.id, "consume")) == 1


def test_decided_in_the_inbox(server: DemoServer) -> None:
    chat_id = run_page(server, "live-inbox")["chat"]
    view = server.ledger(chat_id)
    [approval] = view.approvals
    assert approval.decision is not None and approval.decision.by == "admin", approval
    assert approval.state == "consumed" and len(view.actions(approval.id, "consume")) == 1


def test_dropped_socket_answer_follows_the_turn_again(server: DemoServer) -> None:
    paid_once(server, run_page(server, "live-dropped"))
