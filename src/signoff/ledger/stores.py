"""What a backend implements: one store per concept, and the database they share.

The rules live above (`ledger/approvals.py`, `tasks.py`, `chats.py`, `principals.py`); a store only reads,
and every audited write goes through the database's one transaction, `Backend.transact`. Progress
reports, heartbeats, chat saves and reply logs are the writes that are not audited, so their stores write
them themselves.
"""

from __future__ import annotations

import asyncio
import contextlib
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import ClassVar, TypedDict

from signoff.core.approval import Approval, State
from signoff.core.audit import AuditEntry, AuditKey
from signoff.core.grant import Grant
from signoff.core.notice import Delivery, Notice
from signoff.core.principal import Registered
from signoff.core.task import Task
from signoff.ledger.keys import Apply, Key
from signoff.ledger.records import (
    Change,
    Entries,
    Progress,
    ReplyFrames,
    ReplyLog,
    StoredChat,
    TaskQuery,
)

Heard = Callable[[float], Awaitable[list[Approval | str]]]
"""What a backend's listener hears within at most a number of seconds, returning as soon as it hears
anything: decided records, or ids of decided approvals to read."""


class ApprovalStore(ABC):
    """Approvals, the grants their decisions made, and the audit chain."""

    @abstractmethod
    async def load(self, approval_id: str) -> Approval | None: ...

    @abstractmethod
    async def find(self, chat_id: str, call_id: str) -> Approval | None: ...

    @abstractmethod
    async def query(
        self, *, chat_id: str | None, state: State | None, due_by: float | None, limit: int | None
    ) -> list[Approval]:
        """Oldest first; `due_by` keeps those with a deadline at or before it."""

    @abstractmethod
    async def load_many(self, approval_ids: Sequence[str]) -> list[Approval]:
        """Those of `approval_ids` that exist, in one read."""

    @abstractmethod
    async def decided(self, approval_ids: Sequence[str]) -> list[Approval]:
        """Those of `approval_ids` that are no longer pending: what the watcher wakes waiters with."""

    @abstractmethod
    async def grants(self, *, chat_id: str | None, tool: str | None, active: bool) -> list[Grant]:
        """Oldest first; with `chat_id`, those of that chat and those of every chat."""

    @abstractmethod
    async def audit(self, after_seq: int, limit: int) -> list[AuditEntry]: ...

    @abstractmethod
    async def last_seq(self) -> int: ...


class TaskStore(ABC):
    """Long-running calls' tasks. Each change gets the next change number, in commit order."""

    @abstractmethod
    async def load(self, task_id: str) -> Task | None: ...

    @abstractmethod
    async def query(self, query: TaskQuery) -> list[Task]: ...

    @abstractmethod
    async def last_seq(self) -> int: ...

    @abstractmethod
    async def report(self, reports: Sequence[Progress], now: float) -> list[str]:
        """Write each running task's progress with the next change numbers, in one write; the ids among
        them that someone asked to cancel."""

    @abstractmethod
    async def beat(self, worker: str, now: float) -> list[str]:
        """Renew the heartbeat of every unfinished task `worker` runs; the ids of its running tasks that
        someone asked to cancel."""


class ChatStore(ABC):
    """Chats' server-side state, and the reply logs other workers follow."""

    @abstractmethod
    async def load(self, chat_id: str, held: int | None) -> StoredChat | None:
        """The chat's record, with its entries. When its version is `held`, the caller holds that
        version's state, and the store may leave the state and entries out rather than read them."""

    @abstractmethod
    async def save(self, chat: StoredChat, entries: Entries | None) -> bool:
        """Store `chat`, and change its entries as `entries` says (None: they stay), if the stored
        version is `chat.version - 1` (or absent when it is 1, and then with its owner); else False, and
        nothing changes. A later version keeps the owner the first one stored."""

    @abstractmethod
    async def log_replies(self, batch: Sequence[ReplyFrames], now: float) -> None: ...

    @abstractmethod
    async def reply_log(self, chat_id: str, after: int) -> ReplyLog | None: ...

    @abstractmethod
    async def forget_replies(self, before: float) -> int: ...


class PrincipalStore(ABC):
    """Registered principals, found by id or by their token's hash."""

    @abstractmethod
    async def load(self, principal_id: str) -> Registered | None: ...

    @abstractmethod
    async def by_token(self, token_hash: str) -> Registered | None: ...

    @abstractmethod
    async def all(self) -> list[Registered]:
        """Oldest first."""


