"""What `signoff audit verify` proves about a ledger, and the checkpoints that let it prove the chain's end.

`verify` reads the whole audit once, a page at a time, and checks:
- the chain: each entry's keyed hash and its link to the one before (`core.audit.ChainCheck`), and every
  checkpoint given (a chain cut short or rewritten up to a checkpoint fails);
- the records against the chain: every approval's, task's, grant's and principal's stored state is the one
  its audit entries lead to, so a state flipped in a table shows; a principal's roles and linked identities
  too, so a row restored whole to an earlier, once-proven version of itself shows as well;
- the proofs: every approved or consumed approval's decisions, and every grant, carry a MAC that verifies.

What it can't prove: anything against someone who holds both the key and write access to the database
(they can write a consistent history), or the chain's end without a checkpoint kept elsewhere.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import msgspec

from signoff.core.approval import State
from signoff.core.audit import BrokenLink, ChainCheck, Checkpoint
from signoff.core.errors import SignoffError
from signoff.core.proof import grant_holds, principal_holds, seal_holds, unproven
from signoff.ledger.base import Ledger

PAGE = 5000
_checkpoint = msgspec.json.Decoder(Checkpoint).decode


class BadCheckpoint(SignoffError):
    """A checkpoint file that can't be read, or a checkpoint in it whose signature does not verify."""


@dataclass
class Evidence:
    count: int = 0
    broken: BrokenLink | None = None
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.broken is None and not self.problems


async def verify(ledger: Ledger, checkpoints: Iterable[Checkpoint] = ()) -> Evidence:
    marks = list(checkpoints)
    for mark in marks:
        if not mark.authentic(ledger.audit.keyring):
            raise BadCheckpoint(f"the checkpoint of {mark.count} entries is not signed by this keyring")
    check, after, states = ChainCheck(ledger.audit.keyring, marks), 0, dict[str, str]()
    standing: dict[str, dict[str, object]] = {}
    evidence = Evidence()
    while page := await ledger.audit.entries(after, PAGE):
        if broken := check.feed(page):
            evidence.count, evidence.broken = check.count, broken
            return evidence
        for entry in page:
            if entry.after is not None:
                states[entry.subject] = entry.after
            if entry.subject.startswith("principal:"):
                _stood(standing.setdefault(entry.subject, {}), entry.action, entry.detail)
        after = page[-1].seq
    evidence.count, evidence.broken = check.count, check.end()
    evidence.problems = await _records(ledger, states, standing)
    return evidence


def _stood(held: dict[str, object], action: str, detail: dict[str, object]) -> None:
    """What a principal's roles and identities are after `action`, as its audit entries tell them."""
    if action == "register":
        held.update(roles=list(detail.get("roles") or []), email="", slack="")  # type: ignore[call-overload]
    elif action == "roles":
        held["roles"] = list(detail.get("after") or [])  # type: ignore[call-overload]
    elif action == "link":
        held.update({kind: value or "" for kind, value in detail.items() if kind in ("email", "slack")})


async def _records(
    ledger: Ledger, states: dict[str, str], standing: dict[str, dict[str, object]]
) -> list[str]:
    """Each record whose stored state is not the one its audit entries lead to, whose proof fails, or that
    the audit knows and the tables lost."""
    problems, seen = [], set()

    def compare(kind: str, subject: str, stored: str) -> None:
        seen.add(subject)
        audited, name = states.get(subject), subject.removeprefix(f"{kind}:")
        if audited is None:
            problems.append(f"{kind} {name} is {stored} in the table, and the audit never recorded it")
        elif audited != stored:
            problems.append(f"{kind} {name} is {stored} in the table, and {audited} in the audit")

    keyring = ledger.audit.keyring
    for approval in await ledger.approvals.query():
        compare("approval", approval.id, str(approval.state))
        if approval.state in (State.APPROVED, State.CONSUMED):
            if why := unproven(keyring, approval):
                problems.append(f"approval {approval.id} is not proven: {why}")
        elif not seal_holds(keyring, approval):
            problems.append(
                f"approval {approval.id} is not proven: its authority is not the one it was sealed with"
            )
    for task in await ledger.tasks.query():
        compare("task", task.id, str(task.state))
    for grant in await ledger.grants.query(active=False):
        compare("grant", grant.id, "active" if grant.active else "revoked")
        if not grant_holds(keyring, grant):
            problems.append(f"grant {grant.id} carries no valid proof")
    for principal in await ledger.principals.all():
        subject = f"principal:{principal.id}"
        compare("principal", subject, "active" if principal.active else "revoked")
        if not principal_holds(keyring, principal):
            problems.append(f"principal {principal.id}'s record carries no valid proof")
        stored = {"roles": list(principal.roles), "email": principal.email, "slack": principal.slack}
        told = standing.get(subject, {})
        for held, value in stored.items():
            if held in told and told[held] != value:
                problems.append(
                    f"principal {principal.id}'s {held} is {value!r} in the table, and {told[held]!r}"
                    " in the audit"
                )
    for subject, audited in states.items():
        kind = next((kind for prefix, kind in _KINDS if subject.startswith(prefix)), None)
        if kind is not None and subject not in seen:
            problems.append(f"{kind} {subject} is {audited} in the audit, and missing from the table")
    return problems


_KINDS = (("apr_", "approval"), ("task_", "task"), ("grt_", "grant"), ("principal:", "principal"))
"""Which record an audit subject names, by the prefix its id is made with."""


def read_checkpoints(path: Path) -> list[Checkpoint]:
    """Every checkpoint in a file of one per line (as `signoff audit checkpoint` prints them, or as a
    server appends them)."""
    try:
        lines = path.read_text().splitlines()
        return [_checkpoint(line) for line in lines if line.strip()]
    except (OSError, msgspec.DecodeError) as exc:
        raise BadCheckpoint(f"cannot read checkpoints from {path}: {exc}") from exc


def append_checkpoint(path: Path, checkpoint: Checkpoint) -> None:
    """Append one line, in one write: several workers can append to one file."""
    with path.open("ab") as out:
        out.write(msgspec.json.encode(checkpoint) + b"\n")
