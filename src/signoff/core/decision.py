"""The decision: what a person (or a rule standing in for one) said about one approval."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

import msgspec

from signoff.core.errors import InvalidDecision

Verdict = Literal["approve", "deny", "edit"]
Remember = Literal["once", "session", "always"]


class Decision(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    """approve, deny, or edit (approve with new arguments).

    `by` is the identity of whoever decided; it is required because an anonymous decision cannot be audited.
    `remember` turns an approval into a grant: `session` for this chat, `always` for every chat.
    `any_args` widens that grant from these exact arguments to any arguments of the tool.
    """

    verdict: Verdict
    by: str
    reason: str = ""
    args: dict[str, Any] | None = None
    remember: Remember = "once"
    any_args: bool = False

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

    @property
    def approved(self) -> bool:
        return self.verdict != "deny"

    @classmethod
    def approve(
        cls, by: str, reason: str = "", remember: Remember = "once", any_args: bool = False
    ) -> Decision:
        return cls(verdict="approve", by=by, reason=reason, remember=remember, any_args=any_args)

    @classmethod
    def deny(cls, by: str, reason: str = "") -> Decision:
        return cls(verdict="deny", by=by, reason=reason)

    @classmethod
    def edit(
        cls, args: Mapping[str, Any], by: str, reason: str = "", remember: Remember = "once"
    ) -> Decision:
        return cls(verdict="edit", by=by, reason=reason, args=dict(args), remember=remember)
