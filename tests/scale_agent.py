"""The agent the multi-worker tests serve: the demo's scripted model and a payment tool that appends one
line per run to `$SIGNOFF_TEST_RUNS`, so a test can count every run across every worker process."""

from __future__ import annotations

import json
import os
from typing import Any

from pydantic_ai import Agent, DeferredToolRequests, RunContext
from pydantic_ai.toolsets import FunctionToolset

from signoff.demo.model import scripted_model


def process_payment(ctx: RunContext[None], amount: float, currency: str, recipient: str) -> dict[str, Any]:
    """Pay `amount` of `currency` to `recipient`."""
    line = json.dumps({"call": ctx.tool_call_id, "recipient": recipient, "pid": os.getpid()}) + "\n"
    fd = os.open(os.environ["SIGNOFF_TEST_RUNS"], os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    try:
        os.write(fd, line.encode())  # one O_APPEND write: lines from several processes never interleave
    finally:
        os.close(fd)
    return {"success": True, "amount": amount, "currency": currency, "recipient": recipient}


agent = Agent(
    scripted_model(),
    toolsets=[FunctionToolset([process_payment])],
    output_type=[str, DeferredToolRequests],
    name="signoff-scale",
)
