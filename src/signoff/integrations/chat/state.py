"""What the server remembers of a chat between requests, and who it belongs to.

A chat's state is stored in the ledger (see `ledger.chats`) beside its owner: the framework's history
where the framework keeps none itself, the assistant message a continuation streams into, and what the
chat waits on. Each request reads it, and the reply that runs saves it with a version check.
"""

from __future__ import annotations

import contextlib
from collections.abc import Collection, Mapping
from typing import Any

import msgspec

from signoff.core.approval import State
from signoff.core.errors import IllegalTransition, NotFound, StaleChat
from signoff.core.principal import ANONYMOUS, Principal
from signoff.core.wording import WITHDRAWN
from signoff.integrations.chat.trust import OutOfTurn, Unknown
from signoff.ledger.base import Ledger
from signoff.ledger.records import StoredChat


class ChatState(msgspec.Struct, kw_only=True, omit_defaults=True):
    """What the server remembers of a chat between requests. Stored: the history (or ADK's event count),
    the assistant message and, while a blocking reply waits, its parked state. What the chat waits on
    (approvals, confirmations, browser calls and when they are due, tasks) is filled in when a chat's
    state is read, from its history and the ledger (see `classify`); a chat saved before that holds them
    too, and they are read over."""

    history: msgspec.Raw = msgspec.Raw(b"[]")
    """The framework's own message history, where the framework keeps none itself (pydantic-ai). Stored
    as the chat's entries, a message each (see `StoredChat.entries`), so that a save writes only the new
    messages: `state_of` puts it here. A parked state, and a chat saved before entries, hold it here."""
    events: int = 0
    """How many events the framework's own session held when the last reply ended (ADK)."""
    assistant_id: str | None = None
    """The assistant message a deferred reply left open; its continuation streams into the same id."""
    approvals: dict[str, str] = {}
    """Calls waiting on a person: call id to approval id."""
    confirmations: dict[str, str] = {}
    """The framework's own id for each question it asked (ADK's confirmation calls), by call id."""
    browser_calls: dict[str, str] = msgspec.field(default_factory=dict, name="frontend")
    """Calls waiting on the browser for a result: call id to tool name. (Stored under the word the
    first chats were saved with, as is `browser_due`, so every saved chat still loads.)"""
    browser_due: float | None = msgspec.field(default=None, name="frontend_due")
    """When the browser's results are overdue: after it, those calls end as errors the model sees."""
    tasks: dict[str, str] = {}
    """Long-running calls the run ended on, whose result the model has not seen: call id to task id."""
    acknowledged: dict[str, str] = {}
    """The calls of acknowledged browser tools (see `BrowserToolInfo.acknowledged`): call id to the digest
    of their result as the client was last known to hold it, so a result the browser sends of its own is
    told from the client echoing the server's, and audited once."""
    parked: ChatState | None = None
    """The chat as a blocking reply left it while it waits on a person. The fields above stay as the
    reply began, which the worker streaming it shows; every other reader, and a continuation on any
    worker after that one died, goes on from here."""

    def latest(self) -> ChatState:
        return self.parked or self

    def overdue(self, now: float) -> bool:
        return bool(self.browser_calls) and self.browser_due is not None and now >= self.browser_due


_decode_state = msgspec.json.Decoder(ChatState).decode
encode_state = msgspec.json.Encoder().encode


def state_of(stored: StoredChat | None, *, begun: bool = False) -> ChatState:
    """The latest state of a stored chat, or with `begun` the state its running reply began from."""
    state = _decode_state(stored.state) if stored else ChatState()
    chosen = state if begun else state.latest()
    if chosen is state and stored is not None and stored.entries:  # a parked state holds its own history
        state.history = msgspec.Raw(b"[" + b",".join(stored.entries) + b"]")
    return chosen


def owner_of(stored: StoredChat | None) -> str | None:
    """The id of the principal a chat belongs to; None while nobody has started it. A chat stored before
    chats had owners belongs to whoever sends no credential, as it did then."""
    return None if stored is None else stored.owner or ANONYMOUS.id


