"""A policy's rule: which calls it covers (`when`), what it does with them (`action`), and, for `ask`, who
may decide, until when, and whom to tell. Built in Python with `rule()`, or loaded from a policy file by
`Policy`; either way each setting is checked by the same code (`rule_settings`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Final, Literal

import msgspec

from signoff.core import rule_settings, scope
from signoff.core.errors import PolicyError
from signoff.core.expr import Condition, ExprError
from signoff.core.followup import Followups
from signoff.core.principal import REQUESTER, Authority
from signoff.core.rule_settings import Predicate

RuleAction = Literal["allow", "ask", "deny"]
OnTimeout = Literal["deny", "allow"]
OnAbandon = Literal["keep", "cancel"]

ACTIONS: Final[tuple[RuleAction, ...]] = ("allow", "ask", "deny")
ON_TIMEOUT: Final[tuple[OnTimeout, ...]] = ("deny", "allow")
ON_ABANDON: Final[tuple[OnAbandon, ...]] = ("keep", "cancel")
RULE_KEYS: Final = (
    "action",
    "when",
    "commands",
    "paths",
    "deadline",
    "on_timeout",
    "on_abandon",
    "description",
    "approvers",
    "quorum",
    "requester_may_approve",
    "remember_always",
    "notify",
    "remind_after",
    "remind_max",
    "escalate_after",
    "escalate_to",
    "warn_before_deadline",
)


def checks(*, loaded: bool, allow_callable: bool) -> dict[str, Callable[[Any], Any]]:
    """The check of each rule setting, by key: as a loader reads it (a condition as text, a duration as
    `'30s'`), or as a built `Rule` holds it (compiled, in seconds)."""
    return {
        "action": lambda v: rule_settings.one_of(v, ACTIONS),
        "when": lambda v: rule_settings.condition(v, allow_text=loaded, allow_callable=allow_callable),
        "commands": scope.commands,
        "paths": scope.directories,
        "deadline": rule_settings.deadline if loaded else rule_settings.seconds,
        "on_timeout": lambda v: rule_settings.one_of(v, ON_TIMEOUT),
        "on_abandon": lambda v: rule_settings.one_of(v, ON_ABANDON),
        "description": rule_settings.text,
        "approvers": rule_settings.approver_list,
        "quorum": rule_settings.quorum,
        "requester_may_approve": rule_settings.flag,
        "remember_always": rule_settings.role_list,
        "notify": rule_settings.channel_list,
        "remind_after": rule_settings.deadline,
        "remind_max": rule_settings.count,
        "escalate_after": rule_settings.deadline,
        "escalate_to": rule_settings.escalation_list,
        "warn_before_deadline": rule_settings.deadline,
    }


class Rule(msgspec.Struct, frozen=True, kw_only=True):
    """One rule: `action` for calls whose arguments satisfy `when` (or for every call when `when` is None).

    `deadline` (seconds) and `on_timeout` only matter for `ask`: an unanswered approval becomes `on_timeout`
    when the deadline passes, and deny is the default so that silence never runs a tool. `on_abandon` says
    what happens to a pending approval whose blocking waiter went away: kept (someone can still decide and
    resume) or cancelled. `approvers`, `quorum` and `requester_may_approve` say who may decide an `ask`
    (see `Authority`), and `remember_always` which roles may remember an approval for every chat. Build
    rules with `rule()`, which compiles condition strings and parses durations. `commands` and `paths`
    narrow what the rule covers, beside `when` (see `core.scope`).
    """

    action: RuleAction
    when: Condition | Predicate | None = None
    commands: tuple[str, ...] | None = None
    """Globs over the simple commands of a shell tool's call; the rule covers only the commands matching."""
    paths: tuple[str, ...] | None = None
    """Directories: it covers a file under one of them (a shell's writes, another tool's `file_path`)."""
    deadline: float | None = None
    on_timeout: OnTimeout = "deny"
    on_abandon: OnAbandon = "keep"
    description: str | None = None
    approvers: tuple[str, ...] | None = None
    quorum: int = 1
    requester_may_approve: bool = True
    remember_always: tuple[str, ...] = ()
    notify: tuple[str, ...] = ()
    """The channels told of each of its approvals' events (`webhook:ops`), in the outbox's same write."""
    remind_after: float | None = None
    remind_max: int = 3
    escalate_after: float | None = None
    escalate_to: tuple[str, ...] = ()
    warn_before_deadline: float | None = None
    """Follow-ups of an approval nobody decides (see `core.followup`), durations in seconds."""

    def __post_init__(self) -> None:
        # Rules are built in Python as well as loaded from TOML; the same checks keep both paths honest.
        for name, check in checks(loaded=False, allow_callable=True).items():
            try:
                msgspec.structs.force_setattr(self, name, check(getattr(self, name)))
            except rule_settings.Invalid as exc:
                raise PolicyError(f"{name}: {exc}") from None
        if not self.requester_may_approve and self.approvers is not None and REQUESTER in self.approvers:
            raise PolicyError("approvers: names the requester, whom requester_may_approve = false excludes")
        if self.commands is not None and self.paths is not None:
            raise PolicyError("commands and paths: a rule covers commands or the paths written, not both")
        if (self.escalate_after is None) != (not self.escalate_to):
            raise PolicyError("escalate_after and escalate_to go together")

    @property
    def authority(self) -> Authority:
        return Authority(
            approvers=self.approvers,
            quorum=self.quorum,
            requester_may_approve=self.requester_may_approve,
            remember_always=self.remember_always,
            escalate_to=self.escalate_to,
        )

    @property
    def followups(self) -> Followups | None:
        if self.remind_after is None and self.warn_before_deadline is None:
            return None
        return Followups(
            remind_after=self.remind_after, remind_max=self.remind_max, warn_before=self.warn_before_deadline
        )

    @property
    def condition_text(self) -> str | None:
        """The condition and scope as a person reads them: the source, or the name of the Python callable."""
        covered = scope.describe(self.commands, self.paths)
        if self.when is None:
            return covered
        if isinstance(self.when, Condition):
            when = self.when.source
        else:
            when = getattr(self.when, "__qualname__", None) or repr(self.when)
        return when if covered is None else f"{when}; {covered}"


