"""A request's answers, taken the one way wherever they come: the approval responses and browser results of
a request that begins a reply (`reply.begin`) and of one that answers a reply the browser follows live
(`DrivenReply.answer`).

The trust checks run in one order: the responses first, recorded as decisions; then the browser outputs
that came with their approval (`trust.ran_with_approval`); then the other browser results, against the calls
the chat waits on; last, what the browser reported of its own on acknowledged calls, audited. What differs
between the callers is what the chat waits on once the person's answers are in, which `decided` says (and
where it may refuse the request), and what may refuse it once every answer is checked (`checked`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Collection, Mapping, MutableMapping, Sequence
from dataclasses import dataclass

from signoff.core.approval import Approval
from signoff.core.principal import Principal
from signoff.integrations.chat.acknowledged import record_acted
from signoff.integrations.chat.trust import accept_outputs, accept_responses, ran_with_approval
from signoff.ledger.base import Ledger
from signoff.protocol import ChatRequest, ToolOutput


@dataclass(frozen=True)
class Taken:
    decided: list[Approval]
    """The approvals the request's responses decided (or voted on)."""
    held: dict[str, ToolOutput]
    """Browser outputs that came with their call's approval: the call's run takes its own."""
    outputs: dict[str, ToolOutput]
    """The browser results accepted for the calls the chat waits on."""


async def take_answers(
    ledger: Ledger,
    request: ChatRequest,
    principal: Principal,
    asked: Mapping[str, str],
    *,
    made: Collection[str],
    acknowledged: MutableMapping[str, str],
    decided: Callable[[Sequence[Approval]], Awaitable[tuple[Mapping[str, str], Collection[str]]]],
    checked: Callable[[], None] = lambda: None,
    signing_key: bytes,
    browser_tools: Collection[str],
) -> Taken:
    """Take the answers of `request`, as `principal`, to the calls that `asked` a person (call id to approval
    id). `decided` hears the decisions and gives the browser calls that may take a result (call id to tool)
    and the calls still asking a person; `made` are the calls a result may name; `acknowledged` is what the
    browser last held of each acknowledged call (see `acknowledged.record_acted`, updated here)."""
    chat_id = request.chat_id
    approvals = await accept_responses(
        ledger, chat_id, asked, request.approvals, principal, signing_key, browser_tools
    )
    runnable, asking = await decided(approvals)
    held, given = await ran_with_approval(
        ledger, chat_id, principal, approvals, request.outputs, browser_tools
    )
    outputs = await accept_outputs(ledger, chat_id, principal, runnable, made, asking, given)
    checked()
    await record_acted(ledger, chat_id, principal, acknowledged, given)
    return Taken(approvals, held, outputs)
