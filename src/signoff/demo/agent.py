"""The demo agent: the scripted model (or any pydantic-ai model string) and the demo's four tools.

`process_payment` and `get_weather` run on the server. `get_location` runs in the browser (seed 001): an
external tool, so the run ends with it pending and the page sends its result. `change_bgm` is acknowledged:
the server answers it at once, and the page plays the track as it sees the call.
"""

from __future__ import annotations

from typing import Any

from pydantic_ai import Agent, DeferredToolRequests
from pydantic_ai.tools import ToolDefinition
from pydantic_ai.toolsets import ExternalToolset, FunctionToolset

from signoff.demo.model import scripted_model
from signoff.demo.tools import Wallets, change_bgm, export_report, get_weather
from signoff.integrations.chat.turn import current_turn
from signoff.integrations.pydantic_ai.browser import acknowledged

INSTRUCTIONS = (
    "You help with payments, weather, location, music and reports. Use the tools. When a tool result "
    "says it was refused, tell the user in one sentence and quote the reason."
)

BROWSER_TOOLS = ExternalToolset(
    [
        ToolDefinition(
            name="get_location",
            description="The user's current location, from their browser.",
            parameters_json_schema={"type": "object", "properties": {}},
        ),
    ]
)


def demo_agent(model: str | None = None, wallets: Wallets | None = None) -> Agent[None, Any]:
    """`model` is any pydantic-ai model string; without one the scripted offline model answers."""
    wallets = wallets or Wallets()
    server_tools = FunctionToolset[None]()

    @server_tools.tool_plain
    def process_payment(amount: float, currency: str, recipient: str) -> dict[str, Any]:
        """Pay `amount` of `currency` to `recipient` from the user's wallet."""
        turn = current_turn.get()
        return wallets.pay(turn.chat_id if turn else "default", amount, currency, recipient)

    server_tools.add_function(get_weather, takes_ctx=False, name="get_weather")
    server_tools.add_function(export_report, takes_ctx=False, name="export_report")
    server_tools.add_tool(acknowledged(change_bgm))
    return Agent(
        model or scripted_model(),
        instructions=INSTRUCTIONS,
        toolsets=[server_tools, BROWSER_TOOLS],
        output_type=[str, DeferredToolRequests],
        name="signoff-demo",
    )
