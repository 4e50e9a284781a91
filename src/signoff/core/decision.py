"""The decision: what a person (or a rule standing in for one) said about one approval."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

import msgspec

from signoff.core.errors import InvalidDecision
from signoff.core.principal import Credential, Principal, Proven, Via

Verdict = Literal["approve", "deny", "edit"]
Remember = Literal["once", "session", "always"]


class Decision(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    """approve, deny, or edit (approve with new arguments).

    `by` is the id of the principal who decided, with its display `name`, its `roles` and `via`, how it
    was authenticated: the approval's rule judges the decision by them, and the audit records them. They
    come from a credential (a server, the CLI) or from the code that built the decision (an approver
    callback); the constructors take a `Principal` or a bare id.
    `remember` turns an approval into a grant: `session` for this chat, `always` for every chat.
    `any_args` widens that grant from these exact arguments to any arguments of the tool.
    `credential` says what its maker proved itself with (see `core.principal.Credential`): a decision
    made of a `Proven` principal carries its kind, and, for a bearer credential, what it `spends`; one a
    program builds from a name or a `Principal` is `code`'s.
    `mac` is the ledger's proof of the decision once recorded (see `core.proof`); a caller leaves it empty.
    """

    verdict: Verdict
    by: str
    reason: str = ""
    args: dict[str, Any] | None = None
    remember: Remember = "once"
    any_args: bool = False
    name: str = ""
    roles: tuple[str, ...] = ()
    via: Via = "code"
    credential: Credential = "code"
    spends: str = ""
    mac: str = ""

    def __post_init__(self) -> None:
        if self.verdict not in ("approve", "deny", "edit"):
            raise InvalidDecision(f"unknown verdict {self.verdict!r}")
        if not self.by.strip():
            raise InvalidDecision("a decision needs the identity of whoever decided (by)")
        if self.remember not in ("once", "session", "always"):
            raise InvalidDecision(f"remember must be once, session or always, not {self.remember!r}")
        if (self.verdict == "edit") != (self.args is not None):
            raise InvalidDecision("edit carries new args, and only edit does")
        if self.verdict == "deny" and (self.remember != "once" or self.any_args):
            raise InvalidDecision(
                "only approvals can be remembered; a standing refusal belongs in the policy"
            )
        if (self.credential == "bearer") != bool(self.spends):
            raise InvalidDecision("a bearer credential's decision names what it spends, and only it does")

    @property
    def approved(self) -> bool:
        return self.verdict != "deny"

    @property
    def principal(self) -> Principal:
        return Principal(id=self.by, name=self.name, roles=self.roles, via=self.via)

    @classmethod
    def approve(
        cls,
        by: str | Principal | Proven,
        reason: str = "",
        remember: Remember = "once",
        any_args: bool = False,
    ) -> Decision:
        return cls(verdict="approve", reason=reason, remember=remember, any_args=any_args, **_who(by))

    @classmethod
    def deny(cls, by: str | Principal | Proven, reason: str = "") -> Decision:
        return cls(verdict="deny", reason=reason, **_who(by))

    @classmethod
    def edit(
        cls,
        args: Mapping[str, Any],
        by: str | Principal | Proven,
        reason: str = "",
        remember: Remember = "once",
    ) -> Decision:
        return cls(verdict="edit", reason=reason, args=dict(args), remember=remember, **_who(by))

    @classmethod
    def of(
        cls,
        approved: bool,
        by: str | Principal | Proven,
        reason: str = "",
        *,
        args: Mapping[str, Any] | None = None,
        remember: Remember = "once",
    ) -> Decision:
        """The decision a yes/no answer makes, with new arguments an edit: what an API or a page sends."""
        verdict: Verdict = "deny" if not approved else "approve" if args is None else "edit"
        edited = None if args is None or not approved else dict(args)
        return cls(verdict=verdict, reason=reason, args=edited, remember=remember, **_who(by))


def _who(by: str | Principal | Proven) -> dict[str, Any]:
    if isinstance(by, Proven):
        return {**_who(by.principal), "credential": by.credential, "spends": by.spends}
    if isinstance(by, Principal):
        return {"by": by.id, "name": by.name, "roles": by.roles, "via": by.via}
    return {"by": by}
