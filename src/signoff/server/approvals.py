"""`/api/approvals` and `/api/grants`: list, get and decide approvals, follow them live, revoke grants.

Every route needs the bearer token. A decision here is the same ledger call as one from the CLI or a chat,
so the first decision wins whatever channel it came from, and a waiting tool wakes on any worker.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any, Literal

import msgspec
from sse_starlette import EventSourceResponse, ServerSentEvent
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from signoff.core.approval import Approval, State
from signoff.core.call import digest
from signoff.core.decision import Decision, Verdict
from signoff.core.errors import AlreadyDecided, AlreadyRevoked, InvalidCall, InvalidDecision, NotFound
from signoff.core.grant import Grant
from signoff.ledger.base import Ledger
from signoff.server.auth import Handler, guarded
from signoff.server.feed import ApprovalFeed
from signoff.server.http import BadBody, ListQuery, error, json_response, read_body

MAX_BODY = 64 * 1024


class DecisionBody(msgspec.Struct, forbid_unknown_fields=True):
    approved: bool
    reason: str = ""
    args: dict[str, Any] | None = None
    remember: Literal["once", "session", "always"] = "once"
    by: str = ""

    def decision(self) -> Decision:
        """The core's `Decision` checks what makes no sense (a remembered denial) and says why."""
        verdict: Verdict = "deny" if not self.approved else "approve" if self.args is None else "edit"
        args = self.args if self.approved else None
        by = f"api:{self.by}" if self.by else "api"
        return Decision(verdict=verdict, by=by, reason=self.reason, args=args, remember=self.remember)


def approval_json(approval: Approval) -> dict[str, Any]:
    """The approval as API clients see it: no nulls, and only what a person deciding needs."""
    call = approval.call
    out: dict[str, Any] = {
        "id": approval.id,
        "chat_id": approval.chat_id,
        "state": str(approval.state),
        "call": {"call_id": call.call_id, "tool": call.tool, "args": call.args},
        "digest": approval.digest,
        "description": approval.description,
        "rule": approval.rule,
        "created_at": approval.created_at,
    }
    if approval.deadline is not None:
        out["deadline"] = approval.deadline
    if (d := approval.decision) is not None:
        decision: dict[str, Any] = {
            "verdict": d.verdict,
            "by": d.by,
            "reason": d.reason,
            "remember": d.remember,
        }
        if d.args is not None:  # edited: the call that runs is this one, so show its own digest too
            decision["args"] = d.args
            decision["digest"] = digest(d.args)
        out["decision"] = decision
    if approval.closed_by:
        out["closed"] = {"by": approval.closed_by, "reason": approval.closed_reason}
    if approval.consumed_at is not None:
        out["consumed_at"] = approval.consumed_at
    return out


def grant_json(grant: Grant) -> dict[str, Any]:
    out: dict[str, Any] = {
        "id": grant.id,
        "tool": grant.tool,
        "scope": grant.scope,
        "any_args": grant.digest is None,
        "created_by": grant.created_by,
        "created_at": grant.created_at,
        "approval_id": grant.approval_id,
        "active": grant.active,
    }
    if grant.digest is not None:
        out["digest"] = grant.digest
    if grant.chat_id is not None:
        out["chat_id"] = grant.chat_id
    if grant.revoked_at is not None:
        out["revoked"] = {"at": grant.revoked_at, "by": grant.revoked_by}
    return out


def approval_event(approval: Approval) -> ServerSentEvent:
    return ServerSentEvent(msgspec.json.encode(approval_json(approval)).decode(), event="approval")


def event_response(events: AsyncIterator[ServerSentEvent], *, ping: float) -> Response:
    return EventSourceResponse(
        events, ping=ping, ping_message_factory=lambda: ServerSentEvent(comment="keep-alive")
    )


class ApprovalsAPI:
    def __init__(self, ledger: Ledger, token: str, feed: ApprovalFeed, *, ping: float = 15) -> None:
        self.ledger = ledger
        self.token = token
        self.feed = feed
        self.ping = ping

    def routes(self) -> list[BaseRoute]:
        def guard(handler: Handler) -> Handler:
            return guarded(handler, self.token, self.ledger)

        return [
            Route("/api/approvals", guard(self.list), methods=["GET"]),
            Route("/api/approvals/feed", guard(self.follow), methods=["GET"]),
            Route("/api/approvals/{id}", guard(self.get), methods=["GET"]),
            Route("/api/approvals/{id}/decision", guard(self.decide), methods=["POST"]),
            Route("/api/grants", guard(self.grants), methods=["GET"]),
            Route("/api/grants/{id}", guard(self.revoke), methods=["DELETE"]),
        ]

    async def list(self, request: Request) -> Response:
        try:
            query = ListQuery.of(request, State)
        except BadBody as exc:
            return exc.response
        found = await self.ledger.approvals(chat_id=query.chat, state=query.state, limit=query.limit)
        return json_response({"approvals": [approval_json(a) for a in found]})

    async def get(self, request: Request) -> Response:
        try:
            return json_response(approval_json(await self.ledger.get(request.path_params["id"])))
        except NotFound as exc:
            return error(404, str(exc))

    async def decide(self, request: Request) -> Response:
        try:
            body = await read_body(request, DecisionBody, limit=MAX_BODY, what="decision")
            approval = await self.ledger.decide(request.path_params["id"], body.decision())
        except BadBody as exc:
            return exc.response
        except (InvalidDecision, InvalidCall) as exc:
            return error(422, str(exc))
        except NotFound as exc:
            return error(404, str(exc))
        except AlreadyDecided as lost:
            return error(409, str(lost), approval=approval_json(lost.winner))
        return json_response(approval_json(approval))

    async def follow(self, request: Request) -> Response:
        return event_response((approval_event(a) async for a in self.feed.follow()), ping=self.ping)

    async def grants(self, request: Request) -> Response:
        active = request.query_params.get("active", "true") != "false"
        found = await self.ledger.grants(
            chat_id=request.query_params.get("chat"), tool=request.query_params.get("tool"), active=active
        )
        return json_response({"grants": [grant_json(g) for g in found]})

    async def revoke(self, request: Request) -> Response:
        try:
            grant = await self.ledger.revoke_grant(request.path_params["id"], "api")
        except NotFound as exc:
            return error(404, str(exc))
        except AlreadyRevoked as exc:
            return error(409, str(exc))
        return json_response(grant_json(grant))
