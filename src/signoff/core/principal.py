"""Principals: who is asking and who may decide.

A principal is an authenticated someone: an id, a display name, roles, and how the credential that proved
it was checked. Ids are the names rules and audits use: a personal token's principal is its name (`alice`),
the others carry their source (`oidc:<sub>`, `browser:<id>`, `cli:<user>`), so two sources can never
produce the same id. `Authority` is a rule's answer to "who may decide this approval, and how many of
them": pure, so every channel and every backend checks a decision the same way.

A personal token is stored only as its SHA-256: the token has 256 random bits, so a slow hash would add
nothing an attacker could not skip, and a lookup stays one indexed read.
"""

from __future__ import annotations

import hashlib
import re
import secrets
from collections.abc import Callable, Sequence
from typing import Final, Literal

import msgspec

from signoff.core.audit import AuditEvent, AuditKey
from signoff.core.errors import AlreadyRevoked, InvalidPrincipal, PrincipalExists
from signoff.core.proof import prove_principal

Via = Literal["token", "bootstrap", "oidc", "host", "session", "cli", "none", "code", "email", "slack", "mcp"]
"""How a principal was authenticated: a personal token, the bootstrap admin token (`SIGNOFF_API_TOKEN`), an
OIDC/JWT bearer token, the host app's own login, an anonymous browser session, the operator at the CLI, no
credential at all, code that named it (an approver callback), or the MCP gateway's stdio user."""

ADMIN: Final = "admin"
"""The role that may see and decide everything."""
REQUESTER: Final = "requester"
"""In a rule's approvers: the owner of the chat that asked."""
ROLE: Final = "role:"
TOKEN_PREFIX: Final = "sop_"
"""Personal tokens start with it, so a bearer token says which kind it is (and a secret scanner finds it)."""
_NAME: Final = re.compile(r"[a-z0-9][a-z0-9._-]{0,63}")


