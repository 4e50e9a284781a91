"""The ledger interface: durable approvals, first-wins decisions, single-use claims, grants and audit.

All the rules live in the base class and in the core; a backend supplies only a few atomic primitives.
`_mutate` is the one that matters: read a record, apply a pure step, write the result and its audit
entries, all-or-nothing and serialized against every other writer of that record and of the audit chain.
`_mutate_task` is the same for tasks.
SQLite does it in a `BEGIN IMMEDIATE` transaction; PostgreSQL and Redis group-commit many of them at once
(`ledger/batch.py`), in a transaction under an advisory lock or with an optimistic compare-and-set.
"""

from __future__ import annotations

import contextlib
import secrets
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Self

from signoff.core import approval as machine
from signoff.core.approval import Approval, OnTimeout, State
from signoff.core.audit import AuditEntry, AuditEvent, BrokenLink, ChainCheck, Checkpoint, Keyring
from signoff.core.call import ToolCall
from signoff.core.decision import Decision
from signoff.core.errors import (
    AlreadyDecided,
    AlreadyVoted,
    CallMismatch,
    NotAnApprover,
    NotFound,
    StaleChat,
    TaskFinished,
    Unproven,
)
from signoff.core.grant import Grant, grant_for, revoke
from signoff.core.principal import Authority, Principal, Registered, assign_roles, register, token_hash
from signoff.core.principal import revoke as revoke_principal
from signoff.core.proof import grant_holds
from signoff.core.task import Task, TaskState, abandon, new_task
from signoff.ledger.notifier import Notifier


@dataclass(frozen=True, slots=True)
class Change:
    """What one atomic step writes: the new approval, grant, task or principal, and the audit events that
    record it."""

    approval: Approval | None = None
    grant: Grant | None = None
    task: Task | None = None
    principal: Registered | None = None
    events: tuple[AuditEvent, ...] = ()


Clock = Callable[[], float]
TaskStep = Callable[[Task], tuple[Task, AuditEvent | None]]


@dataclass(frozen=True, slots=True)
class Progress:
    """How far one running task got: written as it is, replacing the last report."""

    task_id: str
    progress: int
    message: str = ""


@dataclass(frozen=True, slots=True)
class TaskQuery:
    """Which tasks to read: of one chat, in some states, whose heartbeat is older than `beat_before`; or
    those changed after change number `after_seq`. Oldest first, or in change order with `after_seq`."""

    chat_id: str | None = None
    states: tuple[TaskState, ...] | None = None
    after_seq: int | None = None
    beat_before: float | None = None
    limit: int | None = None

    def select(self, tasks: Iterable[Task]) -> list[Task]:
        """The query run in Python, for a backend whose store cannot run all of it."""
        found = [
            t
            for t in tasks
            if (self.chat_id is None or t.chat_id == self.chat_id)
            and (self.states is None or t.state in self.states)
            and (self.after_seq is None or t.seq > self.after_seq)
            and (self.beat_before is None or t.heartbeat < self.beat_before)
        ]
        found.sort(key=(lambda t: t.seq) if self.after_seq is not None else (lambda t: t.created_at))
        return found[: self.limit]


@dataclass(frozen=True, slots=True)
class ReplyFrames:
    """What one chat's reply adds to its log: frames numbered `start + 1…`, and whether it ended. With
    `meta`, the reply begins here: the chat's log starts over, the previous reply's frames dropped. No
    frames and no end is a heartbeat."""

    chat_id: str
    reply: str
    start: int = 0
    frames: Sequence[bytes] = ()
    done: bool = False
    meta: bytes | None = None


@dataclass(frozen=True, slots=True)
class ReplyLog:
    """The latest reply of a chat as its worker streams it, for readers on other workers: `meta` is the
    worker's own description of the reply (opaque here), `frames` those after the ones already read."""

    reply: str
    meta: bytes
    done: bool
    updated_at: float
    frames: list[bytes]


@dataclass(frozen=True, slots=True)
class StoredChat:
    """A chat's server-side state, opaque to the ledger. `version` counts saves, so a writer that read an
    older version cannot overwrite a newer one. `owner` is the principal that started the chat, set by its
    first save and never changed (None for a chat saved before chats had owners)."""

    chat_id: str
    version: int
    state: bytes
    updated_at: float
    owner: str | None = None


