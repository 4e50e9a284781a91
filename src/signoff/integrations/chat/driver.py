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
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol

import msgspec

from signoff.core.approval import Approval, State
from signoff.core.errors import SignoffError
from signoff.core.principal import Principal
from signoff.gate import Gate, Wait
from signoff.integrations.chat.acknowledged import Acknowledgments, check
from signoff.integrations.chat.answers import take_answers
from signoff.integrations.chat.history import H, Histories, Loaded
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
from signoff.integrations.chat.trust import OutOfTurn, accept_responses
from signoff.integrations.chat.turn import Answered, Browser, Turn
from signoff.integrations.chat.ui import Entry, ui_messages
from signoff.ledger.records import StoredChat
from signoff.protocol import ChatRequest, Chunk, Error, Start


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

    async def answer(
        self, request: ChatRequest, principal: Principal, asked: Mapping[str, str] | None = None
    ) -> None:
        """Record the approval responses of `request` for a reply that no browser follows live (one running
        on another worker, or here without a socket, whose calls `asked` a person): the reply itself goes on
        when the ledger hears the decision. Browser results belong to the reply's own socket."""
        waiting = await self.waiting(request.chat_id) if asked is None else asked
        await accept_responses(
            self.gate.ledger, request.chat_id, waiting, request.approvals, principal, self.signing_key,
            self.browser_names,
        )  # fmt: skip
        if request.outputs:
            raise OutOfTurn(
                "messages", f"the reply in chat {request.chat_id} takes browser results from its own socket"
            )

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
        self._held = begun.held
        """Browser outputs that came with their call's approval (see `Begun.held`)."""
        self.framework_run = framework_run
        self._browser: Browser | None = None
        """Set when the browser stays connected while the reply runs (the live socket)."""
        self._browser_due: float | None = None
        """Set once the reply is saved waiting on the browser: when its results are overdue."""
        self.translator: Translator | None = None
        self._turn: Turn | None = None
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
        turn = Turn(self.chat_id, self.wait, relay, requester=owner, browser=self._browser, held=self._held)
        self._turn = turn
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
            self._browser_due = self.driver.gate.ledger.chats.clock() + self.driver.browser_timeout
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

    def live(self) -> None:
        """The browser stays connected while the reply runs (the live socket): browser tools are answered
        within the reply instead of ending it. Called before `run`."""
        self._browser = Browser(timeout=self.driver.browser_timeout)

    def browser_due(self) -> float | None:
        """When the browser's results are overdue, once the reply is saved waiting on them."""
        return self._browser_due

    async def answer(self, request: ChatRequest, principal: Principal) -> None:
        """An answer to this running reply, as a standard client sends it: the whole message list, from
        which the approval responses and browser results count. Followed live, an approved browser call
        whose output came with its approval runs with it, and a result that came before its call was handed
        over waits for the call's run; while the answer is recorded the turn does not pause on the calls it
        answers, and once it is taken the client follows the turn on a new stream."""
        turn, browser = self._turn, self._browser
        if turn is None or browser is None:
            await self.driver.answer(request, principal, self.asking())
            return
        driver, acknowledgments = self.driver, self.acknowledgments
        answering = {r.call_id for r in request.approvals} | {o.call_id for o in request.outputs}
        turn.answering |= answering
        accepted, answered = False, set[str]()
        unresolved = self.unresolved()  # an asked call whose result streamed is over for the turn

        async def decided(approvals: Sequence[Approval]) -> tuple[Mapping[str, str], Collection[str]]:
            for approval in approvals:  # decided here: its waiter wakes up soon, the turn waits no more
                if approval.state is not State.PENDING:
                    turn.waiting.discard(approval.call.call_id)
            asking = turn.waiting  # an output alone can't answer a person's question
            return {
                c: t for c, t in unresolved.items() if t in driver.browser_names and c not in asking
            }, asking

        try:
            asked = {c: a for c, a in self.asking().items() if c in unresolved}
            taken = await take_answers(
                driver.gate.ledger, request, principal, asked,
                made=self.visible(), acknowledged=acknowledgments.results if acknowledgments else {},
                decided=decided, signing_key=driver.signing_key, browser_tools=driver.browser_names,
            )  # fmt: skip
            self._held.update(browser.deliver(taken.held))  # unless its run, woken already, awaits it
            turn.early.update(browser.deliver(taken.outputs))
            accepted = True
            answered = {a.call.call_id for a in taken.decided} | set(taken.held) | set(taken.outputs)
        finally:
            turn.answering -= answering
            self.answered(accepted, answered)

    def interrupt(self) -> None:
        """Stop the run where it is; the reply ends with `abort`, and a call waiting on a person stays
        pending, so the chat goes on from its last save."""
        if self.translator is not None:
            self.translator.interrupt()

    def asking(self, *, still: bool = False) -> dict[str, str]:
        """The calls this reply asked a person about so far: call id to approval id; `still`, those its turn
        still waits on (a live turn's answered ones are not)."""
        asked = {c: a.id for c, a in self.translator.asked.items()} if self.translator else {}
        turn = self._turn
        return {c: a for c, a in asked.items() if not still or turn is None or c in turn.waiting}

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


__all__ = ["ChatDriver", "DrivenReply", "Framework", "Ended", "Run"]