class Principal(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    id: str
    name: str = ""
    roles: tuple[str, ...] = ()
    via: Via = "code"

    @property
    def display(self) -> str:
        """How a person reads it: the name, or the id when there is none."""
        return self.name or self.id

    @property
    def source(self) -> str:
        """Where its name came from, where the name alone could pass for someone else's: an identity
        provider's or a host app's user chooses its own name (`oidc: intruder-42`); empty for the others,
        whose names signoff or its operator gave."""
        if self.via not in ("oidc", "host"):
            return ""
        prefix, colon, local = self.id.partition(":")
        return f"{prefix}: {local}" if colon and prefix == self.via else f"{self.via}: {self.id}"

    @property
    def label(self) -> str:
        """Its name, with its source where it has one: `alice (oidc: intruder-42)` is never read as the
        registered principal `alice`."""
        return f"{self.display} ({self.source})" if self.source else self.display

    @property
    def described(self) -> str:
        """How a person reads it where it decides: its name, its source and the roles it decides in,
        `alice (finance)`, `alice (oidc: intruder-42; finance)`."""
        roles = ", ".join(role for role in self.roles if role != self.display)
        qualifiers = "; ".join(part for part in (self.source, roles) if part)
        return f"{self.display} ({qualifiers})" if qualifiers else self.display

    @property
    def is_admin(self) -> bool:
        return ADMIN in self.roles


Credential = Literal["code", "identity", "bearer"]
"""What a decision's maker proved itself with. `code`: it is the program (an approver callback, a decision
a program records itself). `identity`: a credential checked for this very request (a session, a personal or
OIDC token, the CLI's operator, a Slack user linked to a principal, an MCP client's token). `bearer`: a
credential whose holder is whoever has it (an email review link, a sealed MCP state), which is why it is
spent by its first use."""


class Proven(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    """A principal whose credential was checked for the request at hand: the only thing a surface may
    decide as (see `core.decision.Decision.of`). It is made where a credential is verified and nowhere
    else (the server's edge, the ledger's principals, the CLI), which `tests/test_one_door.py` holds.

    `spends` names the bearer credential it was proven by, which its decision spends: empty for an
    identity, which decides again only as the core's rule for a second decision lets it
    (`core.approval.again`)."""

    principal: Principal
    spends: str = ""

    @property
    def credential(self) -> Credential:
        return "bearer" if self.spends else "identity"

    def spending(self, credential: str) -> Proven:
        """The same principal deciding with a bearer credential it presented as well (a sealed state bound
        to it): its decision then spends that credential. Only ever narrower than the identity alone."""
        return msgspec.structs.replace(self, spends=credential)


ANONYMOUS: Final = Principal(id="anonymous", name="anonymous", via="none")
"""Whoever sends no credential at all (curl, a script): every such caller is this one principal, so a chat
started without a credential stays open to every credential-less caller, and to nobody else."""


class Authority(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    """Who may decide an approval, copied from its rule when it opens, so a decision is judged by the rule
    that asked whatever process or channel it arrives through.

    `approvers` holds `role:<name>`, `requester` (the chat's owner) and principal ids. None is the
    default: the requester, role admin, and the approvers the program itself runs (its callbacks and
    terminal prompts, `via="code"`), which are part of the deployment, not someone a server authenticated.
    Admins may always decide.
    `quorum` distinct principals must approve; one allowed deny denies. With `requester_may_approve` false
    the requester never counts: four eyes.
    """

    approvers: tuple[str, ...] | None = None
    quorum: int = 1
    requester_may_approve: bool = True
    remember_always: tuple[str, ...] = ()
    """Roles (`role:ops`) whose holders may remember an approval for every chat (`always`), besides admins
    and the program's own approvers: such a grant answers for other principals' chats."""
    escalate_to: tuple[str, ...] = ()
    """Who joins the approvers once the approval escalates (see `core.followup`)."""

    def allows(self, principal: Principal, requester: str, *, escalated: bool = False) -> bool:
        is_requester = bool(requester) and principal.id == requester
        if is_requester and not self.requester_may_approve:
            return False
        if principal.is_admin:
            return True
        if escalated and any(_names(entry, principal, is_requester) for entry in self.escalate_to):
            return True
        if self.approvers is None:
            return is_requester or principal.via == "code"
        return any(_names(entry, principal, is_requester) for entry in self.approvers)

    def may_remember_always(self, principal: Principal) -> bool:
        if principal.is_admin or principal.via == "code":
            return True
        return any(entry[len(ROLE) :] in principal.roles for entry in self.remember_always)

    def awaited(self, *, escalated: bool = False) -> str:
        """Who is awaited, in words: `finance or alice`, `the requester or an admin`."""
        entries = (*(self.approvers or (REQUESTER, ROLE + ADMIN)), *(self.escalate_to if escalated else ()))
        named = [_word(entry) for entry in entries]
        if not self.requester_may_approve:
            named = [word for word in named if word != "the requester"] or ["an admin"]
        return " or ".join(dict.fromkeys(named))


def distinct(principals: Sequence[Principal], word: Callable[[Principal], str]) -> list[str]:
    """Each principal in words, told apart: where two read alike (two registered principals given one
    display name), each also shows its id, `Alice [alice2]`."""
    words = [word(p) for p in principals]
    return [f"{w} [{p.id}]" if words.count(w) > 1 else w for w, p in zip(words, principals, strict=True)]


def _names(entry: str, principal: Principal, is_requester: bool) -> bool:
    if entry == REQUESTER:
        return is_requester
    if entry.startswith(ROLE):
        return entry[len(ROLE) :] in principal.roles
    return entry == principal.id


def _word(entry: str) -> str:
    if entry == REQUESTER:
        return "the requester"
    if entry == ROLE + ADMIN:
        return "an admin"
    return entry[len(ROLE) :] if entry.startswith(ROLE) else entry


def check_approvers(entries: Sequence[object]) -> tuple[str, ...]:
    """A rule's approvers, each `role:<name>`, `requester` or a principal id; raises `InvalidPrincipal`."""
    checked = []
    for entry in entries:
        if not isinstance(entry, str) or not entry or not entry.isprintable() or entry != entry.strip():
            raise InvalidPrincipal(
                f"an approver must be role:<name>, requester or a principal id, not {entry!r}"
            )
        if entry.startswith(ROLE) and not entry[len(ROLE) :]:
            raise InvalidPrincipal(f"{entry!r} names no role")
        checked.append(entry)
    if not checked:
        raise InvalidPrincipal("approvers must name at least one approver")
    return tuple(checked)


def check_role_entries(entries: Sequence[object]) -> tuple[str, ...]:
    """A rule's `remember_always`: roles only, each `role:<name>`; raises `InvalidPrincipal`."""
    checked = []
    for entry in entries:
        role = entry[len(ROLE) :] if isinstance(entry, str) and entry.startswith(ROLE) else ""
        if not _NAME.fullmatch(role):
            raise InvalidPrincipal(f"each entry must be a role, role:<name>, not {entry!r}")
        checked.append(ROLE + role)
    return tuple(checked)


# -- principals registered with a personal token ------------------------------------------------------------

Identity = Literal["email", "slack"]
"""A kind of channel identity a registered principal may have linked."""
_EMAIL = re.compile(r"[^@\s\x00-\x1f\x7f<>,;]+@[^@\s\x00-\x1f\x7f<>,;]+\.[^@\s\x00-\x1f\x7f<>,;.]+")
_SLACK = re.compile(r"[UW][A-Z0-9]{2,31}")


class Registered(msgspec.Struct, frozen=True, kw_only=True, gc=False, omit_defaults=True):
    """A principal registered in the ledger with a personal token, of which only the hash is kept.

    `mac` proves every other field (see `core.proof`); fields left at their default are left out of the
    record and of what the MAC covers, so a field added later leaves older records verifying."""

    id: str
    name: str
    roles: tuple[str, ...]
    token_hash: str
    created_at: float
    created_by: str
    revoked_at: float | None = None
    revoked_by: str = ""
    email: str = ""
    """The address the principal's approval emails go to, and whose answers are its decisions."""
    slack: str = ""
    """The Slack user id whose clicks are the principal's decisions."""
    mac: str = ""

    @property
    def active(self) -> bool:
        return self.revoked_at is None

    def identity(self, kind: Identity) -> str:
        """The principal's identity of that kind, as `matched` compares it."""
        return matched(kind, self.email if kind == "email" else self.slack)

    @property
    def principal(self) -> Principal:
        return Principal(id=self.id, name=self.name, roles=self.roles, via="token")


def register(
    name: str,
    roles: Sequence[str],
    *,
    display: str,
    actor: str,
    now: float,
    existing: Registered | None,
    key: AuditKey,
) -> tuple[Registered, str, AuditEvent]:
    """A new principal, proven with `key`, its personal token (shown once, never stored), and the audit
    event."""
    if existing is not None:
        revoked = " (revoked: names are never reused)" if not existing.active else ""
        raise PrincipalExists(f"a principal named {existing.id} exists already{revoked}")
    token = new_personal_token()
    record = Registered(
        id=check_name(name),
        name=display or name,
        roles=check_roles(roles),
        token_hash=token_hash(token),
        created_at=now,
        created_by=actor,
    )
    detail = {"name": record.name, "roles": list(record.roles)}
    event = AuditEvent(at=now, actor=actor, action="register", subject=_subject(record), after="active",
                       detail=detail)  # fmt: skip
    return prove_principal(key, record), token, event


def revoke(record: Registered, *, actor: str, now: float, key: AuditKey) -> tuple[Registered, AuditEvent]:
    """Revoke the principal's token: every worker refuses it from the next request on."""
    if not record.active:
        raise AlreadyRevoked(f"principal {record.id} was already revoked by {record.revoked_by}")
    after = msgspec.structs.replace(record, revoked_at=now, revoked_by=actor)
    event = AuditEvent(at=now, actor=actor, action="revoke", subject=_subject(record), before="active",
                       after="revoked")  # fmt: skip
    return prove_principal(key, after), event


def assign_roles(
    record: Registered, roles: Sequence[str], *, actor: str, now: float, key: AuditKey
) -> tuple[Registered, AuditEvent]:
    after = msgspec.structs.replace(record, roles=check_roles(roles))
    detail = {"before": list(record.roles), "after": list(after.roles)}
    event = AuditEvent(at=now, actor=actor, action="roles", subject=_subject(record), detail=detail)
    return prove_principal(key, after), event


def link(
    record: Registered, *, email: str | None, slack: str | None, actor: str, now: float, key: AuditKey
) -> tuple[Registered, AuditEvent]:
    """Link the principal's channel identities (None leaves one as it is, "" takes it away): an answer
    from the address or the Slack user is then this principal's decision, judged by its roles."""
    changes: dict[str, str] = {}
    if email is not None:
        changes["email"] = check_email(email) if email else ""
    if slack is not None:
        changes["slack"] = check_slack(slack) if slack else ""
    after = msgspec.structs.replace(record, **changes)
    detail = {kind: value or None for kind, value in changes.items()}
    event = AuditEvent(at=now, actor=actor, action="link", subject=_subject(record), detail=detail)
    return prove_principal(key, after), event


def matched(kind: Identity, value: str) -> str:
    """An identity as two are compared: an address in any case (mail systems treat it so), a Slack user
    id exactly."""
    return value.casefold() if kind == "email" else value


def check_email(address: str) -> str:
    """An address to send to: one `@`, a dotted domain, nothing that could split a header."""
    if len(address) > 254 or not _EMAIL.fullmatch(address):
        raise InvalidPrincipal(f"not an email address: {address!r}")
    return address


def check_slack(user_id: str) -> str:
    """A Slack user id, as Slack gives them: `U…` or `W…`, upper-case letters and digits."""
    if not _SLACK.fullmatch(user_id):
        raise InvalidPrincipal(f"not a Slack user id (U… or W…): {user_id!r}")
    return user_id


def _subject(record: Registered) -> str:
    return f"principal:{record.id}"


def new_personal_token() -> str:
    """A personal token: the prefix and 256 random bits."""
    return TOKEN_PREFIX + secrets.token_urlsafe(32)


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def check_name(name: str) -> str:
    """A registered principal's id: lower-case letters, digits, `.`, `_` and `-`, at most 64; `admin` is the
    bootstrap token's, and ids with a `:` belong to other sources."""
    if not _NAME.fullmatch(name):
        raise InvalidPrincipal(
            f"a principal's name is 1-64 lower-case letters, digits, '.', '_' or '-', not {name!r}"
        )
    if name in (ADMIN, ANONYMOUS.id, REQUESTER):
        raise InvalidPrincipal(f"{name!r} is reserved")
    return name


def check_roles(roles: Sequence[str]) -> tuple[str, ...]:
    for role in roles:
        if not _NAME.fullmatch(role):
            raise InvalidPrincipal(
                f"a role is 1-64 lower-case letters, digits, '.', '_' or '-', not {role!r}"
            )
    return tuple(dict.fromkeys(roles))
