"""The policy: ordered rules per tool that say whether a call runs, is refused, or waits for a person.

Secure by default: a tool the policy does not list, a listed tool that no rule matches, and a rule whose
condition cannot be decided all come out as `ask`. A policy never turns an error into `allow`.

Everything here is pure: `from_toml` takes text, not a path, so the core stays sans-I/O and a loader can
name the source (`policy.toml`) in every error it reports.
"""

from __future__ import annotations

import fnmatch
import tomllib
from collections.abc import Callable, Mapping, Sequence
from types import MappingProxyType
from typing import Any, Final, Literal, cast

import msgspec

from signoff.core import rule_settings, scope
from signoff.core.call import ToolCall
from signoff.core.errors import PolicyError
from signoff.core.expr import Condition, EvalError, ExprError
from signoff.core.followup import Followups
from signoff.core.paths import CONTEXT, Place, Resolve
from signoff.core.principal import Authority
from signoff.core.rule import RULE_KEYS, OnAbandon, OnTimeout, Rule, RuleAction, checks, rule
from signoff.core.rule_settings import parse_duration
from signoff.core.shell import Part, read
from signoff.core.wording import describe_call, render_description

__all__ = [
    "RuleAction",
    "Mode",
    "OnAbandon",
    "OnTimeout",
    "Policy",
    "Rule",
    "Ruling",
    "describe_call",
    "parse_duration",
    "render_description",
    "rule",
]

Mode = Literal["interactive", "approve_all", "strict"]
MODES: Final[tuple[Mode, ...]] = ("interactive", "approve_all", "strict")
SHELL: Final = ("Bash",)
"""The tools whose `command` argument is a shell command, judged part by part, unless a policy says others."""


