"""The chat driver: one request in, one reply of chunks out, the same for every framework.

The driver owns everything a chat does around its framework's run: it loads the chat (keeping the last
version this worker saved, so a long chat's next request here reads and parses nothing), classifies what
the chat waits on, checks and records the request and carries out the machine's action (`begin`), runs
the reply, and saves the chat with its version check. A framework supplies only what is its own, as a
`Framework`: its history codec (read, open calls, UI messages), the run its continuation input
makes (`Framework.start`), and, through that run, its event translator. Its tool hook (a capability, a
plugin) is installed when the framework's agent is wrapped, and calls `gated_call`.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, Self, TypeVar

import msgspec

from signoff.core.approval import Approval
from signoff.core.errors import SignoffError
from signoff.core.principal import Principal
from signoff.gate import Gate, Wait
from signoff.integrations.chat.acknowledged import Acknowledgments, check, record_acted
from signoff.integrations.chat.machine import Action, Request, next_action
from signoff.integrations.chat.reply import Begun, BrowserToolInfo, ChatView, begin, waits_of
from signoff.integrations.chat.state import (
    ChatState,
    classify,
    encode_state,
    owner_principal,
    state_of,
    task_news,
)
from signoff.integrations.chat.stream import Relay, Translator, drive
from signoff.integrations.chat.turn import Answered, Browser, Turn
from signoff.integrations.chat.ui import Entry, ui_messages
from signoff.ledger.base import Ledger
from signoff.ledger.records import Entries, StoredChat
from signoff.protocol import ChatRequest, Chunk, Error, Start, ToolOutput


class StoredHistory(Protocol):
    """A framework's history as the driver holds it: it knows how a save writes it."""

    def entries(self) -> tuple[Entries | None, Self]:
        """What a save writes of the history as the chat's entries (None: they stay as they are), and the
        history as the ledger holds it after."""

    def copy(self) -> Self:
        """A kept history as a new request's own (a run may change what it is given)."""


H = TypeVar("H", bound=StoredHistory)
"""A framework's history as the driver holds it between its codec's calls."""


@dataclass(frozen=True)
class Calls:
    """What a history leaves open: the calls of its last step with no result (call id to tool name), and
    the framework's own id for each question it asked about one (ADK's confirmations). `told`, for a
    framework that takes a long-running call's news as a later response to the call (ADK), is the calls
    that had one: every other call it made with a task still has news to tell."""

    open: Mapping[str, str]
    confirmations: Mapping[str, str] = field(default_factory=dict)
    told: Collection[str] | None = None


@dataclass(frozen=True)
class Ended(Generic[H]):
    """How a run left the chat: its history, whether calls now wait on the browser, and the count of
    events the framework's own session holds (where it keeps one)."""

    history: H
    browser_open: bool = False
    events: int = 0


class Run(Protocol[H]):
    """One reply's run in its framework, made from the request's continuation input."""

    def translator(
        self, turn: Turn, message_id: str, continued: list[str], signing_key: bytes
    ) -> Translator: ...

    async def run(self, emit: Callable[[Any], None]) -> None:
        """Run the framework's turn, handing each of its events to `emit` as it happens."""

    def parked(self, history: Sequence[object]) -> bytes | None:
        """The history (as JSON) to save while a blocking call waits on a person, where the framework can
        resume a run from it (see `ChatState.parked`); None where it can't."""

    async def end(self, translator: Translator, history: H) -> Ended[H] | None:
        """How the run left the chat, from `history` as it began (and as the ledger holds it now); None
        when it was interrupted and the chat stays as last saved."""


class Framework(Protocol[H]):
    """What a framework supplies the driver: its history codec and its runs."""

    @property
    def browser_tools(self) -> tuple[BrowserToolInfo, ...]: ...

    @property
    def cannot_regenerate(self) -> str | None:
        """Why the framework can't run a reply again from the last user message, if it can't."""

    @property
    def keeps_history(self) -> bool:
        """Whether the ledger holds the framework's history (as the chat's entries), so the driver keeps
        the last saved one; a framework with a session of its own reads it from there each time."""

    async def read(self, chat_id: str, stored: StoredChat | None, state: ChatState, *, begun: bool) -> H:
        """The chat's history as stored, or with `begun`, as its running reply began."""

    def calls(self, history: H) -> Calls: ...

    def made(self, history: H) -> Collection[str]:
        """The ids of every call the history holds (browser results are checked against them)."""

    def transcript(self, history: H) -> Iterable[Entry]:
        """The history in the words `integrations.chat.ui` renders as the page's messages."""

    async def start(self, chat_id: str, begun: Begun, history: H, request: ChatRequest) -> Run[H]:
        """The run the request's continuation input makes, for the action `begun` carries."""


