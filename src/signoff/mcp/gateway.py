"""The MCP gateway: one upstream MCP server's tools, every call of them through the gate.

`tools/list` is the upstream's, each tool the policy may ask about saying so in its description (an
upstream's annotations, `readOnlyHint` and the rest, are its own claims and never make a call `allow`).
`tools/call` is ruled on like any agent's call, for the principal who made it, and then:
- allowed: forwarded upstream under the single-use claim; its answer passes back unchanged, its own
  input rounds included;
- refused: an `isError` result with the reason, as the model should read it; never forwarded;
- pending: what the client can do decides what it sees (see `_pending`): a form in an
  `InputRequiredResult` (2026-07-28), a form mid-call (`elicitation/create`, older clients), a link to the
  inbox, or, for a client with none of these, the call held until a decision or `hold` seconds, and then
  an `isError` that says who it waits for and to call again.

MCP gives a call no id: `identity` derives one, so a retry finds its approval and a new call asks anew.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable
from importlib.metadata import version
from typing import Any

import msgspec
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.server.request_state import RequestStateBoundary, RequestStateSecurity
from mcp.shared.exceptions import MCPError, NoBackChannelError
from mcp_types import (
    INVALID_PARAMS,
    INVALID_REQUEST,
    CallToolRequestParams,
    ElicitRequest,
    InputRequest,
    InputRequiredResult,
    InputResponses,
    ListToolsResult,
    PaginatedRequestParams,
)
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from signoff.core.approval import Approval, State
from signoff.core.call import ToolCall
from signoff.core.decision import Decision
from signoff.core.errors import (
    AlreadyConsumed,
    AlreadyDecided,
    AlreadyVoted,
    CallMismatch,
    IllegalTransition,
    InvalidCall,
    NotAnApprover,
    NotFound,
    Spent,
    Unproven,
)
from signoff.core.principal import Principal, Proven
from signoff.core.views import may_decide
from signoff.gate import Gate, Pending, Refused
from signoff.mcp.asking import (
    KEY,
    Answer,
    Asked,
    Passed,
    form,
    read_answer,
    refused_state,
    round_state,
    seal_later,
    url_form,
    waiting,
)
from signoff.mcp.boundary import Audited
from signoff.mcp.connection import Caller
from signoff.mcp.forwarding import Result, error, forward, passed
from signoff.mcp.identity import CallIdentity, Generations
from signoff.mcp.passthrough import pass_through
from signoff.mcp.upstream import Upstream, UpstreamFailed
from signoff.protocol.limits import MAX_DEPTH, too_deep

Requester = Callable[[ServerRequestContext[Any, Any]], Proven | None]
"""Who made a request, proven: the HTTP edge's principal, or the stdio gateway's own."""

MAX_ARGUMENTS = 256 * 1024
"""Bytes a call's arguments may take as JSON: past it, the call is refused before anything reads them."""

WAITS = "(signoff: a call of this tool may wait for a person's approval.)"
_PROGRESS_EVERY = 5.0
_ROUNDS = 4


