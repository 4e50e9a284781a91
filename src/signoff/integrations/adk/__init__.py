"""signoff for Google ADK agents: the gate as a plugin, browser tools, and the chat the server runs."""

from signoff.integrations.adk.chat import AdkChat
from signoff.integrations.adk.plugin import (
    AcknowledgedTool,
    BrowserTool,
    SignoffPlugin,
    acknowledged_tool,
    browser_tool,
    check_task_tool,
    long_running_tool,
)

__all__ = [
    "AcknowledgedTool",
    "AdkChat",
    "BrowserTool",
    "SignoffPlugin",
    "acknowledged_tool",
    "browser_tool",
    "check_task_tool",
    "long_running_tool",
]
