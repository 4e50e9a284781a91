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
import logging
from collections.abc import Sequence
from urllib.parse import parse_qsl

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
from signoff.server.http import SERVED, BadInput, NeedsCredential
from signoff.server.refusals import Refusals

log = logging.getLogger("signoff.server")
PATH = "/api/channels/slack/interactions"
MAY_NOT = "You may not decide this"
STAMP_DIGITS = 12
"""A Unix time in seconds has 10 digits until the year 2286."""
MAX_REASON = 2000


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
        channel = self._signed(request, body)
        if channel is None:  # answered and counted by the server's one refusal handler
            why = "the Slack signature is invalid, or over 5 minutes old"
            raise NeedsCredential(why, "bad-signature", subject="slack")
        interaction = Interaction.of(body)
        action = interaction.actions[0] if interaction.actions else None
        if interaction.type != "block_actions" or action is None or action.action_id not in (APPROVE, DENY):
            return Response(status_code=SERVED)  # the reason box, say: nothing to decide
        user = interaction.user.id
        approved = action.action_id == APPROVE
        told = await self._decide(channel, user, approved, action.value, interaction.reason)
        where = (interaction.channel.id if interaction.channel else "") or channel.channel
        self._tell(channel, where, user, told)
        return Response(status_code=SERVED)

    def _signed(self, request: Request, body: bytes) -> SlackChannel | None:
        """The channel whose signing secret signed `body`, or None. What the verifier would raise on rather
        than refuse (a timestamp that is no number or has hundreds of digits, a signature that is not ASCII,
        a body that is not UTF-8) is no signature either."""
        headers = request.headers
        stamp, signature = headers.get("x-slack-request-timestamp"), headers.get("x-slack-signature")
        if not (
            stamp and signature and _plain(stamp, STAMP_DIGITS) and stamp.isdigit() and _plain(signature, 128)
        ):
            return None
        try:
            body.decode()  # the verifier decodes it, and raises on bytes that are not UTF-8
        except UnicodeDecodeError:
            return None
        return next((c for verifier, c in self.apps if verifier.is_valid(body, stamp, signature)), None)

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
        proven = await self.ledger.principals.identified("slack", user)
        if proven is None:
            await self._refuse(approval_id, actor, "a Slack user linked to no principal")
            return f"{MAY_NOT}: your Slack account is not linked to a signoff principal."
        try:
            await self.ledger.approvals.decide(
                approval_id, Decision.of(approved, proven, reason), policy=self.policy
            )
        except AlreadyDecided as lost:  # audited by the ledger, as every refusal below
            return f"Nothing was decided: it is {lost.winner.state} already."
        except SignoffError as exc:  # not an approver, voted already, unproven
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


def _plain(value: str, longest: int) -> bool:
    return value.isascii() and len(value) <= longest


class _User(msgspec.Struct):
    id: str


class _Action(msgspec.Struct):
    action_id: str
    value: str = ""


class _Channel(msgspec.Struct):
    id: str = ""


class _Input(msgspec.Struct):
    value: str | None = None


class _State(msgspec.Struct):
    values: dict[str, dict[str, _Input]] = {}


class Interaction(msgspec.Struct):
    """The part of a Slack interaction payload the route reads, typed: a payload whose parts have other
    types (a `value` that is an object, a `channel` that is a string) is refused before anything is
    decided. What Slack sends besides is ignored."""

    type: str
    user: _User
    actions: list[_Action] = []
    channel: _Channel | None = None
    state: _State | None = None

    @classmethod
    def of(cls, body: bytes) -> Interaction:
        """`BadInput` for a body that is not one form field `payload` holding such a JSON object."""
        try:
            fields = parse_qsl(body.decode(), max_num_fields=1, strict_parsing=True)
            [(name, payload)] = fields
            if name != "payload":
                raise ValueError(name)
            return msgspec.json.decode(payload, type=cls)
        except (UnicodeDecodeError, ValueError, msgspec.DecodeError) as exc:
            raise BadInput(f"not a Slack block action: {exc}") from None

    @property
    def reason(self) -> str:
        inputs = (self.state.values if self.state else {}).get("reason", {})
        given = inputs.get(REASON)
        return (given.value or "")[:MAX_REASON] if given else ""
