"""`POST /api/channels/slack/interactions`: a click on an approval's Slack message, as a decision.

Slack signs every interaction with the app's signing secret; `slack_sdk`'s `SignatureVerifier` checks it
and refuses one older than five minutes, so a forged or a stale request is a 401, counted as an
unanswered refusal. A genuine click is a decision by the principal that Slack user is linked to, `via`
slack, judged by the approval's rule with that principal's roles as they are now, exactly as the REST
API judges; a user linked to nobody, or whom the rule does not admit, is told "you may not decide this"
in a message only they see, and the refusal is audited. A replayed click is a second decision, which the
ledger refuses (voted already, or decided already), also audited.

The route answers at once (Slack waits 3 s): the decision is one ledger write, and what the user is told
goes out after the answer. The message itself is edited through the outbox, with the outcome.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Sequence
from typing import Any
from urllib.parse import parse_qs

import msgspec
from slack_sdk.errors import SlackClientError
from slack_sdk.signature import SignatureVerifier
from slack_sdk.web.async_client import AsyncWebClient
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from signoff.channels.config import SlackChannel
from signoff.channels.slack import APPROVE, DENY, REASON
from signoff.core.decision import Decision
from signoff.core.errors import AlreadyDecided, NotFound, SignoffError
from signoff.core.policy import Policy
from signoff.ledger.base import Ledger
from signoff.server.auth import client_of
from signoff.server.http import error
from signoff.server.refusals import Refusals

log = logging.getLogger("signoff.server")
PATH = "/api/channels/slack/interactions"
MAY_NOT = "You may not decide this"


class SlackInteractions:
    def __init__(
        self, ledger: Ledger, policy: Policy, refusals: Refusals, channels: Sequence[SlackChannel]
    ) -> None:
        self.ledger = ledger
        self.policy = policy
        self.refusals = refusals
        self.apps = [(SignatureVerifier(c.signing_secret), c) for c in channels]
        self.clients = {
            c.name: AsyncWebClient(token=c.token, base_url=c.api_url, timeout=10) for c in channels
        }
        self._telling: set[asyncio.Task[None]] = set()

    def routes(self) -> list[BaseRoute]:
        return [Route(PATH, self.interact, methods=["POST"])] if self.apps else []

    async def interact(self, request: Request) -> Response:
        body = await request.body()
        stamp, signature = (
            request.headers.get(h) for h in ("x-slack-request-timestamp", "x-slack-signature")
        )
        channel = next((c for verifier, c in self.apps if verifier.is_valid(body, stamp, signature)), None)
        if channel is None:
            why = "a Slack interaction whose signature fails, or over 5 minutes old"
            self.refusals.note("refuse", "slack", client_of(request), "bad-signature", why, request.url.path)
            return error(401, "the Slack signature is invalid or stale")
        try:
            payload = json.loads(parse_qs(body.decode())["payload"][0])
            action = payload["actions"][0]
            user, verb, approval_id = payload["user"]["id"], action["action_id"], action["value"]
        except (KeyError, IndexError, TypeError, ValueError, UnicodeDecodeError):
            return error(400, "not a Slack block action")
        if payload.get("type") != "block_actions" or verb not in (APPROVE, DENY):
            return Response(status_code=200)  # the reason box, say: nothing to decide
        told = await self._decide(channel, user, verb == APPROVE, approval_id, _reason(payload))
        where = str((payload.get("channel") or {}).get("id") or channel.channel)
        self._tell(channel, where, user, told)
        return Response(status_code=200)

    async def _decide(
        self, channel: SlackChannel, user: str, approved: bool, approval_id: str, reason: str
    ) -> str:
        """The decision, and what the user who clicked is told of it."""
        actor = f"slack:{user}"
        try:
            approval = await self.ledger.approvals.get(approval_id)
        except NotFound:
            return f"{MAY_NOT}: there is no such approval."
        if f"slack:{channel.name}" not in approval.notify:
            await self._refuse(approval_id, actor, "the approval is not announced on this Slack channel")
            return f"{MAY_NOT}: it was not asked here."
        linked = await self.ledger.principals.identified("slack", user)
        if linked is None:
            await self._refuse(approval_id, actor, "a Slack user linked to no principal")
            return f"{MAY_NOT}: your Slack account is not linked to a signoff principal."
        principal = msgspec.structs.replace(linked, via="slack")
        try:
            await self.ledger.approvals.decide(
                approval_id, Decision.of(approved, principal, reason), policy=self.policy
            )
        except AlreadyDecided as lost:
            await self._refuse(approval_id, linked.id, str(lost))
            return f"Nothing was decided: it is {lost.winner.state} already."
        except SignoffError as exc:  # not an approver, voted already, unproven: audited by the ledger
            return f"{MAY_NOT}: {exc}"
        return "You approved it." if approved else "You denied it."

    async def _refuse(self, approval_id: str, actor: str, why: str) -> None:
        await self.ledger.audit.record("refuse", approval_id, actor, why=why, via="slack")

    def _tell(self, channel: SlackChannel, where: str, user: str, text: str) -> None:
        """Tell the user only, after the route has answered."""

        async def tell() -> None:
            try:
                await self.clients[channel.name].chat_postEphemeral(channel=where, user=user, text=text)
            except (SlackClientError, OSError, TimeoutError) as exc:
                log.warning("Slack: could not tell %s %r: %s", user, text, exc)

        task = asyncio.get_running_loop().create_task(tell())
        self._telling.add(task)
        task.add_done_callback(self._telling.discard)


def _reason(payload: dict[str, Any]) -> str:
    values = ((payload.get("state") or {}).get("values") or {}).get("reason") or {}
    return str((values.get(REASON) or {}).get("value") or "")[:2000]
