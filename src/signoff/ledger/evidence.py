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

Where no file is named, a server appends its checkpoints to its ledger's own file beside the audit key
(`default_checkpoints`), and `audit verify` reads it: the key's folder is already kept apart from the
database. One file per ledger, named by a digest of which ledger it is (`ledger_identity`), because one
key may serve several ledgers (a machine's, a test run's): a ledger is never judged by another's
checkpoints, and each file stays the plain one-checkpoint-a-line file `--checkpoint` reads.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import SplitResult, parse_qs, urlsplit

import msgspec

from signoff.core.approval import State
from signoff.core.audit import BrokenLink, ChainCheck, Checkpoint
from signoff.core.errors import SignoffError
from signoff.core.proof import grant_holds, principal_holds, seal_holds, unproven
from signoff.ledger.base import Ledger
from signoff.ledger.keyfile import checkpoints_folder
from signoff.ledger.url import ledger_url

PAGE = 5000
_checkpoint = msgspec.json.Decoder(Checkpoint).decode


class BadCheckpoint(SignoffError):
    """A checkpoint file that can't be read, or a checkpoint in it whose signature does not verify."""


@dataclass
class Evidence:
    count: int = 0
    broken: BrokenLink | None = None
    problems: list[str] = field(default_factory=list)
    cut: Checkpoint | None = None
    """The furthest checkpoint given, when the audit no longer reaches it: entries were cut off, or the
    ledger was emptied or replaced."""

    @property
    def ok(self) -> bool:
        return self.broken is None and not self.problems

    def shortfall(self, now: float | None = None) -> str:
        """`the ledger holds 0 entries; the checkpoint of 12:04 saw 73`, for a `cut` audit: the checkpoint's
        time in UTC, with its date when that is not today's (UTC)."""
        assert self.cut is not None
        moment = datetime.fromtimestamp(self.cut.at, UTC)
        today = datetime.fromtimestamp(time.time() if now is None else now, UTC).date()
        shown = moment.strftime("%H:%M" if moment.date() == today else "%Y-%m-%d %H:%M")
        held = f"{self.count} {'entry' if self.count == 1 else 'entries'}"
        return f"the ledger holds {held}; the checkpoint of {shown} saw {self.cut.count}"


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
    furthest = max(marks, key=lambda mark: (mark.count, mark.at), default=None)
    if furthest is not None and furthest.count > check.count:
        evidence.cut = furthest
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


def ready_to_append(path: Path) -> None:
    """Check, before a server starts, that checkpoints can be appended to `path` (making the folder beside
    the audit key, readable by its owner only, for a default file): a server that could not write them
    would leave `audit verify` nothing to hold the audit to, and say so only in its log. Raises
    `BadCheckpoint`."""
    try:
        if path.parent == checkpoints_folder():
            path.parent.mkdir(mode=0o700, exist_ok=True)
        with path.open("ab"):
            pass
    except OSError as exc:
        raise BadCheckpoint(
            f"cannot write audit checkpoints to {path}: {exc.strerror or exc}: name a file with"
            " --audit-checkpoints, or pass --no-audit-checkpoints"
        ) from exc


def default_checkpoints(url: str | None = None) -> Path | None:
    """The file a server appends the ledger `url` names (see `ledger_url`) its checkpoints to when none is
    named, and where `audit verify` looks for them: `checkpoints/<digest of its identity>.jsonl` beside the
    audit key. None for a memory ledger, which dies with its process, and for a URL no ledger takes."""
    identity = ledger_identity(url)
    if identity is None:
        return None
    digest = hashlib.sha256(identity.encode()).hexdigest()[:32]
    return checkpoints_folder() / f"{digest}.jsonl"


def ledger_identity(url: str | None = None) -> str | None:
    """Which ledger `url` reaches, the same however the URL is written: a SQLite file by its resolved path,
    a server with its default port filled in, and only the option that picks the data (a schema, a key
    prefix). Never a user or password: a ledger is the same whoever opens it, and a secret would be
    written into a name. None for memory, or a URL no ledger takes."""
    parts = urlsplit(ledger_url(url))
    option = {key: values[-1] for key, values in parse_qs(parts.query).items()}
    if parts.scheme == "sqlite":
        path = parts.path[1:] if parts.path.startswith("/") else parts.path
        return f"sqlite:{Path(path).resolve()}"
    if parts.scheme in ("postgresql", "postgres"):
        schema = option.get("schema", "signoff")
        return f"postgresql://{_server(parts, 5432)}{parts.path}?schema={schema}"
    if parts.scheme in ("redis", "rediss"):
        prefix = option.get("prefix", "signoff")
        return f"redis://{_server(parts, 6379)}/{parts.path.strip('/') or '0'}?prefix={prefix}"
    return None


def _server(parts: SplitResult, port: int) -> str:
    """`host:port`, the default port filled in, no user or password."""
    try:
        return f"{parts.hostname or ''}:{parts.port or port}"
    except ValueError:  # several hosts (libpq's `h1,h2:5433`): as written
        return parts.netloc.rpartition("@")[2].lower()