@dataclass(frozen=True, slots=True)
class Kept(Generic[H]):
    version: int
    history: H
    state: ChatState


class Histories(Generic[H]):
    """The chats this process saved last, by chat and stored version, so the chat's next request here
    neither reads nor parses its history again: a request costs what is new, however long the chat. A
    chat another worker saved since has another version, and is read from its record. At most `size`
    chats are kept, the most recently used."""

    def __init__(self, size: int = 256) -> None:
        self.size = size
        self._kept: OrderedDict[str, Kept[H]] = OrderedDict()

    def keep(self, chat_id: str, version: int, history: H, state: ChatState) -> None:
        self._kept[chat_id] = Kept(version, history, state)
        self._kept.move_to_end(chat_id)
        while len(self._kept) > self.size:
            self._kept.popitem(last=False)

    def held(self, chat_id: str) -> int | None:
        kept = self._kept.get(chat_id)
        return None if kept is None else kept.version

    def at(self, chat_id: str, stored: StoredChat | None) -> Kept[H] | None:
        """The chat as kept, when `stored` is the version kept."""
        kept = self._kept.get(chat_id)
        if stored is None or kept is None or kept.version != stored.version:
            return None
        self._kept.move_to_end(chat_id)
        return kept


@dataclass
class Loaded(Generic[H]):
    """A chat as read: its record (None for a new chat), its state with what it waits on, its history."""

    stored: StoredChat | None
    state: ChatState
    history: H


