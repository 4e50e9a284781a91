"""A database write can't approve, on every ledger backend: someone with the database's credentials but not
the audit key rewrites signoff's own rows between a stop and a restart (in place, for the memory ledger),
and each time the call does not run, and `audit verify` reports what was done.

- a vote's verdict: a deny moved among the votes of an approval made approved;
- an approval's rule loosened before anyone voted (quorum 1, the requester may approve);
- a principal promoted to finance, minted with a chosen token, re-activated after its revocation, or given
  another token;
- a revoked grant re-activated;
- a consumed approval's row deleted.
"""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import msgspec
import psycopg
import pytest
import redis.asyncio as aioredis

from signoff import Decision, Ledger, Policy, ToolCall
from signoff.core.approval import Approval, State, Vote
from signoff.core.errors import Unproven
from signoff.core.grant import Grant
from signoff.core.principal import Authority, Principal, Registered, token_hash
from signoff.gate import Gate, Pending
from signoff.ledger.evidence import verify
from signoff.ledger.memory import MemoryBackend
from signoff.ledger.postgres import PostgresLedger
from signoff.ledger.redis import RedisLedger
from signoff.ledger.sqlite import SqliteLedger
from tests.conftest import POSTGRES, REDIS, drop, make_ledger

POLICY = Policy.from_toml(
    """
    [[tools.pay]]
    action = "ask"
    approvers = ["role:finance"]
    quorum = 2
    requester_may_approve = false
    """
)
PAY = ToolCall("call_1", "pay", {"amount": 900, "recipient": "Mallory"})


class Database:
    """What someone who can write the ledger's database does to signoff's records, around signoff: each
    record as its backend stores it (a row, a Redis hash, the memory ledger's dict)."""

    def __init__(self, ledger: Ledger) -> None:
        self.ledger = ledger

    async def put(self, record: Approval | Grant | Registered) -> None:
        encoded = msgspec.json.encode(record).decode()
        ledger = self.ledger
        if isinstance(ledger._backend, MemoryBackend):
            self._memory(ledger._backend, record)
        elif isinstance(ledger, SqliteLedger | PostgresLedger):
            await self._sql(*_upsert(record, encoded))
        else:
            assert isinstance(ledger, RedisLedger)
            async with aioredis.Redis.from_url(REDIS) as client:
                await client.hset(self._key(record), mapping=_redis_fields(record, encoded))
                if isinstance(record, Registered):
                    await client.hset(f"{ledger.prefix}:tokens", record.token_hash, record.id)
                    await client.zadd(f"{ledger.prefix}:principals", {record.id: 1e9})

    async def delete(self, approval: Approval) -> None:
        ledger = self.ledger
        if isinstance(ledger._backend, MemoryBackend):
            del ledger._backend.approval_records[approval.id]
        elif isinstance(ledger, SqliteLedger | PostgresLedger):
            await self._sql("DELETE FROM approvals WHERE id = ?", approval.id)
        else:
            async with aioredis.Redis.from_url(REDIS) as client:
                await client.delete(self._key(approval))

    def _key(self, record: Approval | Grant | Registered) -> str:
        assert isinstance(self.ledger, RedisLedger)
        kind = "a" if isinstance(record, Approval) else "g" if isinstance(record, Grant) else "p"
        return f"{self.ledger.prefix}:{kind}:{record.id}"

    @staticmethod
    def _memory(backend: MemoryBackend, record: Approval | Grant | Registered) -> None:
        if isinstance(record, Approval):
            backend.approval_records[record.id] = record
        elif isinstance(record, Grant):
            backend.grant_records[record.id] = record
        else:
            backend.principal_records[record.id] = record

    async def _sql(self, statement: str, *params: object) -> None:
        ledger = self.ledger
        if isinstance(ledger, SqliteLedger):
            with sqlite3.connect(ledger.path) as db:
                db.execute(statement, params)
            return
        assert isinstance(ledger, PostgresLedger)
        async with await psycopg.AsyncConnection.connect(POSTGRES, autocommit=True) as conn:
            await conn.execute(f"SET search_path = {ledger.schema}")
            await conn.execute(statement.replace("?", "%s"), params)  # type: ignore[arg-type]


def _upsert(record: Approval | Grant | Registered, encoded: str) -> tuple[Any, ...]:
    if isinstance(record, Approval):
        return (
            "UPDATE approvals SET state = ?, record = ? WHERE id = ?",
            str(record.state),
            encoded,
            record.id,
        )
    if isinstance(record, Grant):
        return "UPDATE grants SET active = ?, record = ? WHERE id = ?", record.active, encoded, record.id
    statement = (
        "INSERT INTO principals (id, token_hash, created_at, record) VALUES (?, ?, ?, ?)"
        " ON CONFLICT (id) DO UPDATE SET token_hash = excluded.token_hash, record = excluded.record"
    )
    return statement, record.id, record.token_hash, record.created_at, encoded


