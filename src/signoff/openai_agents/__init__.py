"""signoff for OpenAI Agents SDK agents: the gate on every function tool, browser tools, the chat the server
runs, and the SDK's `ApprovalServer` example backed by the ledger."""

from signoff.openai_agents.chat import OpenAIAgentsChat
from signoff.openai_agents.server import ApprovalPrompt, ApprovalServer, PendingApproval
from signoff.openai_agents.tools import (
    CHECK_TASK,
    AcknowledgedTool,
    BrowserTool,
    Gated,
    acknowledged_tool,
    browser_tool,
)

__all__ = [
    "CHECK_TASK", "AcknowledgedTool", "ApprovalPrompt", "ApprovalServer", "BrowserTool", "Gated",
    "OpenAIAgentsChat", "PendingApproval", "acknowledged_tool", "browser_tool",
]  # fmt: skip
