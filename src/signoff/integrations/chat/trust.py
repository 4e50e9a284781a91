"""The server is the authority: what a client may claim about approvals and tool results, and nothing more.

A chat client resends the whole conversation on every request, and any of it can be forged. Only three
things are taken from it: the new user message, approval responses, and outputs of browser tools. Each
response must name an approval that this chat is waiting on, for the same call and the same arguments;
each output must answer a browser call this chat is waiting on. Anything else is refused before anything
runs, and the refusal is audited.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any

from signoff.core.approval import Approval, State, again
from signoff.core.call import digest
from signoff.core.decision import Decision, Remember
from signoff.core.errors import (
    AlreadyDecided,
    AlreadyVoted,
    InvalidCall,
    NotAnApprover,
    NotFound,
    SignoffError,
    Unproven,
)
from signoff.core.principal import Principal, Proven
from signoff.ledger.base import Ledger
from signoff.protocol import ApprovalResponse, ToolOutput, verify

OVER = frozenset({State.CONSUMED, State.DENIED, State.EXPIRED, State.CANCELLED})
"""An approval in one of these states answers nothing more: its call ran, or never will."""


class Untrusted(SignoffError):
    """A client claim the server will not honour; `field` names the part of the request that made it. Its
    kind says why, and a transport says it in its own terms (the server's HTTP statuses: `server.http`)."""

    def __init__(self, field: str, message: str) -> None:
        self.field = field
        super().__init__(message)


class Unknown(Untrusted):
    """What the request names is unknown to its sender: none such, or another's, which it must not learn."""


class NotAllowed(Untrusted):
    """The sender may not do this: another chat's approval, other arguments, a rule that does not admit it."""


class OutOfTurn(Untrusted):
    """The request does not fit where the chat is: nothing waits on it, it was answered, or it runs."""


class Malformed(Untrusted):
    """The request says something no call can be: arguments that are no JSON, say."""


async def accept_responses(
    ledger: Ledger,
    chat_id: str,
    waiting: Mapping[str, str],
    responses: Sequence[ApprovalResponse],
    owner: Principal,
    signing_key: bytes = b"",
    browser_tools: Collection[str] = (),
) -> list[Approval]:
    """Check every response against the ledger first, then record the decisions, so one bad response in a
    request means none of its responses takes effect. A response counts as the decision of the chat's
    `owner`, the principal the server's edge proved for this request, and only where the approval's rule
    lets the owner decide.

    `waiting` maps the call ids this chat is waiting on to their approval ids (a call whose approval is
    settled stays there until its result is told). A client keeps every part it was shown and sends them
    all again, so a part for a call of this chat that already ran or was refused, and that the chat no
    longer waits on, is an echo, and skipped, whatever state and `approval` it still carries: several
    questions of one step may be answered one message at a time. A response that came with the browser's
    output (`ran`) counts only for an approval the chat waits on, and only for one of `browser_tools`: a
    browser can't have run any other tool.
    """
    responses = [r for r in responses if not r.ran or waiting.get(r.call_id) == r.approval_id]
    checked = []
    for response in responses:
        approval = await _check(ledger, chat_id, waiting, response, owner, signing_key, browser_tools)
        if approval is not None:
            checked.append((approval, response))
    decided = []
    for approval, response in checked:
        if approval.state is State.PENDING:
            try:
                approval = await ledger.approvals.decide(approval.id, _decision(owner, response))
            except AlreadyDecided as lost:  # the inbox or the CLI was quicker; its decision stands
                approval = lost.winner
            except (NotAnApprover, AlreadyVoted, Unproven) as refused:  # what `_check` could not see; audited
                kind = NotAllowed if isinstance(refused, NotAnApprover) else OutOfTurn
                raise kind("approval", str(refused)) from None
        decided.append(approval)
    return decided


async def replayed(
    ledger: Ledger, chat_id: str, responses: Sequence[ApprovalResponse], owner: Principal
) -> Untrusted:
    """The refusal of a request whose every answer is an echo of a call that is over, and that brings
    nothing else: an old request sent again. Each echoed answer's refusal is audited."""
    why = "its call is over: the request answers nothing that waits"
    refusals = [
        await _refuse(ledger, chat_id, r.approval_id, owner, OutOfTurn, why, r.tool, r.call_id)
        for r in responses
    ]
    return refusals[0]


async def decide_in_chat(
    ledger: Ledger,
    chat_id: str,
    approval_id: str,
    owner: Principal,
    approved: bool,
    reason: str,
    remember: Remember,
) -> Approval:
    """The chat's owner decides one of its approvals directly (blocking mode, or a remembered answer): the
    same authority a response in a chat request carries, so only this chat's approvals, and only where
    their rule lets the owner decide.

    Raises `Untrusted` (audited) for another chat's or an unknown approval, `NotAnApprover` or
    `AlreadyVoted` where the rule refuses the owner, `AlreadyDecided` if it lost, `InvalidDecision` for a
    remembered denial.
    """
    approval = await _own(ledger, chat_id, approval_id, owner, tool="", call_id="")
    decision = Decision.of(approved, Proven(principal=owner), reason, remember=remember)
    return await ledger.approvals.decide(approval.id, decision)


def _decision(owner: Principal, response: ApprovalResponse) -> Decision:
    """What `response` decides, as the chat's owner: the principal the edge proved for this request."""
    return Decision.of(response.approved, Proven(principal=owner), response.reason or "")


async def _own(
    ledger: Ledger, chat_id: str, approval_id: str, owner: Principal, *, tool: str, call_id: str
) -> Approval:
    async def refuse(kind: type[Untrusted], why: str) -> Untrusted:
        return await _refuse(ledger, chat_id, approval_id, owner, kind, why, tool, call_id)

    try:
        approval = await ledger.approvals.get(approval_id)
    except NotFound:
        raise await refuse(Unknown, "no such approval") from None
    if approval.chat_id != chat_id:
        raise await refuse(NotAllowed, "it belongs to another chat")
    return approval


async def _refuse(
    ledger: Ledger,
    chat_id: str,
    approval_id: str,
    owner: Principal,
    kind: type[Untrusted],
    why: str,
    tool: str,
    call_id: str,
) -> Untrusted:
    field = f"approval {approval_id}"
    await ledger.audit.record("refuse", approval_id, owner.id, why=why, chat=chat_id, call=call_id, tool=tool)
    return kind(field, f"{field} refused: {why}")


async def _check(
    ledger: Ledger,
    chat_id: str,
    waiting: Mapping[str, str],
    response: ApprovalResponse,
    owner: Principal,
    signing_key: bytes,
    browser_tools: Collection[str],
) -> Approval | None:
    """The approval `response` answers, checked; None for an echo of a call that is over."""

    async def refuse(kind: type[Untrusted], why: str) -> Untrusted:
        return await _refuse(
            ledger, chat_id, response.approval_id, owner, kind, why, response.tool, response.call_id
        )

    approval = await _own(
        ledger, chat_id, response.approval_id, owner, tool=response.tool, call_id=response.call_id
    )
    if (approval.call.call_id, approval.call.tool) != (response.call_id, response.tool):
        raise await refuse(
            NotAllowed, f"it was asked for another call than {response.tool} {response.call_id}"
        )
    if approval.state in OVER and waiting.get(response.call_id) != approval.id:
        return None  # an echo: the call ran or was refused, and the chat has moved on from it
    if _digest(response.input) != approval.digest:
        raise await refuse(NotAllowed, "the arguments differ from the ones that were asked")
    call = approval.call
    if response.signature is not None and not verify(
        signing_key, response.signature, approval.id, call.call_id, call.tool, call.args
    ):  # older clients drop the signature, so only a present one can be checked
        raise await refuse(NotAllowed, "its signature is not the one this server gave")
    if waiting.get(response.call_id) != approval.id:
        raise await refuse(OutOfTurn, f"this chat is not waiting on it: it is {approval.state}")
    if response.ran and response.tool not in browser_tools:  # nothing of the request takes effect
        raise await refuse(
            OutOfTurn, f"call {response.call_id} waits for a person's approval, not for an output"
        )
    if approval.state is State.PENDING:  # checked here too, so a refused one stops every response
        if not approval.admits(owner):
            raise await refuse(NotAllowed, f"{owner.id} may not decide it: it waits for {approval.awaited}")
        if again(approval, _decision(owner, response)) is not None:  # the core's one rule
            raise await refuse(OutOfTurn, f"{owner.id} approved it already: it waits for {approval.awaited}")
    return approval


async def accept_outputs(
    ledger: Ledger,
    chat_id: str,
    owner: Principal,
    waiting: Mapping[str, str],
    made: Collection[str],
    asking: Collection[str],
    outputs: Sequence[ToolOutput],
) -> dict[str, ToolOutput]:
    """The outputs that answer browser calls this chat is waiting on (`waiting`: call id to tool name).

    Outputs of other calls the server `made` are the client echoing history, and are skipped. An output for
    a call the server never made, or for one waiting on a person's approval (`asking`), is a claim no
    browser can make: refused, and audited.
    """
    accepted: dict[str, ToolOutput] = {}
    for output in outputs:
        why = None
        if output.call_id not in made:
            why = f"no call {output.call_id} was made in this chat"
        elif output.call_id in asking and waiting.get(output.call_id) != output.tool:
            why = f"call {output.call_id} waits for a person's approval, not for an output"
        elif waiting.get(output.call_id) == output.tool and output.call_id in accepted:
            why = f"two outputs for call {output.call_id}"
        if why is not None:
            detail = {"why": why, "chat": chat_id, "tool": output.tool}
            await ledger.audit.record("refuse", output.call_id, owner.id, **detail)
            raise OutOfTurn(f"output {output.call_id}", why)
        if waiting.get(output.call_id) == output.tool:
            accepted[output.call_id] = output
    return accepted


async def ran_with_approval(
    ledger: Ledger,
    chat_id: str,
    owner: Principal,
    decided: Sequence[Approval],
    outputs: Sequence[ToolOutput],
    browser_tools: Collection[str],
) -> tuple[dict[str, ToolOutput], list[ToolOutput]]:
    """Approve-and-run in one message (seed 001): a browser tool's output that came with its approval's
    response. An approved call's output is held for its run, which takes it instead of handing the call
    to the browser; any other's is not used, and that is audited. Every other output is returned, for
    `accept_outputs`."""
    answered = {approval.call.call_id: approval for approval in decided}
    held: dict[str, ToolOutput] = {}
    rest: list[ToolOutput] = []
    for output in outputs:
        approval = answered.get(output.call_id)
        if approval is None or output.tool not in browser_tools or approval.call.tool != output.tool:
            rest.append(output)
        elif approval.state is State.APPROVED and approval.approved_digest == approval.digest:
            held[output.call_id] = output
        else:  # refused, still short of its quorum, or approved with other arguments than the browser ran
            why = f"the browser's output is not used: the approval is {approval.state}"
            if approval.state is State.APPROVED:
                why = "the browser's output is not used: the call was approved with other arguments"
            await ledger.audit.record(
                "refuse", output.call_id, owner.id, why=why, chat=chat_id, tool=output.tool
            )
    return held, rest


def _digest(args: Mapping[str, Any]) -> str:
    try:
        return digest(args)
    except InvalidCall as exc:
        raise Malformed("input", f"the call's input is not valid JSON arguments: {exc}") from exc