def _redis_fields(record: Approval | Grant | Registered, encoded: str) -> dict[str, str]:
    if isinstance(record, Approval):
        return {"record": encoded, "state": str(record.state)}
    return {"record": encoded}


Restart = Callable[[], AsyncIterator[Ledger]]


@pytest.fixture
async def site(backend: str, tmp_path: Path) -> AsyncIterator[dict[str, Any]]:
    """A ledger, and a way to stop it, tamper with its database, and start it again on the same one."""
    opened = make_ledger(backend, tmp_path)
    await opened.start()
    state: dict[str, Any] = {"ledger": opened}

    async def restart(tamper: Callable[[Database], Any]) -> Ledger:
        ledger: Ledger = state["ledger"]
        if backend != "memory":
            await ledger.close()
        await tamper(Database(ledger))
        if backend != "memory":
            ledger = _same(ledger)
            await ledger.start()
            state["ledger"] = ledger
        return ledger

    state["restart"] = restart
    yield state
    await state["ledger"].close()
    await drop(state["ledger"])


def _same(ledger: Ledger) -> Ledger:
    """Another ledger on the same database, as a restarted server opens it."""
    if isinstance(ledger, SqliteLedger):
        return SqliteLedger(ledger.path, keyring=ledger.audit.keyring)
    if isinstance(ledger, PostgresLedger):
        return PostgresLedger(POSTGRES, schema=ledger.schema, keyring=ledger.audit.keyring)
    assert isinstance(ledger, RedisLedger)
    return RedisLedger(REDIS, prefix=ledger.prefix, keyring=ledger.audit.keyring)


async def principals(ledger: Ledger, *names: str) -> list[Principal]:
    found = []
    for name in names:
        _, token = await ledger.principals.register(name, ["finance"], actor="test")
        principal = await ledger.principals.authenticate(token)
        assert principal is not None
        found.append(principal)
    return found


async def problems(ledger: Ledger) -> list[str]:
    evidence = await verify(ledger)
    assert evidence.broken is None, "the chain itself holds: only the records were written"
    return evidence.problems


async def test_a_deny_counted_as_a_vote_runs_nothing(site: dict[str, Any]) -> None:
    ledger: Ledger = site["ledger"]
    bob, fin1 = await principals(ledger, "bob", "fin1")
    gate = Gate(ledger, POLICY)
    asked = await gate.authorize(PAY, chat_id="c1", wait="deferred", requester="carol")
    assert isinstance(asked, Pending)
    await ledger.approvals.decide(asked.approval.id, Decision.approve(bob))
    denied = await ledger.approvals.decide(asked.approval.id, Decision.deny(fin1, "no"))
    assert denied.state is State.DENIED and denied.decision is not None
    approve = denied.votes[0]

    async def count_the_deny(db: Database) -> None:
        forged = msgspec.structs.replace(
            denied,
            state=State.APPROVED,
            decision=approve.decision,
            decided_at=approve.at,
            votes=(approve, Vote(decision=denied.decision, at=denied.decided_at or 0.0)),
        )
        await db.put(forged)

    ledger = await site["restart"](count_the_deny)
    ran: list[Any] = []
    with pytest.raises(Unproven, match="fin1 denied it"):
        await Gate(ledger, POLICY).run(PAY, ran.append, chat_id="c1", wait="deferred")
    assert ran == []
    found = await problems(ledger)
    assert f"approval {denied.id} is approved in the table, and denied in the audit" in found
    assert f"approval {denied.id} is not proven: fin1 denied it" in found


async def test_a_rule_loosened_before_anyone_voted_decides_nothing(site: dict[str, Any]) -> None:
    ledger: Ledger = site["ledger"]
    asked = await Gate(ledger, POLICY).authorize(PAY, chat_id="c1", wait="deferred", requester="carol")
    assert isinstance(asked, Pending)

    async def loosen(db: Database) -> None:
        await db.put(msgspec.structs.replace(asked.approval, authority=Authority(), rule="default"))

    ledger = await site["restart"](loosen)
    carol = Principal(id="carol", via="token")
    assert (await ledger.approvals.get(asked.approval.id)).authority == Authority(), (
        "the table says carol may"
    )
    with pytest.raises(Unproven, match="not the one it was sealed with"):
        await ledger.approvals.decide(asked.approval.id, Decision.approve(carol))
    still = await Gate(ledger, POLICY).authorize(PAY, chat_id="c1", wait="deferred", requester="carol")
    assert isinstance(still, Pending) and still.approval.state is State.PENDING and not still.approval.votes
    refused = [
        e for e in await ledger.audit.entries() if e.action == "refuse" and e.subject == asked.approval.id
    ]
    assert [e.actor for e in refused] == ["carol"]
    assert f"approval {asked.approval.id} is not proven: its authority is not the one it was sealed with" in (
        await problems(ledger)
    )