class Gateway:
    def __init__(
        self,
        gate: Gate,
        upstream: Upstream,
        requester: Requester,
        *,
        state_keys: list[bytes],
        hold: float = 60.0,
        inbox: str | None = None,
        ledger_url: str | None = None,
        name: str = "signoff",
    ) -> None:
        """`inbox` is the base URL of the approvals page people decide on, or, without one, `ledger_url`
        the ledger the CLI decides on; `state_keys` seal the `requestState` of input rounds, newest first
        (every worker and restart must hold them)."""
        self.gate = gate
        self.upstream = upstream
        self.requester = requester
        self.hold = hold
        self.inbox = inbox.rstrip("/") if inbox else None
        self.ledger_url = ledger_url
        self.generations = Generations(gate.ledger)
        self.server: Server[Any] = Server(
            name,
            version=version("signoff"),
            on_list_tools=self.list_tools,
            on_call_tool=self.call_tool,
            get_tool_input_schema=upstream.listed,
        )
        pass_through(self.server, upstream)
        security = RequestStateSecurity(keys=state_keys, bind_principal=self._principal_id)
        boundary = RequestStateBoundary(security, default_audience=name)
        self.server.middleware.append(Audited(boundary, requester, self.audit_refused))

    # -- tools/list -----------------------------------------------------------------------------------------

    async def list_tools(
        self, ctx: ServerRequestContext[Any, Any], params: PaginatedRequestParams | None
    ) -> ListToolsResult:
        listed = await self._upstream(self.upstream.list_tools(params, Caller(ctx)))
        tools = [
            tool.model_copy(update={"description": f"{tool.description or ''}\n\n{WAITS}".lstrip()})
            if self.gate.policy.may_ask(tool.name)
            else tool
            for tool in listed.tools
        ]
        return listed.model_copy(update={"tools": tools})

    # -- tools/call -----------------------------------------------------------------------------------------

    async def call_tool(self, ctx: ServerRequestContext[Any, Any], params: CallToolRequestParams) -> Result:
        proven = self._who(ctx)
        principal = proven.principal
        args = _bounded(params.arguments or {})
        state = round_state(params.request_state)
        if isinstance(state, Passed):  # the upstream's own round of a call already claimed
            return await self._continued(ctx, principal, params, args, state)
        if params.request_state is not None and state is None:
            await self._refuse_state(principal, params.name, "a requestState of no round of this gateway")
        if await self.upstream.schema(params.name) is None:
            raise MCPError(INVALID_PARAMS, f"unknown tool {params.name!r}: the upstream lists no such tool")
        try:
            identity = CallIdentity.of(principal.id, params.name, args, params.meta)
        except InvalidCall as exc:
            raise MCPError(INVALID_PARAMS, str(exc)) from None
        if self.gate.policy.evaluate(identity.call(0)).action != "ask":
            ruled = await self._ruled(ctx, identity, 0, principal, params.input_responses)
            assert not isinstance(ruled, Pending)  # only a rule that asks leaves a call pending
            return ruled
        return await self._asked(ctx, proven, identity, state, params)

    async def _continued(
        self,
        ctx: ServerRequestContext[Any, Any],
        principal: Principal,
        params: CallToolRequestParams,
        args: dict[str, Any],
        state: Passed,
    ) -> Result:
        """The upstream's own round of a call already claimed, forwarded once: the round is spent on the
        approval's claim first (a replayed, copied or late state is a JSON-RPC error, audited, and never
        forwarded), and a further round the upstream asks is sealed anew to the same claim."""
        if state.approval:
            claimed = ToolCall(state.call, params.name, args)
            approvals = self.gate.ledger.approvals
            try:
                await approvals.consume(state.approval, claimed, principal.id, spends=state.credential)
            except Spent:  # audited by the ledger
                raise refused_state() from None
            except (NotFound, IllegalTransition, CallMismatch) as exc:
                await self._refuse_state(principal, params.name, f"an upstream round that {exc}")
        responses = params.input_responses
        result = await forward(self.upstream, ctx, params.name, args, state.state or None, responses)
        return passed(result, approval=state.approval, call=state.call)

    async def _ruled(
        self,
        ctx: ServerRequestContext[Any, Any],
        identity: CallIdentity,
        generation: int,
        principal: Principal,
        responses: InputResponses | None,
    ) -> Result | Pending:
        """The gate's ruling on generation `generation` of the call, and the upstream's answer if it ran."""
        call = identity.call(generation)
        schema = self.upstream.listed(call.tool)  # listed: `call_tool` refused a tool the upstream lacks

        async def run(**args: Any) -> Result:
            return await forward(self.upstream, ctx, call.tool, args, responses=responses)

        try:
            outcome: Result | Refused | Pending = await self.gate.run(
                call, run, chat_id=identity.chat_id, wait="deferred", requester=principal.id,
                schema=schema,
            )  # fmt: skip
        except (CallMismatch, Unproven) as exc:
            return error(str(exc))
        if isinstance(outcome, Refused):
            return error(outcome.message)
        if isinstance(outcome, InputRequiredResult):  # the upstream's own round: bound to the claim, if any
            asked = await self.gate.ledger.approvals.find(identity.chat_id, call.call_id)
            claim = asked.id if asked is not None and asked.state is State.CONSUMED else ""
            return passed(outcome, approval=claim, call=call.call_id if claim else "")
        return outcome

    async def _asked(
        self,
        ctx: ServerRequestContext[Any, Any],
        proven: Proven,
        identity: CallIdentity,
        state: Asked | None,
        params: CallToolRequestParams,
    ) -> Result:
        """A call whose rule may ask: its current generation, ruled on, answered, held, until it ran, was
        refused, or waits on someone the client can't reach now."""
        principal, answer, answering = proven.principal, None, proven
        for _ in range(_ROUNDS):
            generation = await self.generations.current(identity)
            if state is not None:
                answer = await self._answer(principal, identity.call(generation).call_id, state, params)
                answering, state = proven.spending(state.credential), None
            try:
                outcome = await self._ruled(ctx, identity, generation, principal, params.input_responses)
            except AlreadyConsumed:  # it ran: this is a new call of the next generation
                await self.generations.advance(identity, generation, principal.id)
                continue
            if isinstance(outcome, Pending):
                found = await self._pending(ctx, answering, outcome.approval, identity, generation, answer)
                answer, answering = None, proven  # an answer is used once
                if found is None:
                    continue  # decided meanwhile: rule again
                return found
            await self.generations.advance(identity, generation, principal.id)  # it ran, or its "no" was told
            return outcome
        return error("the call's approval changed too often while it was ruled on; call the tool again")

    async def _pending(
        self,
        ctx: ServerRequestContext[Any, Any],
        proven: Proven,
        approval: Approval,
        identity: CallIdentity,
        generation: int,
        answer: Answer | None,
    ) -> Result | None:
        """What a client sees of a pending call, by what it can do; None once the approval was decided
        here or meanwhile (the caller rules again). An answer is `proven`'s decision, spending the state it
        came in where it came in one."""
        principal = proven.principal
        if answer is not None and answer.verdict in ("approve", "deny"):
            if await self._decide(proven, approval, answer):
                return None
            answer = None  # a vote that does not count: the call waits on, and the client is asked again
        if answer is not None and answer.verdict == "cancel":
            return error(waiting(approval, self._link(approval), self.ledger_url))
        elicitation = ctx.session.client_capabilities.elicitation if ctx.session.client_capabilities else None
        by_url = elicitation is not None and elicitation.url is not None and elicitation.form is None
        decider = may_decide(principal, approval)
        if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS and elicitation is not None:
            if answer is not None and (by_url or _progress(ctx)):  # "Check again", or back from the link
                approval = await self._held(ctx, approval)
                if self._settled(approval):
                    return None
                if by_url:
                    return error(waiting(approval, self._link(approval), self.ledger_url))
            asked = Asked(approval.id, identity.call(generation).call_id, principal.id)
            link = self._link(approval)
            question = url_form(approval, link) if by_url else form(approval, may_decide=decider)
            requests: dict[str, InputRequest] = {KEY: ElicitRequest(params=question)}
            return InputRequiredResult(input_requests=requests, request_state=seal_later(asked))
        if answer is None and elicitation is not None and not by_url and decider:  # asked once per call
            question = form(approval, may_decide=True)
            try:
                asked_now = await ctx.session.elicit_form(
                    question.message, question.requested_schema, related_request_id=ctx.request_id
                )
            except NoBackChannelError:
                asked_now = None
            if asked_now is not None:  # the answer to a question asked in this very request: the identity's
                return await self._pending(
                    ctx, proven, approval, identity, generation, read_answer(asked_now)
                )
        elif by_url:
            link = self._link(approval)
            with contextlib.suppress(NoBackChannelError):
                await ctx.session.elicit_url(
                    url_form(approval, link).message, link, approval.id, related_request_id=ctx.request_id
                )
        approval = await self._held(ctx, approval)
        return (
            None
            if self._settled(approval)
            else error(waiting(approval, self._link(approval), self.ledger_url))
        )

    async def _held(self, ctx: ServerRequestContext[Any, Any], approval: Approval) -> Approval:
        """Wait for the approval's decision, from any channel or worker, at most `hold` seconds and never
        past its deadline, telling a client that asked for progress who it waits for."""
        approvals = self.gate.ledger.approvals
        limit = self.hold
        if approval.deadline is not None:
            limit = min(limit, max(0.0, approval.deadline - approvals.clock()))
        decided = asyncio.ensure_future(approvals.wait(approval.id))
        started = time.monotonic()
        try:
            while (left := limit - (elapsed := time.monotonic() - started)) > 0:
                await ctx.session.report_progress(elapsed, limit, f"waiting for {approval.awaited}")
                done, _ = await asyncio.wait({decided}, timeout=min(left, _PROGRESS_EVERY))
                if done:
                    return decided.result()
        finally:
            decided.cancel()
        return approval

    def _settled(self, approval: Approval) -> bool:
        return approval.state is not State.PENDING or approval.is_due(self.gate.ledger.approvals.clock())

    async def _answer(
        self, principal: Principal, call_id: str, state: Asked, params: CallToolRequestParams
    ) -> Answer | None:
        """The person's answer in a retry, from a round of this very call and principal: a state from an
        earlier generation (an answer replayed after its call ran) is refused and audited."""
        if state.call != call_id or state.principal != principal.id:
            await self._refuse_state(principal, params.name, "a requestState of an earlier or another call")
        return read_answer((params.input_responses or {}).get(KEY))

    async def _decide(self, proven: Proven, approval: Approval, answer: Answer) -> bool:
        """The requester's vote, and whether it counted. One its rule doesn't count (four eyes, a vote
        already given, a state used already) changes nothing but the audit, where the ledger records it:
        the call goes on waiting for those who may decide."""
        decision = Decision.of(answer.verdict == "approve", proven, answer.reason)
        try:
            await self.gate.ledger.approvals.decide(approval.id, decision, policy=self.gate.policy)
        except AlreadyDecided:
            return True  # someone else decided first: the caller rules on theirs
        except (NotAnApprover, AlreadyVoted, Spent):
            return False
        return True

    async def _upstream(self, pending: Awaitable[ListToolsResult]) -> ListToolsResult:
        try:
            return await pending
        except UpstreamFailed as exc:
            raise MCPError(INVALID_REQUEST, str(exc)) from None

    # -- who, and refusals ----------------------------------------------------------------------------------

    def _who(self, ctx: ServerRequestContext[Any, Any]) -> Proven:
        proven = self.requester(ctx)
        if proven is None:
            raise MCPError(INVALID_REQUEST, "this gateway needs a credential for every request")
        return proven

    def _principal_id(self, ctx: ServerRequestContext[Any, Any]) -> str | None:
        proven = self.requester(ctx)
        return proven.principal.id if proven is not None else None

    def _link(self, approval: Approval) -> str:
        return f"{self.inbox}/approvals#{approval.id}" if self.inbox else ""

    async def _refuse_state(self, principal: Principal | None, tool: str, why: str) -> None:
        await self.audit_refused(principal, tool, why)
        raise refused_state()

    async def audit_refused(self, principal: Principal | None, tool: str, why: str) -> None:
        actor = principal.id if principal is not None else "unknown"
        await self.gate.ledger.audit.record("refuse", tool, actor, why=why, via="mcp")


def _progress(ctx: ServerRequestContext[Any, Any]) -> bool:
    return bool(ctx.meta and ctx.meta.get("progress_token") is not None)


def _bounded(args: dict[str, Any]) -> dict[str, Any]:
    """The arguments, if within the bounds no real call reaches; else a JSON-RPC error before anything
    walks them (the digest, the audit, the upstream)."""
    try:
        text = msgspec.json.encode(args)
    except (TypeError, ValueError, RecursionError):
        raise MCPError(INVALID_PARAMS, "the arguments are not JSON a tool can take") from None
    if len(text) > MAX_ARGUMENTS:
        raise MCPError(INVALID_PARAMS, f"the arguments are over {MAX_ARGUMENTS} bytes as JSON")
    if too_deep(text):
        raise MCPError(INVALID_PARAMS, f"the arguments nest deeper than {MAX_DEPTH} levels")
    return args
