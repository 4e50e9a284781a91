"""A Slack channel: an approval posted to a channel in Block Kit, with Approve and Deny buttons, and edited
in place when it is settled.

The message shows what the page shows (the description, the arguments as `core.argument_rows` puts
them, in code blocks of at most `MAX_FIELD` characters each, who asked, the deadline, the quorum so
far) and an optional reason box beside the buttons. Its `ts` is kept with the notice that posted it,
so the approval's outcome edits that message (`chat.update`): who decided, or that it expired, and the
buttons go. A click comes back signed by Slack to the server's interactions route (`server/slack.py`),
which decides as the principal the clicking Slack user is linked to.

Delivery is at least once: a post whose answer was lost is posted again, and an edit repeated is the
same edit.
"""

from __future__ import annotations

from typing import Any

from slack_sdk.errors import SlackApiError, SlackClientError
from slack_sdk.web.async_client import AsyncWebClient

from signoff.channels.config import SlackChannel
from signoff.channels.delivery import Delivered, Failed, Outcome, retry_after
from signoff.core.approval import Approval, State
from signoff.core.argument_rows import plain
from signoff.core.notice import Notice
from signoff.core.views import ARGUMENTS, shown
from signoff.ledger.base import Ledger

APPROVE, DENY, REASON = "signoff_approve", "signoff_deny", "signoff_reason"
"""The action ids of the buttons and of the reason box, which the interactions route reads."""
MAX_FIELD = 2900
"""Characters of one section's text: Slack refuses more than 3,000."""
MAX_SECTIONS = 10
"""Code blocks the arguments take at most, of a message's 50 blocks; the last says how many lines it
leaves out (the review page and the inbox show them all)."""


class SlackSender:
    def __init__(self, channel: SlackChannel, ledger: Ledger) -> None:
        self.channel = channel
        self.ledger = ledger
        self.client = AsyncWebClient(token=channel.token, base_url=channel.api_url, timeout=15)

    async def send(self, notice: Notice, approval: Approval, now: float) -> Outcome:
        posted = await self._posted(notice)
        text = f"{_headline(notice, approval)}: {approval.description}"
        blocks = message_blocks(notice, approval)
        try:
            if posted:
                await self.client.chat_update(
                    channel=self.channel.channel, ts=posted, text=text, blocks=blocks
                )
                return Delivered(posted)
            answer = await self.client.chat_postMessage(
                channel=self.channel.channel, text=text, blocks=blocks
            )
        except SlackApiError as exc:
            error = str(exc.response.get("error", "")) if exc.response is not None else ""
            retry = exc.response.headers.get("retry-after") if exc.response is not None else None
            return Failed(f"Slack: {error or exc}", retry_after(retry, now))
        except (SlackClientError, OSError, TimeoutError) as exc:
            return Failed(f"Slack: {type(exc).__name__}: {exc}")
        return Delivered(str(answer.get("ts") or ""))

    async def _posted(self, notice: Notice) -> str:
        """The `ts` of the message this channel posted for the approval, if one was: the notice's own
        (posted before, and tried again), or the opening notice's."""
        if notice.ref:
            return notice.ref
        earlier = await self.ledger.outbox.query(approval_id=notice.approval_id)
        return next((n.ref for n in earlier if n.channel == notice.channel and n.ref), "")


def message_blocks(notice: Notice, approval: Approval) -> list[dict[str, Any]]:
    """The message as it stands for this notice: asking, with the buttons, while the approval is pending;
    settled, without them, once it is not."""
    labels = shown(approval)
    details = "\n".join(f"*{label}*: {_plain(said)}" for label, said in labels if isinstance(said, str))
    arguments = next(said for label, said in labels if label == ARGUMENTS and not isinstance(said, str))
    blocks: list[dict[str, Any]] = [
        {"type": "header", "text": {"type": "plain_text", "text": _headline(notice, approval)[:150]}},
        {"type": "section", "text": {"type": "mrkdwn", "text": details[:MAX_FIELD]}},
        *(
            {"type": "section", "text": {"type": "mrkdwn", "text": f"```{chunk}```"}}
            for chunk in _chunks([_plain(line) for line in plain(arguments, indent="")] or ["no arguments"])
        ),
    ]
    if approval.state is State.PENDING:
        blocks += [
            {
                "type": "input",
                "block_id": "reason",
                "optional": True,
                "label": {"type": "plain_text", "text": "Reason"},
                "element": {"type": "plain_text_input", "action_id": REASON},
            },
            {
                "type": "actions",
                "block_id": "decide",
                "elements": [
                    _button("Approve", APPROVE, approval.id, "primary"),
                    _button("Deny", DENY, approval.id, "danger"),
                ],
            },
        ]
    return blocks


def _chunks(lines: list[str]) -> list[str]:
    """`lines` in as few code blocks' texts as fit `MAX_FIELD` each, at most `MAX_SECTIONS`, the last one
    then saying how many lines are left out. (A line longer than a block is cut; the argument rows' own
    cut at 78 characters never makes one.)"""
    room = MAX_FIELD - len("``````")
    chunks: list[list[str]] = [[]]
    for line in lines:
        if chunks[-1] and len("\n".join([*chunks[-1], line[:room]])) > room:
            chunks.append([])
        chunks[-1].append(line[:room])
    if len(chunks) > MAX_SECTIONS:
        left = sum(map(len, chunks[MAX_SECTIONS:]))
        *chunks, last = chunks[:MAX_SECTIONS]
        while len("\n".join([*last, _left_out(left)])) > room:
            last.pop()
            left += 1
        chunks.append([*last, _left_out(left)])
    return ["\n".join(chunk) for chunk in chunks]


def _left_out(lines: int) -> str:
    return f"… and {lines} more lines, not shown here"


def _headline(notice: Notice, approval: Approval) -> str:
    if approval.state is State.PENDING:
        return "Reminder: approval needed" if notice.type == "approval.reminder" else "Approval needed"
    return f"{str(approval.state).capitalize()} by {approval.settled_by(owner='the requester')}"


def _button(text: str, action: str, approval_id: str, style: str) -> dict[str, Any]:
    return {
        "type": "button",
        "text": {"type": "plain_text", "text": text},
        "action_id": action,
        "value": approval_id,
        "style": style,
    }


def _plain(text: str) -> str:
    """`text` as Slack shows it literally: its control characters `&`, `<` and `>` escaped, as Slack asks,
    so a requester's words never become a mention or a link."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
