"""What an MCP client shows its user while a call waits for a person, and how the answer is read.

The form asks Approve or Deny with an optional reason, above the approval as the inbox puts it (hidden
characters spelled out, the quorum so far). Where the requester may not decide (four eyes, a quorum still
open) its only choice is `wait`, "Check again". A client's `decline` is a denial; its `cancel` decides
nothing.

The `requestState` of a 2026-07-28 round says which approval, which generation of the call and which
principal the form was for, and carries a nonce of its own. It leaves here as plain JSON: the SDK's
`RequestStateBoundary` seals it, binds it to the tool, the arguments and the principal, and refuses a
tampered or expired one before the gateway reads it. What it cannot know, that a state was used already,
the ledger knows: a state is a bearer credential, spent by its first use (`core.approval.again`, and
`core.approval.spend` for the upstream's own rounds).
"""

from __future__ import annotations

import secrets
from typing import Literal

import msgspec
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS, ElicitRequestFormParams, ElicitRequestURLParams, ElicitResult

from signoff.core.approval import Approval
from signoff.core.views import shown_lines
from signoff.ledger.url import command_hint

KEY = "signoff"
"""The key of signoff's question among a round's input requests."""

MAX_REASON = 2000

Verdict = Literal["approve", "deny", "wait", "cancel"]


class Asked(msgspec.Struct, frozen=True, tag="signoff"):
    """A round that asked about `approval`, for generation `call` of the identity, of `principal`; the
    answer it brings back spends it (`credential`)."""

    approval: str
    call: str
    principal: str
    nonce: str = msgspec.field(default_factory=lambda: secrets.token_urlsafe(16))

    @property
    def credential(self) -> str:
        return f"mcp:{self.nonce}"


class Passed(msgspec.Struct, frozen=True, tag="upstream"):
    """A round the upstream asked for itself: its own state, to hand back to it. The gateway's claim was
    taken in the first round, so the retry goes to the upstream, once: where an approval's claim let the
    call run (`approval`, its `call`), forwarding the retry spends the round (`credential`) on that claim,
    so however often the round is replayed, one approval runs the upstream's side of it once. A round
    of a call the policy or a grant allowed outright binds nothing: calling the tool again does the same."""

    state: str
    approval: str = ""
    call: str = ""
    nonce: str = msgspec.field(default_factory=lambda: secrets.token_urlsafe(16))

    @property
    def credential(self) -> str:
        return f"mcp:{self.nonce}"


RoundState = Asked | Passed
_encode = msgspec.json.Encoder().encode
_decode = msgspec.json.Decoder(RoundState).decode


def seal_later(state: RoundState) -> str:
    """The state as the boundary will seal it."""
    return _encode(state).decode()


def round_state(plain: str | None) -> RoundState | None:
    """The state a retry carries, as the boundary unsealed it (so it is one this gateway wrote)."""
    if plain is None:
        return None
    try:
        state: RoundState = _decode(plain)
    except msgspec.DecodeError:
        return None
    return state


class Answer(msgspec.Struct, frozen=True):
    verdict: Verdict
    reason: str = ""


def read_answer(result: object) -> Answer | None:
    """The person's answer in what a client sent back for signoff's question, if it is one: a JSON-RPC
    error for a form that is not this one's."""
    if not isinstance(result, ElicitResult):
        return None
    try:
        return answer_of(result)
    except ValueError as exc:
        raise MCPError(INVALID_PARAMS, str(exc)) from None


def refused_state() -> MCPError:
    """The JSON-RPC error for a `requestState` that is no round of this gateway's, or one used already."""
    return MCPError(INVALID_PARAMS, "Invalid or expired requestState", {"reason": "invalid_request_state"})


def answer_of(result: ElicitResult) -> Answer:
    """The person's answer in a client's elicitation result. Raises `ValueError` for a form that is not
    this one's (an unknown choice, a reason past `MAX_REASON`)."""
    if result.action == "decline":
        return Answer("deny", "declined in the MCP client")
    if result.action == "cancel":
        return Answer("cancel")
    content = result.content or {}
    reason = content.get("reason") or ""
    if not isinstance(reason, str):
        raise ValueError("the reason must be text")
    if len(reason) > MAX_REASON:
        raise ValueError(f"the reason is over {MAX_REASON} characters")
    match content.get("decision"):
        case "approve" | "deny" | "wait" as verdict:
            return Answer(verdict, reason)
    raise ValueError("the answer must choose approve, deny or wait")


def form(approval: Approval, *, may_decide: bool) -> ElicitRequestFormParams:
    choices = ["approve", "deny"] if may_decide else ["wait"]
    schema = {
        "type": "object",
        "properties": {
            "decision": {
                "type": "string",
                "title": "Decision" if may_decide else "Check again",
                "enum": choices,
            },
            "reason": {"type": "string", "title": "Reason", "maxLength": MAX_REASON},
        },
        "required": ["decision"],
    }
    return ElicitRequestFormParams(message=message(approval, may_decide=may_decide), requested_schema=schema)


def url_form(approval: Approval, inbox: str) -> ElicitRequestURLParams:
    words = f"Approval {approval.id} waits for {approval.awaited}: decide in signoff's inbox."
    return ElicitRequestURLParams(message=words, url=inbox, elicitation_id=approval.id)


def message(approval: Approval, *, may_decide: bool) -> str:
    rows = "\n".join(shown_lines(approval))
    if may_decide:
        return f"A tool call waits for your approval.\n\n{rows}"
    return f"A tool call waits for someone else's approval: you cannot decide it.\n\n{rows}"


def waiting(approval: Approval, inbox: str | None, ledger: str | None = None) -> str:
    """What the model reads when a call is left pending: who it waits for, and how to go on: the inbox's
    link, or the command that decides it on the gateway's `ledger`."""
    quorum = approval.authority.quorum
    command = command_hint(f"approvals approve {approval.id}", ledger)
    where = f"decide at {inbox}" if inbox else f"decide with `{command}`"
    counted = f" ({len(approval.votes)} of {quorum})"
    return (
        f"approval {approval.id} is waiting for {approval.authority.awaited(escalated=approval.escalated)}"
        f"{counted}; {where}, then call the tool again with the same arguments"
    )
