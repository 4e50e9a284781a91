"""`signoff mcp-gateway` as an OpenAI Agents SDK agent's MCP server, the model scripted (`agents.testing`).

The Agents SDK gives its MCP session no elicitation callback, so a call that asks takes the out-of-band path:
held, then an `isError` result the model reads ("... call the tool again with the same arguments"); a person
decides in the REST API; the agent, run again, makes the same call and the upstream runs it once. The gateway,
its principals and the upstream that counts its runs are tests/test_mcp_gateway.py's.
"""

from __future__ import annotations

from typing import Any

from agents import Agent, RunConfig, Runner
from agents.mcp import MCPServerStreamableHttp
from agents.testing import ModelCall, ModelStep, ScriptedModel, assistant_message, function_call

from signoff.core.approval import State
from tests.test_mcp_gateway import Gateway, gateway

__all__ = ["gateway"]  # the fixture these tests use, from the module that defines it

PAYMENT = {"amount": 13, "to": "agents-sdk"}


def tool_output(call: ModelCall) -> str:
    """The text of the tool result the model is shown in `call`'s input."""
    [output] = [
        item for item in call.input if isinstance(item, dict) and item.get("type") == "function_call_output"
    ]
    return " ".join(part["text"] for part in output["output"] if part["type"] == "input_text")


def paying(turns: int) -> ScriptedModel:
    """A model that, each run, calls `pay` with the same arguments and then says what the tool answered."""
    steps: list[Any] = []
    for turn in range(turns):
        steps.append([function_call("pay", PAYMENT, call_id=f"call-{turn}")])
        steps.append(
            ModelStep.respond(lambda call: [assistant_message(f"the tool said: {tool_output(call)}")])
        )
    return ScriptedModel(steps)


async def test_an_agent_is_told_to_call_again_and_its_second_run_pays_once(gateway: Gateway) -> None:
    model = paying(turns=2)
    config = RunConfig(tracing_disabled=True)
    bearer = {"Authorization": f"Bearer {gateway.tokens['alice']}"}
    async with MCPServerStreamableHttp(
        params={"url": gateway.url, "headers": bearer}, client_session_timeout_seconds=30
    ) as server:
        agent = Agent(name="payer", instructions="Pay as asked.", model=model, mcp_servers=[server])
        first = await Runner.run(agent, "pay 13 to agents-sdk", run_config=config)
        seen = tool_output(model.calls[1])
        approval = await gateway.approval("agents-sdk")
        assert approval.state is State.PENDING and approval.requester == "alice"
        assert f"approval {approval.id} is waiting for" in seen
        assert f"decide at {gateway.base}/approvals" in seen
        assert "call the tool again with the same arguments" in seen
        assert first.final_output == f"the tool said: {seen}"
        assert gateway.ran("pay").count({"amount": 13.0, "to": "agents-sdk"}) == 0

        assert gateway.decide(approval.id, "admin", True, "ok for agents").status_code == 200
        second = await Runner.run(agent, "pay 13 to agents-sdk", run_config=config)
    assert second.final_output == "the tool said: paid 13.0 to agents-sdk"
    model.assert_complete()
    assert gateway.ran("pay").count({"amount": 13.0, "to": "agents-sdk"}) == 1
    assert [a.state for a in await gateway.approvals("agents-sdk")] == [State.CONSUMED]
