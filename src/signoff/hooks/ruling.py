"""A Claude Code hook event ruled on by the gate, for the principal whose credential sent it.

- The chat is `claude-code:<session_id>`; the call id is the event's `tool_use_id`. A `PermissionRequest`
  carries none, so its call id is derived: `perm_<first 24 hex of SHA-256(session, tool, arguments'
  digest)>.<n>`, where `n` is the first generation whose approval is not settled and used. The same event
  sent again (a retry, or a hook that timed out and a call asked again) finds the approval it opened, still
  open or decided and unused; an identical call after that one ran, or after its "no" was told, asks anew.
- allow answers allow; deny answers deny with the rule's reason; ask opens an approval (announced on the
  rule's channels like any other) and holds the event until it is decided, then answers with the decision,
  an approver's edit as `updatedInput` (the gate has ruled on the edited call afresh).
- **Fail closed.** A hook has a timeout, after which Claude Code falls back to its own rules: the event is
  held at most `hold` seconds, the hook's timeout less `margin(timeout)`, then answered deny ("no decision
  within the hook's time; it stays open in the inbox"). The approval stays pending: deciding it later
  answers the same call asked again.
- An approved call is claimed as signoff answers allow: single use, exactly as in a chat. A
  `PostToolUse` for it records how it ended (the claim's outcome), and every `PostToolUse` records `ran`
  in the audit with its result's digest.
- **A session is its requester's**, as a chat is its owner's: the first event of a session saves its chat
  for the principal that sent it. Another principal's event in it (its ids are shown in the inbox, so
  anyone who saw them could replay them) is refused and audited: it neither asks, nor claims an approved
  call, nor reports how one ended.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib

from signoff.core.approval import CallOutcome, State
from signoff.core.call import ToolCall, digest
from signoff.core.claim import kept
from signoff.core.errors import AlreadyConsumed, CallMismatch, IllegalTransition, StaleChat, Unproven
from signoff.gate import Allowed, Gate, Pending, Refused
from signoff.hooks.client import DEFAULT_TIMEOUT, margin
from signoff.hooks.events import PERMISSION, HookEvent, Verdict

NOT_DECIDED = "no decision within the hook's time; it stays open in the inbox"
_CLOCK_SLACK = 0.05
_ROUNDS = 4


class ClaudeCode:
    """Rules on Claude Code's tool calls through `gate`."""

    def __init__(self, gate: Gate) -> None:
        self.gate = gate
        self.ledger = gate.ledger

    async def ask(
        self, event: HookEvent, requester: str, *, hook_timeout: float = DEFAULT_TIMEOUT
    ) -> Verdict:
        """The verdict on a `PreToolUse` or `PermissionRequest` event, made for `requester` (the principal
        its credential proved), within the hook's own timeout."""
        clock = self.ledger.approvals.clock
        ends = clock() + hook_timeout - margin(hook_timeout)
        if (refused := await self._owned(event, requester)) is not None:
            return Verdict(allow=False, reason=refused)
        call = ToolCall(await self._call_id(event), event.tool_name, event.tool_input, event.context)
        for _ in range(_ROUNDS):
            try:
                outcome = await self.gate.claim(
                    call, chat_id=event.chat_id, wait="deferred", requester=requester
                )
            except AlreadyConsumed:
                return Verdict(
                    allow=False, reason=f"call {call.call_id} was approved once and has run already"
                )
            except (CallMismatch, Unproven) as exc:
                return Verdict(allow=False, reason=str(exc))
            if isinstance(outcome, Refused):
                return Verdict(allow=False, reason=outcome.message)
            if isinstance(outcome, Allowed):
                edited = outcome.call.args if outcome.call.digest != call.digest else None
                return Verdict(allow=True, reason=_why(outcome), updated_input=edited)
            if not await self._held(outcome, ends):
                return Verdict(allow=False, reason=f"{NOT_DECIDED}: approval {outcome.approval.id}")
        return Verdict(allow=False, reason="the approval changed too often while it was ruled on")

    async def ran(self, event: HookEvent, requester: str) -> None:
        """A `PostToolUse`: the call ran. Its claim, where an approval let it run, records how it ended, and
        the audit that it ran, with its result's digest."""
        assert event.tool_use_id is not None  # the route refuses a PostToolUse without one
        if await self._owned(event, requester) is not None:
            return
        call = ToolCall(event.tool_use_id, event.tool_name, event.tool_input, event.context)
        result = digest({"result": event.tool_response})
        approval = await self.ledger.approvals.find(event.chat_id, call.call_id)
        if approval is not None and approval.state is State.CONSUMED and approval.outcome is None:
            ended = kept(CallOutcome(ok=True, result={"digest": result}, at=self.ledger.approvals.clock()))
            # another call's report, or a second one, ends nothing: the audit below still records it
            with contextlib.suppress(CallMismatch, IllegalTransition):
                await self.ledger.approvals.consume(approval.id, call, requester, outcome=ended)
        await self.ledger.audit.record(
            "ran", call.call_id, requester, chat=event.chat_id, tool=call.tool, digest=call.digest,
            result=result, approval=approval.id if approval is not None else "",
        )  # fmt: skip

    async def _owned(self, event: HookEvent, requester: str) -> str | None:
        """None when the event's session is `requester`'s (its first event makes it so); else why not, in
        the audit too."""
        chats = self.ledger.chats
        stored = await chats.load(event.chat_id)
        if stored is None:
            with contextlib.suppress(StaleChat):  # another event of the session saved it first
                stored = await chats.save(event.chat_id, b"", version=0, owner=requester)
            stored = stored or await chats.load(event.chat_id)
        if stored is not None and stored.owner == requester:
            return None
        why = f"session {event.session_id} is another principal's"
        await self.ledger.audit.record("refuse", event.chat_id, requester, why=why, via="claude-code")
        return why

    async def _held(self, pending: Pending, ends: float) -> bool:
        """Wait for the approval's decision until `ends` (or its own deadline, which the gate then applies);
        whether there is one to rule on."""
        approval, clock = pending.approval, self.ledger.approvals.clock
        limit = ends - clock()
        if approval.deadline is not None:
            limit = min(limit, approval.deadline - clock() + _CLOCK_SLACK)
        try:
            async with asyncio.timeout(max(0.0, limit)):
                await self.ledger.approvals.wait(approval.id)
        except TimeoutError:
            return approval.deadline is not None and approval.deadline <= clock()
        return True

    async def _call_id(self, event: HookEvent) -> str:
        """The event's `tool_use_id`; for a `PermissionRequest`, the generation derived as above."""
        if event.tool_use_id is not None and event.hook_event_name != PERMISSION:
            return event.tool_use_id
        args = digest(event.tool_input)
        seed = f"{event.session_id}\0{event.tool_name}\0{args}".encode()
        base = "perm_" + hashlib.sha256(seed).hexdigest()[:24]
        generation = 0
        while True:
            found = await self.ledger.approvals.find(event.chat_id, f"{base}.{generation}")
            if found is None or found.state in (State.PENDING, State.APPROVED):
                return f"{base}.{generation}"
            generation += 1


def _why(allowed: Allowed) -> str:
    match allowed.via:
        case "approval":
            return f"approved by {allowed.by}"
        case "grant":
            return f"a remembered approval by {allowed.by}"
        case _:
            return f"allowed by {allowed.by}"