class Ruling(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    """What the policy decided for one call, and why, in words a person and an audit log can use.

    `rule` is a stable label (`process_payment[0]`, `default`, `mode:strict`) so that approvals and audit
    entries can say which rule asked; `reason` is the sentence that explains it.
    """

    action: RuleAction
    rule: str
    reason: str
    description: str
    deadline: float | None = None
    on_timeout: OnTimeout = "deny"
    on_abandon: OnAbandon = "keep"
    authority: Authority = msgspec.field(default_factory=Authority)
    notify: tuple[str, ...] = ()
    escalate_after: float | None = None
    followups: Followups | None = None


class Policy:
    """Ordered rules per tool, and a mode. Immutable once built; `evaluate` is pure and cheap.

    The mode applies after a rule is chosen and only to `ask`: `approve_all` turns it into allow (but a
    call whose condition failed into deny, see `evaluate`), `strict` into deny. Explicit allow and deny
    rules never change with the mode: they are the policy's own answer, not a request for a person.

    `shell` names the tools whose calls are shell commands, judged by their worst part (`core.scope`);
    `resolve` (`os.path.realpath`) and `home` are how rules over `paths` see the filesystem (`core.paths`).
    """

    __slots__ = ("_home", "_mode", "_patterns", "_resolve", "_rules", "_shell")

    def __init__(
        self,
        rules: Mapping[str, Sequence[Rule]] | None = None,
        mode: Mode = "interactive",
        *,
        shell: Sequence[str] = SHELL,
        resolve: Resolve | None = None,
        home: str | None = None,
    ) -> None:
        try:
            self._mode: Mode = cast(Mode, rule_settings.one_of(mode, MODES))
        except rule_settings.Invalid as exc:
            raise PolicyError(f"mode: {exc}") from None
        if isinstance(shell, str) or not all(isinstance(tool, str) and tool for tool in shell):
            raise PolicyError(f'shell: must be a list of tool names such as ["Bash"], not {shell!r}')
        if home is not None and (not isinstance(home, str) or not home.startswith("/")):
            raise PolicyError(f"home: must be an absolute path, not {home!r}")
        self._shell = frozenset(shell)
        self._resolve = resolve
        self._home = home
        table: dict[str, tuple[Rule, ...]] = {}
        for tool, tool_rules in (rules or {}).items():
            if not isinstance(tool, str) or not tool:
                raise PolicyError(f"tool names must be non-empty strings, not {tool!r}")
            if isinstance(tool_rules, str | bytes) or not isinstance(tool_rules, Sequence):
                kind = type(tool_rules).__name__
                raise PolicyError(f"{tool}: rules must be a sequence of Rule, not {kind}")
            for index, item in enumerate(tool_rules):
                if not isinstance(item, Rule):
                    raise PolicyError(f"{tool}[{index}]: must be a Rule, not {type(item).__name__}")
                if item.commands is not None and tool not in self._shell:
                    raise PolicyError(f"{tool}[{index}].commands: {tool} is not a shell tool (see shell)")
            table[tool] = tuple(tool_rules)
        self._rules: Mapping[str, tuple[Rule, ...]] = MappingProxyType(table)
        self._patterns = frozenset(tool for tool in table if any(char in tool for char in "*?["))

    @property
    def mode(self) -> Mode:
        return self._mode

    @property
    def shell(self) -> frozenset[str]:
        return self._shell

    @property
    def rules(self) -> Mapping[str, tuple[Rule, ...]]:
        """The rules per tool, read-only."""
        return self._rules

    def __repr__(self) -> str:
        return f"Policy(tools={list(self._rules)!r}, mode={self._mode!r})"

    def titles(self) -> dict[str, str]:
        """Each tool's description template (`Play {track}`), from its first rule that has one: how a page
        puts any call of it in words, asked or not."""
        return {
            tool: next(r.description for r in rules if r.description)
            for tool, rules in self._rules.items()
            if any(r.description for r in rules)
        }

    def rules_of(self, tool: str) -> tuple[Rule, ...] | None:
        """The rules of `tool`: its own, or else those of the first tool glob that matches its name
        (`mcp__payments__*`), in the policy's order; None when the policy does not list it."""
        rules = self._rules.get(tool)
        if rules is not None:
            return rules
        for name, found in self._rules.items():
            if name in self._patterns and fnmatch.fnmatchcase(tool, name):
                return found
        return None

    def may_ask(self, tool: str) -> bool:
        """Whether some call of `tool` may wait for a person: a tool with no rules asks, and so may any
        rule that asks or has a condition (one that can't be decided asks). Only the interactive mode asks."""
        if self._mode != "interactive":
            return False
        rules = self.rules_of(tool)
        if rules is None or tool in self._shell:  # a shell command that does not parse asks
            return True
        return any(r.action == "ask" or r.when is not None or r.paths is not None for r in rules)

    def evaluate(self, call: ToolCall) -> Ruling:
        """The ruling for one call: the first rule whose condition holds, then the mode.

        A condition that cannot be decided (a missing argument, a string where a number belongs, an exception
        from a Python predicate) asks a person rather than skipping to the next rule: a later rule may be
        `allow`, and a broken condition must never become a silent allow. The modes ask nobody, so under
        `approve_all` as under `strict` such a call is denied.
        """
        ruling, failed = self._select(call)
        if ruling.action != "ask" or self._mode == "interactive":
            return ruling
        if self._mode == "strict":
            return msgspec.structs.replace(
                ruling,
                action="deny",
                rule="mode:strict",
                reason=f"strict mode: {call.tool} requires approval ({ruling.reason})",
            )
        if failed:
            return msgspec.structs.replace(
                ruling,
                action="deny",
                rule="mode:approve_all",
                reason=f"approve_all mode asks nobody, and {ruling.reason}",
            )
        return msgspec.structs.replace(
            ruling,
            action="allow",
            rule="mode:approve_all",
            reason=f"approve_all mode: {call.tool} runs without approval ({ruling.reason})",
        )

    def _select(self, call: ToolCall) -> tuple[Ruling, bool]:
        rules = self.rules_of(call.tool)
        if rules is None:
            return self._default(call, f"{call.tool} is not in the policy"), False
        place = Place(call.context, self._home, self._resolve)
        if call.tool not in self._shell:
            return self._first(call, rules, None, place)
        command = call.args.get("command")
        if not isinstance(command, str):
            return self._default(call, f"{call.tool} is a shell, and its command is not a string"), True
        script = read(command)
        worst: tuple[Ruling, bool] | None = None
        for part in script.parts:
            ruling, failed = self._first(call, rules, part, place)
            if part.opaque is not None and ruling.action != "deny":
                ruling, failed = self._default(call, f"{_subject(part)} {part.opaque}"), True
            if worst is None or scope.RANK[ruling.action] > scope.RANK[worst[0].action]:
                worst = (ruling, failed)
        assert worst is not None  # `read` gives at least one part
        if script.unparsed is not None and worst[0].action != "deny":
            return self._default(call, f"the command does not parse: {script.unparsed}"), True
        return worst

    def _first(
        self, call: ToolCall, rules: Sequence[Rule], part: Part | None, place: Place
    ) -> tuple[Ruling, bool]:
        """The first rule that covers `part` of a shell call (or, None, the whole call), and whether a
        condition failed on the way (it asks then, and the rules after it are never reached)."""
        subject = "" if part is None else f" for {_subject(part)}"
        for index, candidate in enumerate(rules):
            label = f"{call.tool}[{index}]"
            try:
                if candidate.when is not None:
                    holds = candidate.when(_seen(candidate.when, call))
                    if not isinstance(holds, bool):
                        raise EvalError(f"returned {type(holds).__name__}, not a bool")
                    if not holds:
                        continue
                if not scope.covers(candidate.commands, candidate.paths, part, call.args, place):
                    continue
            except EvalError as exc:
                return self._failed(call, candidate, label, f"{exc}{subject}"), True
            except Exception as exc:  # a Python predicate may raise anything; it must not allow or skip
                return self._failed(call, candidate, label, f"{type(exc).__name__}: {exc}{subject}"), True
            reason = f"rule {label}"
            if candidate.condition_text is not None:
                reason += f" ({candidate.condition_text})"
            return self._ruling(call, candidate, candidate.action, label, reason + subject), False
        return self._default(call, f"no rule of {call.tool} matched{subject}"), False

    @staticmethod
    def _ruling(call: ToolCall, chosen: Rule, action: RuleAction, label: str, reason: str) -> Ruling:
        template = chosen.description
        return Ruling(
            action=action,
            rule=label,
            reason=reason,
            description=render_description(template, call.args) if template else describe_call(call),
            deadline=chosen.deadline,
            on_timeout=chosen.on_timeout,
            on_abandon=chosen.on_abandon,
            authority=chosen.authority,
            notify=chosen.notify,
            escalate_after=chosen.escalate_after,
            followups=chosen.followups,
        )

    def _failed(self, call: ToolCall, chosen: Rule, label: str, why: str) -> Ruling:
        return self._ruling(call, chosen, "ask", label, f"condition of {label} failed: {why}")

    @staticmethod
    def _default(call: ToolCall, reason: str) -> Ruling:
        return Ruling(action="ask", rule="default", reason=reason, description=describe_call(call))

    # --- loading ----------------------------------------------------------------------------------------

    @classmethod
    def from_toml(
        cls, text: str, source: str = "<string>", *, resolve: Resolve | None = None, home: str | None = None
    ) -> Policy:
        """Load a policy from TOML text; `source` (usually the file name) starts every error message.
        `resolve` and `home` are the filesystem's, for rules over `paths` (see `Policy`)."""
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise PolicyError(f"{source}: invalid TOML: {exc}") from None
        return cls._load(data, source, False, resolve, home)

    @classmethod
    def from_dict(
        cls,
        data: Mapping[str, Any],
        source: str = "<dict>",
        *,
        resolve: Resolve | None = None,
        home: str | None = None,
    ) -> Policy:
        """Load a policy from the shape TOML parses to; here a `when` may also be a Python callable."""
        return cls._load(data, source, True, resolve, home)

    @classmethod
    def _load(
        cls, data: Any, source: str, allow_callable: bool, resolve: Resolve | None, home: str | None
    ) -> Policy:
        def fail(path: str, message: str) -> PolicyError:
            return PolicyError(f"{source}: {path}: {message}" if path else f"{source}: {message}")

        if not isinstance(data, Mapping):
            raise fail("", f"a policy must be a table, not {type(data).__name__}")
        for key in data:
            if key not in ("mode", "shell", "tools"):
                raise fail(str(key), "unknown key (expected mode, shell, tools)")
        try:
            mode = cast(Mode, rule_settings.one_of(data.get("mode", "interactive"), MODES))
        except rule_settings.Invalid as exc:
            raise fail("mode", str(exc)) from None
        tools = data.get("tools", {})
        if not isinstance(tools, Mapping):
            raise fail("tools", f"must be a table of tools, not {type(tools).__name__}")
        rules: dict[str, list[Rule]] = {}
        for tool, entries in tools.items():
            path = f"tools.{tool}"
            if not isinstance(tool, str) or not tool:
                raise fail(path, "a tool name must be a non-empty string")
            if isinstance(entries, Mapping):
                raise fail(path, f"must be a list of tables ([[{path}]]), not a single table")
            if not isinstance(entries, list | tuple):
                raise fail(path, f"must be a list of tables ([[{path}]]), not {type(entries).__name__}")
            rules[tool] = [
                cls._load_rule(entry, f"{path}[{index}]", fail, allow_callable)
                for index, entry in enumerate(entries)
            ]
        try:
            return cls(rules, mode, shell=data.get("shell", SHELL), resolve=resolve, home=home)
        except PolicyError as exc:  # a fault between a rule and the policy: a shell's commands, say
            raise fail("", str(exc)) from None

    @staticmethod
    def _load_rule(
        entry: Any, path: str, fail: Callable[[str, str], PolicyError], allow_callable: bool
    ) -> Rule:
        if not isinstance(entry, Mapping):
            raise fail(path, f"must be a table, not {type(entry).__name__}")
        for key in entry:
            if key not in RULE_KEYS:
                raise fail(f"{path}.{key}", f"unknown key (expected {', '.join(RULE_KEYS)})")
        if "action" not in entry:
            raise fail(f"{path}.action", "is required")
        checked = checks(loaded=True, allow_callable=allow_callable)
        values: dict[str, Any] = {}
        for key, value in entry.items():
            try:
                values[key] = checked[key](value)
            except ExprError as exc:
                # Still an ExprError, so a caller can read the column; the message gains source and path.
                raise ExprError(f"{fail(f'{path}.{key}', exc.detail)}", exc.column, exc.line) from None
            except rule_settings.Invalid as exc:
                raise fail(f"{path}.{key}", str(exc)) from None
        try:
            return Rule(**values)
        except PolicyError as exc:  # a fault between keys, such as approvers the other keys exclude
            raise fail(path, str(exc)) from None


def _subject(part: Part) -> str:
    return f"`{part.text}`" if part.kind == "command" else f"writing {part.text}"


def _seen(when: Condition | Callable[..., Any], call: ToolCall) -> Mapping[str, Any]:
    """What a condition reads: the arguments, and where the call runs as `context` if it asks for it. A
    Python predicate gets the arguments alone, as it always has."""
    if not isinstance(when, Condition) or CONTEXT not in when.names:
        return call.args
    if CONTEXT in call.args:
        raise EvalError(
            f"{CONTEXT} is an argument of {call.tool}, and also where it runs: a condition can't tell"
        )
    return {**call.args, CONTEXT: call.context}