class Ledger(ABC):
    """One async interface over every backend. Use as `async with ledger:` or `start()` / `close()`."""

    sweep_lease = 5.0
    """Seconds one process's deadline sweeper holds its lease: if it dies, another takes over after this."""

    def __init__(self, *, clock: Clock = time.time, keyring: Keyring | None = None) -> None:
        self.clock = clock
        self.keyring = keyring or self._default_keyring()
        """The audit key the chain, decisions and grants are proven with, and older ones they may carry."""
        self.notifier = Notifier()
        self._holder = secrets.token_hex(8)
        self._task_listeners: set[Callable[[], None]] = set()

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    def _default_keyring(self) -> Keyring:
        """The key every process using this ledger shares: `SIGNOFF_AUDIT_KEY_FILE`, or the one in the
        user's data directory, made on first use (see `ledger.keyfile`)."""
        from signoff.ledger.keyfile import load_keyring

        return load_keyring().keyring

    async def start(self) -> None:  # noqa: B027 - a backend with nothing to connect keeps this
        """Connect and create or migrate the schema."""

    async def close(self) -> None:  # noqa: B027
        """Release connections; waiters in this process stop being woken by other processes."""

    async def upgrade(self) -> tuple[int, int]:
        """Create or migrate the schema without serving (`signoff db upgrade`); returns its version
        before and after. `start` does the same, so this is for operators who migrate ahead of a rollout.
        A ledger with no schema of its own has version 0."""
        return 0, 0

    # -- backend primitives -------------------------------------------------------------------------------

    @abstractmethod
    async def _insert(self, approval: Approval, event: AuditEvent) -> Approval:
        """Store a new approval, or return the existing one for the same chat and call id."""

    @abstractmethod
    async def _load(self, approval_id: str) -> Approval | None: ...

    @abstractmethod
    async def _find(self, chat_id: str, call_id: str) -> Approval | None: ...

    @abstractmethod
    async def _query(
        self, *, chat_id: str | None, state: State | None, due_by: float | None, limit: int | None
    ) -> list[Approval]: ...

    @abstractmethod
    async def _mutate(self, approval_id: str, step: Callable[[Approval], Change]) -> Change:
        """Atomically load the approval, apply `step`, and persist its `Change`. NotFound if absent."""

    @abstractmethod
    async def _mutate_grant(self, grant_id: str, step: Callable[[Grant], Change]) -> Change: ...

    @abstractmethod
    async def _append(self, events: Sequence[AuditEvent]) -> None: ...

    @abstractmethod
    async def _grants(self, *, chat_id: str | None, tool: str | None, active: bool) -> list[Grant]: ...

    @abstractmethod
    async def _audit(self, after_seq: int, limit: int) -> list[AuditEntry]: ...

    @abstractmethod
    async def _last_seq(self) -> int: ...

    @abstractmethod
    async def _load_chat(self, chat_id: str) -> StoredChat | None: ...

    @abstractmethod
    async def _save_chat(self, chat: StoredChat) -> bool:
        """Store `chat` if the stored version is `chat.version - 1` (or absent when it is 1, and then with
        its owner); else False. A later version keeps the owner the first one stored."""

    @abstractmethod
    async def _log_replies(self, batch: Sequence[ReplyFrames], now: float) -> None: ...

    @abstractmethod
    async def _reply_log(self, chat_id: str, after: int) -> ReplyLog | None: ...

    @abstractmethod
    async def _forget_replies(self, before: float) -> int: ...

    @abstractmethod
    async def _insert_task(self, task: Task, event: AuditEvent) -> Task:
        """Store a new task with the next change number, and its audit entry, all or nothing; or return the
        task its chat and call id already has, so a retried call never starts twice."""

    @abstractmethod
    async def _mutate_task(self, task_id: str, step: Callable[[Task], Change]) -> Change:
        """`_mutate` for a task: its result gets the next change number, serialized against progress
        reports too; the change as stored."""

    @abstractmethod
    async def _load_task(self, task_id: str) -> Task | None: ...

    @abstractmethod
    async def _query_tasks(self, query: TaskQuery) -> list[Task]: ...

    @abstractmethod
    async def _last_task_seq(self) -> int: ...

    @abstractmethod
    async def _report(self, reports: Sequence[Progress], now: float) -> list[str]:
        """Write each running task's progress with the next change numbers, in one write; the ids among
        them that someone asked to cancel."""

    @abstractmethod
    async def _beat(self, worker: str, now: float) -> list[str]:
        """Renew the heartbeat of every unfinished task `worker` runs; the ids of its running tasks that
        someone asked to cancel."""

    @abstractmethod
    async def _mutate_principal(
        self, principal_id: str, step: Callable[[Registered | None], Change]
    ) -> Change:
        """`_mutate` for a principal; `step` gets None when there is none yet (a new one)."""

    @abstractmethod
    async def _load_principal(self, principal_id: str) -> Registered | None: ...

    @abstractmethod
    async def _principal_by_token(self, token_hash: str) -> Registered | None: ...

    @abstractmethod
    async def _principals(self) -> list[Registered]: ...

    async def _lease(self, name: str, holder: str, ttl: float) -> bool:
        """Take or renew the lease `name` for `ttl` seconds if it is free, expired or already `holder`'s.
        A ledger only one process uses has nobody to share with."""
        return True

    def _watch(self) -> None:  # noqa: B027 - in-process backends learn of every decision directly
        """Called when someone starts waiting: a backend shared between processes starts watching them."""

    # -- approvals ----------------------------------------------------------------------------------------

    async def open(
        self,
        call: ToolCall,
        *,
        chat_id: str,
        description: str,
        rule: str,
        deadline: float | None = None,
        on_timeout: OnTimeout = "deny",
        actor: str = "signoff:gate",
        requester: str = "",
        authority: Authority | None = None,
        schema: dict[str, Any] | None = None,
    ) -> Approval:
        """Open a pending approval for `call`, asked by `requester` (the chat's owner), which `authority`
        says who may decide; an edit of it must fit the tool's `schema`. Opening the same chat and call id
        again returns the first one, as long as the arguments are the same: a retried request never asks
        twice."""
        approval, event = machine.open_approval(
            call,
            chat_id=chat_id,
            description=description,
            rule=rule,
            now=self.clock(),
            deadline=deadline,
            on_timeout=on_timeout,
            actor=actor,
            requester=requester,
            authority=authority,
            schema=schema,
        )
        stored = await self._insert(approval, event)
        if stored.digest != approval.digest or stored.call.tool != call.tool:
            raise CallMismatch(
                f"call {call.call_id} in chat {chat_id} was already asked with other arguments"
            )
        return stored

    async def get(self, approval_id: str) -> Approval:
        approval = await self._load(approval_id)
        if approval is None:
            raise NotFound(f"no approval {approval_id}")
        return approval

    async def find(self, chat_id: str, call_id: str) -> Approval | None:
        return await self._find(chat_id, call_id)

    async def approvals(
        self, *, chat_id: str | None = None, state: State | str | None = None, limit: int | None = None
    ) -> list[Approval]:
        """Approvals oldest first, optionally of one chat and/or in one state."""
        return await self._query(
            chat_id=chat_id, state=None if state is None else State(state), due_by=None, limit=limit
        )

    async def decide(self, approval_id: str, decision: Decision) -> Approval:
        """Record a decision if it is the first, or count it toward the approval's quorum. A loser gets
        `AlreadyDecided` carrying the winner; a principal the approval's rule does not admit gets
        `NotAnApprover`, and one that approved already `AlreadyVoted`, both audited.

        A decision arriving after the deadline loses to it: the step writes the expiry instead.
        """
        late = False

        def step(approval: Approval) -> Change:
            nonlocal late
            now = self.clock()
            after, event = machine.decide(approval, decision, now, self.keyring.current)
            late = event.action == "expire"
            remembered = grant_for(after, now, self.keyring.current)
            if remembered is None:
                return Change(approval=after, events=(event,))
            grant, grant_event = remembered
            return Change(approval=after, grant=grant, events=(event, grant_event))

        try:
            after = await self._apply(approval_id, step)
        except (NotAnApprover, AlreadyVoted) as refused:
            await self.record("refuse", approval_id, decision.by, why=str(refused), via=decision.via)
            raise
        if late:
            raise AlreadyDecided(after)
        return after

    async def consume(self, approval_id: str, call: ToolCall, actor: str) -> Approval:
        """Take the single-use claim to run `call` now. A second claim raises `AlreadyConsumed`; one whose
        approving decisions carry no valid proof raises `Unproven`, audited."""

        def step(approval: Approval) -> Change:
            return self._one(*machine.consume(approval, call, actor, self.clock(), self.keyring))

        try:
            return await self._apply(approval_id, step)
        except Unproven as refused:
            await self.record("refuse", approval_id, actor, why=refused.why, tool=call.tool)
            raise

    async def cancel(self, approval_id: str, actor: str, reason: str = "") -> Approval:
        return await self._apply(
            approval_id, lambda approval: self._one(*machine.cancel(approval, actor, reason, self.clock()))
        )

    async def expire(self, approval_id: str) -> Approval:
        """Apply the deadline of one approval now; raises `IllegalTransition` if it is not due."""
        return await self._apply(
            approval_id,
            lambda approval: self._one(*machine.expire(approval, self.clock(), self.keyring.current)),
        )

    async def expire_due(self) -> list[Approval]:
        """Expire every pending approval whose deadline has passed, applying each one's on_timeout.

        Every worker's sweeper calls this, but only the holder of the sweeper lease does the work, so
        workers don't all scan and race on the same approvals (a race they would lose cleanly anyway:
        an expiry is a transition like any other, and only one applies).
        """
        if not await self._lease("sweeper", self._holder, self.sweep_lease):
            return []
        expired = []
        for approval in await self._query(chat_id=None, state=State.PENDING, due_by=self.clock(), limit=None):
            try:
                expired.append(await self.expire(approval.id))
            except AlreadyDecided:
                continue
        return expired

    async def wait(self, approval_id: str) -> Approval:
        """Wait until the approval leaves `pending`. Bound it with `asyncio.timeout`.

        The waiter subscribes before it reads, so a decision landing in between is never missed.
        """
        future = self.notifier.subscribe(approval_id)
        try:
            current = await self.get(approval_id)
            if current.state is not State.PENDING:
                return current
            self._watch()
            return await future
        finally:
            self.notifier.unsubscribe(approval_id, future)

    async def record(self, action: str, subject: str, actor: str, **detail: object) -> None:
        """Append an event that changes no state (a failed approver, a refused forgery, a grant used),
        stamped with the ledger's clock like every transition."""
        event = AuditEvent(at=self.clock(), actor=actor, action=action, subject=subject, detail=detail)
        await self._append((event,))

    # -- grants -------------------------------------------------------------------------------------------

    async def grants(
        self, *, chat_id: str | None = None, tool: str | None = None, active: bool = True
    ) -> list[Grant]:
        return await self._grants(chat_id=chat_id, tool=tool, active=active)

    async def match_grant(self, call: ToolCall, chat_id: str) -> Grant | None:
        """The first active grant that covers this call in this chat (its own or a global one). A grant
        whose proof fails was written around signoff: it is passed over, and that is audited."""
        for grant in await self._grants(chat_id=chat_id, tool=call.tool, active=True):
            if not grant.matches(call, chat_id):
                continue
            if grant_holds(self.keyring, grant):
                return grant
            await self.record("refuse", grant.id, "signoff:ledger", why="the grant carries no valid proof")
        return None

    async def revoke_grant(self, grant_id: str, actor: str) -> Grant:
        def step(grant: Grant) -> Change:
            after, event = revoke(grant, actor, self.clock())
            return Change(grant=after, events=(event,))

        change = await self._mutate_grant(grant_id, step)
        assert change.grant is not None
        return change.grant

    # -- principals ---------------------------------------------------------------------------------------

    async def register(
        self, name: str, roles: Sequence[str] = (), *, display: str = "", actor: str
    ) -> tuple[Registered, str]:
        """Register a principal with a new personal token; the record, and the token, which only its
        holder ever sees again: the ledger keeps its hash."""
        made: list[str] = []

        def step(existing: Registered | None) -> Change:
            record, token, event = register(
                name, roles, display=display, actor=actor, now=self.clock(), existing=existing
            )
            made.append(token)
            return Change(principal=record, events=(event,))

        change = await self._mutate_principal(name, step)
        assert change.principal is not None
        return change.principal, made[-1]

    async def principal(self, principal_id: str) -> Registered:
        found = await self._load_principal(principal_id)
        if found is None:
            raise NotFound(f"no principal {principal_id}")
        return found

    async def principals(self) -> list[Registered]:
        """Every registered principal, revoked ones too, oldest first."""
        return await self._principals()

    async def authenticate(self, token: str) -> Principal | None:
        """The principal a personal token proves, read now, so a revocation counts from the next request
        on every worker; None for an unknown or revoked token."""
        found = await self._principal_by_token(token_hash(token))
        return found.principal if found is not None and found.active else None

    async def revoke_principal(self, principal_id: str, actor: str) -> Registered:
        return await self._change_principal(
            principal_id, lambda record: revoke_principal(record, actor=actor, now=self.clock())
        )

    async def assign_roles(self, principal_id: str, roles: Sequence[str], actor: str) -> Registered:
        return await self._change_principal(
            principal_id, lambda record: assign_roles(record, roles, actor=actor, now=self.clock())
        )

    async def _change_principal(
        self, principal_id: str, step: Callable[[Registered], tuple[Registered, AuditEvent]]
    ) -> Registered:
        def change(record: Registered | None) -> Change:
            if record is None:
                raise NotFound(f"no principal {principal_id}")
            after, event = step(record)
            return Change(principal=after, events=(event,))

        stored = (await self._mutate_principal(principal_id, change)).principal
        assert stored is not None
        return stored

    # -- chats --------------------------------------------------------------------------------------------

    async def load_chat(self, chat_id: str) -> StoredChat | None:
        return await self._load_chat(chat_id)

    async def save_chat(
        self, chat_id: str, state: bytes, *, version: int, owner: str | None = None
    ) -> StoredChat:
        """Save a chat's state over the `version` that was read (0 for a new chat, which `owner` starts).

        Raises `StaleChat` when someone else saved in between, so two requests racing on one chat can never
        silently lose one's history, nor two principals both start it.
        """
        chat = StoredChat(
            chat_id=chat_id, version=version + 1, state=state, updated_at=self.clock(), owner=owner
        )
        if not await self._save_chat(chat):
            raise StaleChat(f"chat {chat_id} changed while this request was running; reload it and retry")
        return chat

    # -- reply logs ---------------------------------------------------------------------------------------

    async def log_replies(self, batch: Sequence[ReplyFrames]) -> None:
        """Record what several chats' replies added since the last call, in one write. Frames for a chat
        whose log has moved on to another reply are dropped: a reply never writes into a newer one's log,
        and a frame number written twice (a retry) keeps its first write."""
        if batch:
            await self._log_replies(batch, self.clock())

    async def reply_log(self, chat_id: str, after: int = 0) -> ReplyLog | None:
        """The chat's latest reply log, with its frames after the first `after`; None if there is none."""
        return await self._reply_log(chat_id, after)

    async def forget_replies(self, before: float) -> int:
        """Drop the reply logs last written before `before` (ended, or their worker died); the count."""
        return await self._forget_replies(before)

    # -- tasks --------------------------------------------------------------------------------------------

    def on_tasks(self, listener: Callable[[], None]) -> Callable[[], None]:
        """Call `listener` after every task change this process writes (a feed wakes on it rather than
        waiting for its next poll); returns the function that stops it."""
        self._task_listeners.add(listener)
        return lambda: self._task_listeners.discard(listener)

    def _tasks_changed(self) -> None:
        for listener in list(self._task_listeners):
            listener()

    async def create_task(self, call: ToolCall, *, chat_id: str, worker: str, actor: str) -> Task:
        """Record a new pending task for `call`, run by `worker`; the call's existing task if it has one."""
        task, event = new_task(call, chat_id=chat_id, worker=worker, now=self.clock(), actor=actor)
        stored = await self._insert_task(task, event)
        if stored.id == task.id:
            self._tasks_changed()
        return stored

    async def get_task(self, task_id: str) -> Task:
        task = await self._load_task(task_id)
        if task is None:
            raise NotFound(f"no task {task_id}")
        return task

    async def tasks(
        self, *, chat_id: str | None = None, state: TaskState | str | None = None, limit: int | None = None
    ) -> list[Task]:
        """Tasks oldest first, optionally of one chat and/or in one state."""
        states = None if state is None else (TaskState(state),)
        return await self._query_tasks(TaskQuery(chat_id=chat_id, states=states, limit=limit))

    async def task_changes(self, after_seq: int, limit: int = 1000) -> list[Task]:
        """Every task changed after change number `after_seq`, in change order, each as it is now."""
        return await self._query_tasks(TaskQuery(after_seq=after_seq, limit=limit))

    async def last_task_seq(self) -> int:
        """The newest task change's number: where a feed that only wants what happens next starts."""
        return await self._last_task_seq()

    async def change_task(self, task_id: str, step: TaskStep) -> Task:
        """Apply a pure step to the task as stored, with its audit event, all or nothing."""

        def change(task: Task) -> Change:
            after, event = step(task)
            return Change(task=after, events=() if event is None else (event,))

        stored = (await self._mutate_task(task_id, change)).task
        assert stored is not None
        self._tasks_changed()
        return stored

    async def report(self, reports: Sequence[Progress]) -> list[str]:
        """Write the progress of running tasks (a finished one keeps its record); the ids among them
        someone asked to cancel."""
        if not reports:
            return []
        cancelled = await self._report(reports, self.clock())
        self._tasks_changed()
        return cancelled

    async def beat(self, worker: str) -> list[str]:
        """Say that `worker` is alive and still runs its tasks; the ids someone asked it to cancel."""
        return await self._beat(worker, self.clock())

    async def abandon_tasks(self, silent_for: float) -> list[Task]:
        """Fail every unfinished task whose worker has not beaten for `silent_for` seconds: it died, and
        nobody else will ever finish the task. Only the sweeper lease's holder does it."""
        if not await self._lease("task-sweeper", self._holder, self.sweep_lease):
            return []
        now = self.clock()
        silent = TaskQuery(states=(TaskState.PENDING, TaskState.RUNNING), beat_before=now - silent_for)
        failed = []
        for task in await self._query_tasks(silent):
            with contextlib.suppress(TaskFinished, _Alive):
                failed.append(await self.change_task(task.id, _abandon_silent(now, silent_for)))
        return failed

    # -- audit --------------------------------------------------------------------------------------------

    async def audit(self, after_seq: int = 0, limit: int = 1000) -> list[AuditEntry]:
        return await self._audit(after_seq, limit)

    async def last_seq(self) -> int:
        """The newest audit entry's number: where a feed that only wants what happens next starts."""
        return await self._last_seq()

    async def verify_audit(self, checkpoints: Sequence[Checkpoint] = ()) -> tuple[int, BrokenLink | None]:
        """Check the whole chain, a page at a time, against every checkpoint given; report the first broken
        link. (`signoff.ledger.evidence.verify` checks the records against the chain too.)"""
        check, after = ChainCheck(self.keyring, checkpoints), 0
        while page := await self._audit(after, 5000):
            if broken := check.feed(page):
                return check.count, broken
            after = page[-1].seq
        return check.count, check.end()

    async def checkpoint(self) -> Checkpoint:
        """The chain's length and head now, signed with the current key: keep it outside the database."""
        count = await self._last_seq()
        head = (await self._audit(count - 1, 1))[0].hash if count else ""
        return Checkpoint(count=count, head=head, at=self.clock()).signed(self.keyring.current)

    # -- helpers ------------------------------------------------------------------------------------------

    @staticmethod
    def _one(approval: Approval, event: AuditEvent) -> Change:
        return Change(approval=approval, events=(event,))

    async def _apply(self, approval_id: str, step: Callable[[Approval], Change]) -> Approval:
        change = await self._mutate(approval_id, step)
        assert change.approval is not None
        self.notifier.notify(change.approval)
        return change.approval


class _Alive(Exception):
    """The task's worker beat again since it was found silent: it is not abandoned."""


def _abandon_silent(now: float, silent_for: float) -> TaskStep:
    def step(task: Task) -> tuple[Task, AuditEvent | None]:
        if task.heartbeat >= now - silent_for:
            raise _Alive
        silence = now - task.heartbeat
        why = f"the worker running it ({task.worker}) stopped: no heartbeat for {silence:.0f} s"
        return abandon(task, why, now)

    return step
