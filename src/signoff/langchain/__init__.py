"""signoff for LangChain agents and LangGraph graphs: the gate as middleware or a tool node, browser
tools, and the chat the server runs."""

from signoff.langchain.chat import LangGraphChat, NotGated
from signoff.langchain.middleware import (
    NoGate,
    SignoffMiddleware,
    acknowledged_tool,
    browser_tool,
    check_task_tool,
    long_running_tool,
    tool_node,
)

__all__ = [
    "LangGraphChat",
    "NoGate",
    "NotGated",
    "SignoffMiddleware",
    "acknowledged_tool",
    "browser_tool",
    "check_task_tool",
    "long_running_tool",
    "tool_node",
]