async def check_owner(ledger: Ledger, chat_id: str, stored: StoredChat | None, principal: Principal) -> None:
    """Raise `Unknown` (audited) unless `principal` owns the chat or nobody does yet: to anyone
    else, another's chat is as unknown as a missing one."""
    owner = owner_of(stored)
    if owner is not None and owner != principal.id:
        why = "the chat belongs to another principal"
        await ledger.audit.record("refuse", chat_id, principal.id, why=why, via=principal.via)
        raise Unknown("id", f"no chat {chat_id}")


async def claim(ledger: Ledger, chat_id: str, stored: StoredChat | None, principal: Principal) -> StoredChat:
    """The chat's record, started for `principal` if it is new; raises `Untrusted` if it is another's.

    A new chat is saved at once, before anything runs in it, so that of two principals racing to start
    the same chat id exactly one gets it."""
    await check_owner(ledger, chat_id, stored, principal)
    if stored is not None:
        return stored
    try:
        return await ledger.chats.save(chat_id, encode_state(ChatState()), version=0, owner=principal.id)
    except StaleChat:
        raise OutOfTurn("id", f"chat {chat_id} was started by another request meanwhile") from None


def owner_principal(stored: StoredChat | None) -> Principal:
    """The chat's owner, for what the server does in its name on its own initiative."""
    return Principal(id=owner_of(stored) or ANONYMOUS.id)


async def withdraw(ledger: Ledger, state: ChatState, actor: str, why: str = WITHDRAWN) -> None:
    """Cancel the chat's open approvals in `actor`'s name; one decided meanwhile (or asked by the agent's
    own tools, with no ledger record) is left as it is."""
    for approval_id in filter(None, state.approvals.values()):
        with contextlib.suppress(NotFound, IllegalTransition):
            await ledger.approvals.cancel(approval_id, actor, why)


async def expire_overdue(ledger: Ledger, chat_id: str, calls: dict[str, str], allowed: float) -> str:
    """Audit the browser calls that got no result within `allowed` seconds; the reason the model is told."""
    why = f"the browser returned no result within {allowed:g} s"
    for call_id, tool in calls.items():
        await ledger.audit.record("expire", call_id, "signoff:server", chat=chat_id, tool=tool, why=why)
    return why


async def task_news(ledger: Ledger, tasks: dict[str, str]) -> dict[str, dict[str, Any]]:
    """Each long-running call's task status as it is now, in seed 004's format: call id to status."""
    return {call_id: (await ledger.tasks.get(task_id)).status() for call_id, task_id in tasks.items()}


async def classify(
    ledger: Ledger, chat_id: str, open_calls: Mapping[str, str], browser_tools: Collection[str]
) -> tuple[dict[str, str], dict[str, str], dict[str, str]]:
    """What each open call of a chat's last step (call id to tool name) waits on, read from the ledger,
    the one truth: a person, where its approval is not used yet (a decided one too, until the model has
    its answer); the browser, for a browser tool allowed without one or once it is used; its task, where
    it started one. A used approval of a call with neither stays the person's, so the continuation gets
    the gate's refusal of a second claim. Another open call waits on nothing: it ran, or runs again, in
    its framework. Approvals, browser calls and tasks, by call id."""
    approvals: dict[str, str] = {}
    browser: dict[str, str] = {}
    tasks: dict[str, str] = {}
    started: dict[str, str] | None = None
    for call_id, tool in open_calls.items():
        approval = await ledger.approvals.find(chat_id, call_id)
        used = approval is not None and approval.state is State.CONSUMED
        if tool in browser_tools and (approval is None or used):  # a browser tool is never long-running
            browser[call_id] = tool
            continue
        if started is None and (approval is None or used):
            started = {t.call.call_id: t.id for t in await ledger.tasks.query(chat_id=chat_id)}
        if started is not None and call_id in started:
            tasks[call_id] = started[call_id]
        elif approval is not None:  # used but not run to a result, the process died: its claim can't hold
            approvals[call_id] = approval.id
    return approvals, browser, tasks