class ChatDriver(Generic[H]):
    """Serve a framework's agent as chats whose every tool call passes `gate`.

    `signing_key` signs approval requests for the clients that echo signatures back; every worker serving
    the same chats needs the same key. A browser call whose result takes longer than `browser_timeout`
    seconds fails, and the model is told so."""

    def __init__(
        self, framework: Framework[H], gate: Gate, *, signing_key: bytes = b"", browser_timeout: float = 120.0
    ) -> None:
        self.framework = framework
        self.gate = gate
        self.signing_key = signing_key
        self.browser_timeout = browser_timeout
        self.browser_tools = framework.browser_tools
        self.histories: Histories[H] = Histories()
        check(gate.policy, self.acknowledged_names)  # see `integrations.chat.acknowledged`

    @property
    def browser_names(self) -> frozenset[str]:
        """The browser tools whose result the chat waits for."""
        return frozenset(tool.name for tool in self.browser_tools if not tool.acknowledged)

    @property
    def acknowledged_names(self) -> frozenset[str]:
        return frozenset(tool.name for tool in self.browser_tools if tool.acknowledged)

    async def load(self, chat_id: str, *, begun: bool = False) -> Loaded[H]:
        """The chat as stored (or with `begun`, as its running reply began), with what it waits on read
        from its history's open calls and the ledger (`integrations.chat.state.classify`), its browser results
        due `browser_timeout` after the save that left them open. A chat this worker saved last is not
        read again: the ledger gives its version alone, and the state and history are the ones kept."""
        ledger, framework = self.gate.ledger, self.framework
        held = self.histories.held(chat_id)
        stored = await ledger.chats.load(chat_id, held=held)
        kept = self.histories.at(chat_id, stored)
        if kept is None and stored is not None and stored.version == held:  # no longer kept: read it all
            stored = await ledger.chats.load(chat_id)
        if kept is None:
            state = state_of(stored, begun=begun)
            history = await framework.read(chat_id, stored, state, begun=begun)
        else:  # kept as its last save left it, which is also how its reply began and ended
            state, history = msgspec.structs.replace(kept.state), kept.history.copy()
        calls = framework.calls(history)
        found = await classify(ledger, chat_id, calls.open, self.browser_names)
        state.approvals, state.browser_calls, state.tasks = found
        if state.browser_calls and stored is not None:
            state.browser_due = stored.updated_at + self.browser_timeout
        state.confirmations = {c: calls.confirmations[c] for c in state.approvals if c in calls.confirmations}
        if calls.told is not None:  # news told as later responses: any call made with a task has news
            made = framework.made(history)
            started = (
                {t.call.call_id: t.id for t in await ledger.tasks.query(chat_id=chat_id)} if made else {}
            )
            state.tasks = {c: t for c, t in started.items() if c in made and c not in calls.told}
        return Loaded(stored, state, history)

    async def view(self, chat_id: str, *, begun: bool = False) -> ChatView:
        """The chat as stored after its last reply, or, with `begun`, as the running reply began."""
        loaded = await self.load(chat_id, begun=begun)
        approvals = await self.gate.ledger.approvals.query(chat_id=chat_id)
        tasks = await task_news(self.gate.ledger, loaded.state.tasks)
        messages = ui_messages(self.framework.transcript(loaded.history), loaded.state, approvals, tasks)
        return ChatView(messages, approvals)

    async def prepare(self, request: ChatRequest, wait: Wait, principal: Principal) -> DrivenReply[H]:
        """Check the request against the chat's state and record its decisions, as `principal`, who must
        own the chat (or start it), and carry out the machine's action; raises `Untrusted` before a byte
        is streamed. The reply it returns runs the framework and saves the chat."""
        loaded = await self.load(request.chat_id)
        # the calls the history holds are read only to check browser results against: a long chat's
        # answer need not walk its history
        made = self.framework.made(loaded.history) if request.outputs else frozenset[str]()
        ledger, key, timeout = self.gate.ledger, self.signing_key, self.browser_timeout
        begun = await begin(
            ledger, request, principal, loaded.stored, loaded.state, signing_key=key, browser_timeout=timeout,
            made=made, browser_tools=self.browser_names, cannot_regenerate=self.framework.cannot_regenerate,
        )  # fmt: skip
        run = await self.framework.start(request.chat_id, begun, loaded.history, request)
        return DrivenReply(self, request.chat_id, wait, begun, loaded.history, run)

    async def waiting(self, chat_id: str) -> dict[str, str]:
        """The calls the chat waits on a person for: call id to approval id."""
        return (await self.load(chat_id)).state.approvals

    async def prepare_overdue(self, chat_id: str, wait: Wait) -> DrivenReply[H] | None:
        """The reply that tells the model its browser calls got no result in time, started by the server
        itself; None when the machine has nothing for it to do (the chat moved on meanwhile)."""
        loaded = await self.load(chat_id)
        if (
            next_action(waits_of(loaded.state, self.gate.ledger.chats.clock()), Request.OVERDUE)
            is Action.IGNORE
        ):
            return None
        request = ChatRequest(chat_id=chat_id, trigger="submit-message")
        return await self.prepare(request, wait, owner_principal(loaded.stored))