def rule(
    action: RuleAction,
    when: str | Condition | Predicate | None = None,
    *,
    commands: Sequence[str] | None = None,
    paths: Sequence[str] | None = None,
    deadline: float | str | None = None,
    on_timeout: OnTimeout = "deny",
    on_abandon: OnAbandon = "keep",
    description: str | None = None,
    approvers: Sequence[str] | None = None,
    quorum: int = 1,
    requester_may_approve: bool = True,
    remember_always: Sequence[str] = (),
    notify: Sequence[str] = (),
    **followups: Any,
) -> Rule:
    """Build a `Rule`, compiling a condition string and parsing a duration such as `"30s"`. `followups`
    are the follow-up keys (`remind_after="10m"`, `escalate_to=["role:cfo"]`, … see `Rule`).

    Faults raise `PolicyError` (an `ExprError` for a bad condition) naming the argument, as a loader would.
    """
    try:
        compiled = rule_settings.condition(when, allow_text=True, allow_callable=True)
    except ExprError as exc:
        raise ExprError(f"when: {exc.detail}", exc.column, exc.line) from None
    except rule_settings.Invalid as exc:
        raise PolicyError(f"when: {exc}") from None
    try:
        seconds = rule_settings.deadline(deadline)
    except rule_settings.Invalid as exc:
        raise PolicyError(f"deadline: {exc}") from None
    return Rule(
        action=action,
        when=compiled,
        commands=None if commands is None else tuple(commands),
        paths=None if paths is None else tuple(paths),
        deadline=seconds,
        on_timeout=on_timeout,
        on_abandon=on_abandon,
        description=description,
        approvers=None if approvers is None else tuple(approvers),
        quorum=quorum,
        requester_may_approve=requester_may_approve,
        remember_always=tuple(remember_always),
        notify=tuple(notify),
        **followups,
    )
