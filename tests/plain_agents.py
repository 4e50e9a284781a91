"""Agents written as their frameworks' docs write them, with no signoff code at all: what `signoff serve
--agent` must serve unchanged (issue 42). Each counts the runs of its one tool in `RUNS`."""

from __future__ import annotations

import os
import signal
from collections.abc import AsyncGenerator
from dataclasses import dataclass

from google.adk.agents.llm_agent import LlmAgent
from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.genai import types
from pydantic import BaseModel
from pydantic_ai import Agent, RunContext
from pydantic_ai.models.test import TestModel

RUNS: list[str] = []


plain = Agent(TestModel())


@plain.tool_plain
def pay(amount: int, to: str) -> str:
    """Pay someone."""
    RUNS.append("plain")
    return f"paid {amount} to {to}"


class Receipt(BaseModel):
    paid: int
    to: str


structured = Agent(TestModel(), output_type=Receipt)


@structured.tool_plain(name="pay")
def pay_for_a_receipt(amount: int, to: str) -> str:
    """Pay someone."""
    RUNS.append("structured")
    return f"paid {amount} to {to}"


@dataclass
class Bank:
    fee: int = 1


with_deps = Agent(TestModel(), deps_type=Bank)


@with_deps.tool(name="pay")
def pay_with_a_fee(ctx: RunContext[Bank], amount: int, to: str) -> str:
    """Pay someone, and the bank its fee."""
    RUNS.append(f"with_deps fee {ctx.deps.fee}")
    return f"paid {amount} to {to}, fee {ctx.deps.fee}"


class Vault:
    def __init__(self, key: str) -> None:
        self.key = key


needs_a_key = Agent(TestModel(), deps_type=Vault)


@needs_a_key.tool(name="pay")
def pay_from_the_vault(ctx: RunContext[Vault], amount: int, to: str) -> str:
    """Pay someone from the vault."""
    RUNS.append(f"vault {ctx.deps.key}")
    return f"paid {amount} to {to}"


def vault() -> Vault:
    """What `--deps` names: the vault each run opens."""
    return Vault("k1")


class OneCall(BaseLlm):
    """A model that pays Hanako when asked anything, then says what came back."""

    model: str = "one-call"

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        last = llm_request.contents[-1]
        answers = [p.function_response for p in last.parts or [] if p.function_response]
        if answers:
            said = "; ".join(str((a.response or {}).get("result", a.response)) for a in answers)
            yield LlmResponse(content=types.Content(role="model", parts=[types.Part(text=said)]))
            return
        call = types.FunctionCall(id="call_pay", name="pay_adk", args={"amount": 5, "to": "Hanako"})
        yield LlmResponse(content=types.Content(role="model", parts=[types.Part(function_call=call)]))


def pay_adk(amount: int, to: str) -> str:
    """Pay someone."""
    RUNS.append("adk")
    return f"paid {amount} to {to}"


adk = LlmAgent(name="plain", model=OneCall(), instruction="Pay when asked.", tools=[pay_adk])


crashing = Agent(TestModel())


@crashing.tool_plain(name="pay")
def pay_then_die(amount: int, to: str) -> str:
    """Pay someone; its process then dies before it can say so, as a worker killed at the worst moment."""
    with open(os.environ["SIGNOFF_TEST_RUNS"], "a") as runs:
        runs.write(f"paid {amount} to {to}\n")
    os.kill(os.getpid(), signal.SIGKILL)
    return "never said"
