"""The SDK's `ApprovalServer` example (`examples/agent_patterns/human_in_the_loop_server.py`), on the ledger.

Same interface: `start(user_id, message)` runs the agent, and where it stops on calls that need approval,
returns a `PendingApproval` of prompts; `decide(user_id, request_id, {decision_id: bool})` takes one
answer per prompt from the owner and goes on. What the example keeps in a dict of one process is here the
ledger's: the paused `RunState` in the chat store, used once by a save with a version check (so a second
`decide`, in this process or another, finds it unavailable); each prompt an approval whose id is its
decision id, decided through the ledger's one door and audited; and each approved call claimed once before
its tool runs, whoever resumes the state.
"""

from __future__ import annotations

import json
import secrets
from dataclasses import dataclass
from typing import Any

from agents import Agent, FunctionTool, Runner, RunResult, RunState

import signoff.integrations.framework as fw
from signoff.core.decision import Decision
from signoff.core.errors import StaleChat
from signoff.core.policy import Policy
from signoff.gate import Gate
from signoff.ledger import Ledger, MemoryLedger
from signoff.openai_agents.tools import Gated

UNAVAILABLE = "Approval request is unavailable."
INCOMPLETE = "Provide one boolean decision for every pending tool call."


@dataclass(frozen=True)
class ApprovalPrompt:
    decision_id: str
    tool_name: str
    arguments: str | None


@dataclass(frozen=True)
class PendingApproval:
    request_id: str
    prompts: tuple[ApprovalPrompt, ...]


def asks_where_the_agent_does(agent: Agent[Any]) -> Policy:
    """The policy of the SDK's own flag: ask about each tool whose `needs_approval` is set (a function
    counts: signoff can't know what it would say, so it asks), allow the others."""
    tools = [t for t in agent.tools if isinstance(t, FunctionTool)]
    return Policy.from_dict(
        {"tools": {t.name: [{"action": "ask" if t.needs_approval else "allow"}] for t in tools}}
    )


class ApprovalServer:
    """The example's service, signoff-backed; identities come from the application's authentication."""

    def __init__(
        self, agent: Agent[Any], *, ledger: Ledger | None = None, policy: Policy | None = None
    ) -> None:
        self._ledger = ledger or MemoryLedger()
        self._started = ledger is not None
        gate = Gate(self._ledger, policy or asks_where_the_agent_does(agent))
        self._gated = Gated(gate, wait="deferred")
        self._agent = self._gated.agent(agent)

    async def start(self, authenticated_user_id: str, message: str) -> PendingApproval | RunResult:
        if not self._started:
            await self._ledger.start()
            self._started = True
        chat_id = "chat_" + secrets.token_urlsafe(16)
        result = await self._run(chat_id, authenticated_user_id, message)
        return await self._save(authenticated_user_id, chat_id, result)

    async def decide(
        self, authenticated_user_id: str, request_id: str, decisions: dict[str, bool]
    ) -> PendingApproval | RunResult:
        chats = self._ledger.chats
        stored = await chats.load(request_id) if self._started else None
        if stored is None or stored.owner != authenticated_user_id or not stored.state:
            raise ValueError(UNAVAILABLE)
        saved = json.loads(stored.state)
        if set(decisions) != set(saved["decisions"]) or any(type(v) is not bool for v in decisions.values()):
            raise ValueError(INCOMPLETE)
        try:  # used once, before anything is decided or run: a second submission finds it gone
            await chats.save(request_id, b"", version=stored.version)
        except StaleChat:
            raise ValueError(UNAVAILABLE) from None
        for decision_id, approved in decisions.items():
            decision = Decision.of(approved, authenticated_user_id)
            await self._ledger.approvals.decide(decision_id, decision, policy=self._gated.gate.policy)
        state = await RunState.from_json(self._agent, saved["state"])
        result = await self._run(saved["chat"], authenticated_user_id, state)
        return await self._save(authenticated_user_id, saved["chat"], result)

    async def _run(self, chat_id: str, owner: str, given: str | RunState[Any]) -> RunResult:
        token = fw.current_turn.set(fw.Turn(chat_id, "deferred", fw.Discard(), requester=owner))
        try:
            if isinstance(given, RunState):
                given = await self._gated.resume(given)
            return await Runner.run(self._agent, given)
        finally:
            fw.current_turn.reset(token)

    async def _save(self, owner: str, chat_id: str, result: RunResult) -> PendingApproval | RunResult:
        if not result.interruptions:
            return result
        state = result.to_state()
        interruptions = state.get_interruptions()
        decision_ids = []
        for item in interruptions:
            approval = await self._ledger.approvals.find(chat_id, item.call_id or "")
            assert approval is not None  # the gate opened it when the tool's needs_approval asked
            decision_ids.append(approval.id)
        request_id = secrets.token_urlsafe(32)
        saved = {"chat": chat_id, "state": state.to_json(), "decisions": decision_ids}
        await self._ledger.chats.save(request_id, json.dumps(saved).encode(), version=0, owner=owner)
        return PendingApproval(
            request_id,
            tuple(
                ApprovalPrompt(d, item.name or "unknown_tool", item.arguments)
                for d, item in zip(decision_ids, interruptions, strict=True)
            ),
        )