@pytest.mark.parametrize("tamper", ["promote", "mint", "unrevoke", "swap"])
async def test_a_principal_written_in_its_table_is_refused(site: dict[str, Any], tamper: str) -> None:
    ledger: Ledger = site["ledger"]
    record, token = await ledger.principals.register("fin1", [], actor="test")
    if tamper == "unrevoke":
        record = await ledger.principals.revoke("fin1", "test")
    chosen = "sop_" + "x" * 43
    changed = {
        "promote": msgspec.structs.replace(record, roles=("finance",)),
        "mint": Registered(
            id="mallory", name="mallory", roles=("finance",), token_hash=token_hash(chosen),
            created_at=record.created_at, created_by="cli:root",
        ),
        "unrevoke": msgspec.structs.replace(record, revoked_at=None, revoked_by=""),
        "swap": msgspec.structs.replace(record, token_hash=token_hash(chosen)),
    }[tamper]  # fmt: skip

    async def write(db: Database) -> None:
        await db.put(changed)

    ledger = await site["restart"](write)
    used = chosen if tamper in ("mint", "swap") else token
    assert await ledger.principals.authenticate(used) is None, "its token proves nobody"
    assert await ledger.principals.standing(changed.principal) is None, "and its grants answer for nothing"
    refused = [e for e in await ledger.audit.entries() if e.action == "refuse"]
    assert [e.subject for e in refused] == [f"principal:{changed.id}"]
    found = await problems(ledger)
    assert f"principal {changed.id}'s record carries no valid proof" in found
    if tamper == "mint":
        assert "principal mallory is active in the table, and the audit never recorded it" in found
    if tamper == "unrevoke":
        assert "principal fin1 is active in the table, and revoked in the audit" in found


async def test_a_revoked_grant_made_active_again_is_never_used(site: dict[str, Any]) -> None:
    ledger: Ledger = site["ledger"]
    ask = Policy.from_dict({"tools": {"pay": [{"action": "ask"}]}})
    gate = Gate(ledger, ask)
    asked = await gate.authorize(PAY, chat_id="c1", wait="deferred")
    assert isinstance(asked, Pending)
    await ledger.approvals.decide(asked.approval.id, Decision.approve("alice", remember="session"))
    (grant,) = await ledger.grants.query()
    revoked = await ledger.grants.revoke(grant.id, "alice")

    async def reactivate(db: Database) -> None:
        await db.put(msgspec.structs.replace(revoked, revoked_at=None, revoked_by=""))

    ledger = await site["restart"](reactivate)
    assert [g.id for g in await ledger.grants.query()] == [grant.id], "the table says it is active"
    again = ToolCall("call_2", PAY.tool, PAY.args)
    assert isinstance(await Gate(ledger, ask).authorize(again, chat_id="c1", wait="deferred"), Pending)
    found = await problems(ledger)
    assert f"grant {grant.id} carries no valid proof" in found
    assert f"grant {grant.id} is active in the table, and revoked in the audit" in found


async def test_a_consumed_approval_deleted_from_its_table_fails_verify(site: dict[str, Any]) -> None:
    ledger: Ledger = site["ledger"]
    ask = Policy.from_dict({"tools": {"pay": [{"action": "ask"}]}})
    asked = await Gate(ledger, ask).authorize(PAY, chat_id="c1", wait="deferred")
    assert isinstance(asked, Pending)
    await ledger.approvals.decide(asked.approval.id, Decision.approve("alice"))
    ran: list[Any] = []
    await Gate(ledger, ask).run(PAY, lambda **args: ran.append(args), chat_id="c1", wait="deferred")
    assert len(ran) == 1
    assert await problems(ledger) == []

    async def delete(db: Database) -> None:
        await db.delete(asked.approval)

    ledger = await site["restart"](delete)
    assert await problems(ledger) == [
        f"approval {asked.approval.id} is consumed in the audit, and missing from the table"
    ]