class OutboxStore(ABC):
    """The notices channels are to hear of: written by `Backend.transact` with the events that make them,
    claimed by a delivering worker under a lease, and settled by it. How a delivery went is not audited
    (a give-up is, through the ledger), so the store writes it itself."""

    @abstractmethod
    async def claim(self, channel: str, holder: str, now: float, until: float, limit: int) -> list[Notice]:
        """Up to `limit` of `channel`'s pending notices due by `now` that nobody holds, or whose holder's
        lease ran out, soonest due first: held by `holder` until `until`, each attempt counted."""

    @abstractmethod
    async def settle(self, notices: Sequence[tuple[Notice, str]]) -> set[str]:
        """Store each notice as it now stands, if the holder beside it still holds it (a worker whose lease
        ran out and was taken over settles nothing), in one write; the ids of those stored."""

    @abstractmethod
    async def load(self, notice_id: str) -> Notice | None: ...

    @abstractmethod
    async def query(
        self, *, state: Delivery | None, approval_id: str | None, limit: int | None
    ) -> list[Notice]:
        """Oldest first."""


class PoolOptions(TypedDict, total=False):
    """How a ledger on a server reaches it, as its constructor takes them."""

    pool_size: int
    connect_timeout: float
    """Bounds reaching the server."""
    pool_timeout: float
    """Bounds waiting here for one of the `pool_size` connections, which a busy worker does long before the
    server is slow: the two are apart so that a call refused after a short queue never fails a healthy
    ledger."""
    socket_timeout: float
    """Bounds one call to the server, a command or a pipeline, its retries included (Redis)."""
    poll_interval: float


@dataclass(frozen=True, slots=True)
class Pool:
    size: int
    connect_timeout: float
    pool_timeout: float
    poll_interval: float
    socket_timeout: float = 30.0

    @classmethod
    def of(cls, options: PoolOptions, *, size: int) -> Pool:
        """`options` as given, the rest defaults (`size` is the backend's own)."""
        return cls(
            size=options.get("pool_size", size),
            connect_timeout=options.get("connect_timeout", 5.0),
            pool_timeout=options.get("pool_timeout", 30.0),
            poll_interval=options.get("poll_interval", 1.0),
            socket_timeout=options.get("socket_timeout", 30.0),
        )


class Backend(ABC):
    """One database: its lifecycle and schema, the transaction every store's audited writes share, and
    how its processes learn of each other's decisions."""

    approvals: ApprovalStore
    tasks: TaskStore
    chats: ChatStore
    principals: PrincipalStore
    outbox: OutboxStore

    group_commit: ClassVar[bool] = True
    """Whether a process's writes queue up for one transaction (see `ledger.committer`): worth it where a
    write costs a round trip or a thread hop, not where it costs a dict assignment."""
    shared: ClassVar[bool] = True
    """Whether other processes write too, so that waiters here need a watcher (see `ledger.watcher`)."""
    poll_interval: float = 1.0
    """Seconds between the watcher's reads of the approvals its process waits on."""

    def _hold(
        self,
        approvals: ApprovalStore,
        tasks: TaskStore,
        chats: ChatStore,
        principals: PrincipalStore,
        outbox: OutboxStore,
    ) -> None:
        """Keep the backend's stores: one call, so that a backend's constructor says in one place which
        stores it is made of, and a sixth store is a sixth argument everywhere at once."""
        self.approvals, self.tasks, self.chats = approvals, tasks, chats
        self.principals, self.outbox = principals, outbox

    async def start(self) -> None:  # noqa: B027 - a backend with nothing to connect keeps this
        """Connect, and create or migrate the schema."""

    async def close(self) -> None:  # noqa: B027
        """Release connections."""

    async def upgrade(self) -> tuple[int, int]:
        """Create or migrate the schema without serving; its version before and after (0 for none)."""
        return 0, 0

    @abstractmethod
    async def transact(self, keys: Sequence[Key], apply: Apply, key: AuditKey) -> list[Change]:
        """Load the records of `keys`, run `apply` on them, and store the writes it returns with their audit
        entries chained with `key`, all or nothing, serialized against every other writer; the changes as
        stored, each task with its change number. `apply` may raise: then nothing is stored."""

    async def lease(self, name: str, holder: str, now: float, ttl: float) -> bool:
        """Take or renew the lease `name` until `now + ttl` if it is free, expired or already `holder`'s. A
        database only one process uses has nobody to share with."""
        return True

    async def ping(self) -> None:
        """Ask the database something cheap, as readiness does twice a second; raises `LedgerUnavailable`.
        A server's backend asks over a connection of its own: asked through the pool, a probe queued behind
        a burst of requests took a busy ledger for one that is away."""
        await self.approvals.last_seq()

    async def volatile(self) -> str | None:
        """Why the database's server would lose what it holds when it restarts; None when it keeps it
        (see `ledger.base.volatile`). A database on disk keeps it."""
        return None

    async def moved(self) -> bool:
        """Whether another process may have written since the last call: a cheap check that spares the
        watcher reading every approval it waits on when nothing changed. Unknown means yes."""
        return True

    @contextlib.asynccontextmanager
    async def listen(self) -> AsyncIterator[Heard]:
        """A channel on which decisions made by other processes are heard as they happen. A backend with
        none hears nothing, and the watcher's reads every `poll_interval` find every decision."""
        yield _silence


async def _silence(seconds: float) -> list[Approval | str]:
    await asyncio.sleep(seconds)
    return []