class DrivenReply(Generic[H]):
    """A checked request, ready to run, and what a transport may do with it while it runs: a turn whose
    sink relays the gate's news beside the framework's events, translated into chunks, and the chat saved
    at the end."""

    def __init__(
        self, driver: ChatDriver[H], chat_id: str, wait: Wait, begun: Begun, history: H, framework_run: Run[H]
    ) -> None:
        self.driver = driver
        self.chat_id = chat_id
        self.wait = wait
        self.stored = begun.stored
        self.begun = begun.state
        """The chat as this reply began from."""
        self.history = history
        self.message_id = begun.message_id()
        """The assistant message the reply streams into."""
        self.continued = begun.continued
        """The earlier calls this reply continues: it streams their results into the open message."""
        self.held = begun.held
        """Browser outputs that came with their call's approval (see `Begun.held`)."""
        self.framework_run = framework_run
        self.browser: Browser | None = None
        """Set when the browser stays connected while the reply runs (the live socket)."""
        self.browser_due: float | None = None
        """Set once the reply is saved waiting on the browser: when its results are overdue."""
        self.translator: Translator | None = None
        self.turn: Turn | None = None
        self.acknowledgments: Acknowledgments | None = None
        """The results of acknowledged calls this reply sent, once it runs."""
        self._relay: Relay | None = None
        self._saving = asyncio.Lock()

    async def run(self, push: Callable[[Chunk], None]) -> None:
        """Run the reply to its end, handing each chunk to `push` the moment it is made (see `Relay`); a
        failure ends it with an `error` chunk."""
        acknowledgments = self.acknowledgments = Acknowledgments(self.driver.acknowledged_names)

        def pushed(chunk: Chunk) -> None:
            acknowledgments.note(chunk)
            push(chunk)

        relay = self._relay = Relay(pushed if acknowledgments.tools else push, park=self._park)
        owner = self.stored.owner or ""
        turn = Turn(self.chat_id, self.wait, relay, requester=owner, browser=self.browser, held=self.held)
        self.turn = turn
        run = self.framework_run
        translator = self.translator = run.translator(
            turn, self.message_id, self.continued, self.driver.signing_key
        )
        push(Start(message_id=self.message_id))
        try:
            await drive(run.run, translator, relay)
            if (ended := await run.end(translator, self.history)) is not None:
                await self._save(ended)
        except SignoffError as exc:
            push(Error(error_text=str(exc)))
        except Exception as exc:  # a model or tool failure ends this reply, not the server
            push(Error(error_text=f"the agent run failed: {type(exc).__name__}: {exc}"))

    async def _park(self, approval: Approval, history: Sequence[object]) -> None:
        """Save the chat as a deferred reply would have left it at this call, before a blocking wait. If
        this process dies while it blocks, the chat resumes on any worker like a deferred one, and the
        gate's single-use claim makes sure each approved call still runs once."""
        parked = self.framework_run.parked(history)
        if parked is None:
            return
        state = ChatState(history=msgspec.Raw(parked), assistant_id=self.message_id)
        async with self._saving:  # the chat's entries stay the history the reply began from
            self.history = await self._store(ChatState(assistant_id=self.begun.assistant_id, parked=state))

    async def _save(self, ended: Ended[H]) -> None:
        before = self.begun.acknowledged
        acknowledged = {**before, **(self.acknowledgments.results if self.acknowledgments else {})}
        state = ChatState(assistant_id=self.message_id, acknowledged=acknowledged, events=ended.events)
        if ended.browser_open:
            self.browser_due = self.driver.gate.ledger.chats.clock() + self.driver.browser_timeout
        async with self._saving:
            self.history = ended.history
            history = await self._store(state)
        if self.driver.framework.keeps_history:
            self.driver.histories.keep(self.chat_id, self.stored.version, history, state)

    async def _store(self, state: ChatState) -> H:
        """Save `state` with the reply's history as the chat's entries, writing only the entries the ledger
        lacks; the history as the ledger now holds it."""
        entries, history = self.history.entries()
        self.stored = await self.driver.gate.ledger.chats.save(
            self.chat_id, encode_state(state), version=self.stored.version, entries=entries
        )
        return history

    async def record_acted(self, ledger: Ledger, principal: Principal, outputs: Sequence[ToolOutput]) -> None:
        """Audit what the browser reported of its own on this reply's acknowledged calls, as it runs."""
        if self.acknowledgments is not None:
            await record_acted(ledger, self.chat_id, principal, self.acknowledgments.results, outputs)

    def interrupt(self) -> None:
        """Stop the run where it is; the reply ends with `abort`, and a call waiting on a person stays
        pending, so the chat goes on from its last save."""
        if self.translator is not None:
            self.translator.interrupt()

    def asking(self) -> dict[str, str]:
        """The calls this reply asked a person about so far: call id to approval id."""
        return {c: a.id for c, a in self.translator.asked.items()} if self.translator else {}

    def unresolved(self) -> dict[str, str]:
        """The calls of the streamed message with no result yet: call id to tool name (where known)."""
        return dict(self.translator.unresolved) if self.translator else dict.fromkeys(self.continued, "")

    def answered(self, accepted: bool, calls: Collection[str] = ()) -> None:
        """A client answered `calls` of this reply on the live socket (see `Translator.pause`)."""
        if self._relay is not None:
            self._relay.emit(Answered(accepted, frozenset(calls)))

    def visible(self) -> set[str]:
        """The calls of the message this reply streams: its own and the earlier ones it continues."""
        return set(self.translator.visible) if self.translator else set(self.continued)


__all__ = ["ChatDriver", "DrivenReply", "Framework", "Histories", "Ended", "Run"]
