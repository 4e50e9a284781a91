"""`/api/approvals` and `/api/grants`: list, get and decide approvals, follow them live, revoke grants.

Every route needs a credential, and shows each principal what it may see: the approvals of its own chats,
those it may decide, and everything to an admin. A decision is the principal's own, judged by the
approval's rule (a 403 for a principal it does not name, a 409 for one that approved already), and it is
the same ledger call as one from the CLI or a chat, so the first decision wins whatever channel it came
from, and a waiting tool wakes on any worker.
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
from signoff.core.decision import Decision
from signoff.core.errors import (
    AlreadyDecided,
    AlreadyVoted,
    EditRefused,
    LedgerUnavailable,
    NotAnApprover,
    NotFound,
    SignoffError,
    Unproven,
)
from signoff.core.grant import Grant
from signoff.core.policy import Policy
from signoff.core.principal import Principal, Proven
from signoff.core.views import approval_json, may_see, notice_json
from signoff.ledger.base import Ledger
from signoff.server.auth import deciding, signed_in
from signoff.server.feed import ApprovalFeed
from signoff.server.http import DECISION_BODY, ListQuery, json_response, read_body, refusal


class DecisionBody(msgspec.Struct, forbid_unknown_fields=True):
    """Who decides comes from the credential, never from the body: a body naming someone (`by`) is a 422."""

    approved: bool
    reason: str = ""
    args: dict[str, Any] | None = None
    remember: Literal["once", "session", "always"] = "once"

    def decision(self, proven: Proven) -> Decision:
        """The core's `Decision` checks what makes no sense (a remembered denial) and says why."""
        return Decision.of(self.approved, proven, self.reason, args=self.args, remember=self.remember)


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


def approval_event(approval: Approval, viewer: Principal | None = None) -> ServerSentEvent:
    return ServerSentEvent(msgspec.json.encode(approval_json(approval, viewer)).decode(), event="approval")


def event_response(events: AsyncIterator[ServerSentEvent], *, ping: float) -> Response:
    return EventSourceResponse(
        _while_answered(events), ping=ping, ping_message_factory=lambda: ServerSentEvent(comment="keep-alive")
    )


async def _while_answered(events: AsyncIterator[ServerSentEvent]) -> AsyncIterator[ServerSentEvent]:
    """`events` until the ledger can't be read: the stream ends there, as any feed may, and the client's
    `EventSource` opens it again (a 503 while the ledger is away) rather than the server logging a crash."""
    try:
        async for event in events:
            yield event
    except LedgerUnavailable:
        return


async def refused(exc: SignoffError, ledger: Ledger, viewer: Principal, approval_id: str) -> Response:
    """The answer to a decision the ledger would not take, alike on every route that decides: its status
    from the server's one table (`server.http.STATUS`), and with it the approval as it now stands, where
    the refusal is about it (not for an unknown one, nor one that makes no sense)."""
    if isinstance(exc, NotAnApprover):
        return refusal(exc, approval=approval_json(exc.approval, viewer))
    if isinstance(exc, AlreadyDecided):
        return refusal(exc, approval=approval_json(exc.winner, viewer))
    if isinstance(exc, AlreadyVoted | EditRefused | Unproven):
        return refusal(exc, approval=approval_json(await ledger.approvals.get(approval_id), viewer))
    return refusal(exc)


class ApprovalsAPI:
    def __init__(self, ledger: Ledger, feed: ApprovalFeed, *, policy: Policy, ping: float = 15) -> None:
        self.ledger = ledger
        self.feed = feed
        self.policy = policy
        """What an edit's call is ruled on by, as if the agent had made it."""
        self.ping = ping

    def routes(self) -> list[BaseRoute]:
        return [
            Route("/api/approvals", self.list, methods=["GET"]),
            Route("/api/approvals/feed", self.follow, methods=["GET"]),
            Route("/api/approvals/{id}", self.get, methods=["GET"]),
            Route("/api/approvals/{id}/decision", self.decide, methods=["POST"]),
            Route("/api/grants", self.grants, methods=["GET"]),
            Route("/api/grants/{id}", self.revoke, methods=["DELETE"]),
        ]

    async def list(self, request: Request) -> Response:
        viewer = signed_in(request)
        query = ListQuery.of(request, State)
        limit = query.limit if viewer.is_admin else None  # the rest are filtered first, then cut
        found = await self.ledger.approvals.query(chat_id=query.chat, state=query.state, limit=limit)
        shown = [approval_json(a, viewer) for a in found if may_see(viewer, a)][: query.limit]
        return json_response({"approvals": shown})

    async def get(self, request: Request) -> Response:
        viewer = signed_in(request)
        approval = await self._visible(viewer, request.path_params["id"])
        shown = approval_json(approval, viewer)
        shown["notices"] = [notice_json(n) for n in await self.ledger.outbox.query(approval_id=approval.id)]
        return json_response(shown)

    async def _visible(self, viewer: Principal, approval_id: str) -> Approval:
        """The approval if `viewer` may see it; to anyone else it is as unknown as a missing one."""
        approval = await self.ledger.approvals.get(approval_id)
        if not may_see(viewer, approval):
            await self.ledger.audit.record("refuse", approval_id, viewer.id, why="not an approval it may see")
            raise NotFound(f"no approval {approval_id}")
        return approval

    async def decide(self, request: Request) -> Response:
        """An approval the principal may not see is as unknown here as on GET: a 404 with no record."""
        proven, approval_id = deciding(request), request.path_params["id"]
        principal = proven.principal
        try:
            body = await read_body(request, DecisionBody, limit=DECISION_BODY, what="decision")
            await self._visible(principal, approval_id)
            decision = body.decision(proven)
            approval = await self.ledger.approvals.decide(approval_id, decision, policy=self.policy)
        except SignoffError as exc:
            return await refused(exc, self.ledger, principal, approval_id)
        return json_response(approval_json(approval, principal))

    async def follow(self, request: Request) -> Response:
        viewer = signed_in(request)
        events = (approval_event(a, viewer) async for a in self.feed.follow() if may_see(viewer, a))
        return event_response(events, ping=self.ping)

    async def grants(self, request: Request) -> Response:
        """An admin sees every grant; anyone else those it made."""
        viewer = signed_in(request)
        active = request.query_params.get("active", "true") != "false"
        found = await self.ledger.grants.query(
            chat_id=request.query_params.get("chat"), tool=request.query_params.get("tool"), active=active
        )
        return json_response({"grants": [grant_json(g) for g in found if _owns(viewer, g)]})

    async def revoke(self, request: Request) -> Response:
        viewer = signed_in(request)
        grant_id = request.path_params["id"]
        if not viewer.is_admin:  # anyone else may revoke only its own: another's is as unknown
            found = [g for g in await self.ledger.grants.query(active=False) if g.id == grant_id]
            if not found or not _owns(viewer, found[0]):
                raise NotFound(f"no grant {grant_id}")
        grant = await self.ledger.grants.revoke(grant_id, viewer.id)
        return json_response(grant_json(grant))


def _owns(viewer: Principal, grant: Grant) -> bool:
    return viewer.is_admin or grant.created_by == viewer.id
