"""Everything a framework adapter needs from `signoff.integrations`, in one place.

An adapter (`signoff.langchain`, `signoff.openai_agents`) imports from here and from nothing else in
`signoff.integrations`, so the chat machinery can move between its modules without touching any adapter.
What a framework supplies is a `Framework` for the `ChatDriver` (its history codec, and a `Run` with a
`Translator` of its events) and a tool hook that calls `gated_call`; the rest is here to reuse.
"""

from signoff.integrations.chat.acknowledged import Acknowledgments, check
from signoff.integrations.chat.driver import Calls, ChatDriver, DrivenReply, Ended, Framework, Run
from signoff.integrations.chat.history import Histories, History, JsonMessages
from signoff.integrations.chat.machine import Action
from signoff.integrations.chat.reply import Begun, BrowserToolInfo, ChatView
from signoff.integrations.chat.state import ChatState, task_news, withdraw
from signoff.integrations.chat.stream import Relay, Translator, approval_request, drive, handed, output
from signoff.integrations.chat.trust import OutOfTurn
from signoff.integrations.chat.turn import Asked, Discard, Handed, Turn, Withheld, current_turn, in_browser
from signoff.integrations.chat.ui import Entry, PartOutcome, Prompt, Result, Said, Step, ui_messages
from signoff.integrations.chat.writing import Writing
from signoff.integrations.gated import (
    MARK,
    UNKNOWN,
    USAGE,
    GatedCall,
    GatedResult,
    Ran,
    Rejected,
    browser_result,
    check_task,
    gated_call,
    heard,
    json_arguments,
    json_outcome,
    json_text,
    moved_on,
    task_status,
    tasks_only,
)

__all__ = [
    "MARK",
    "UNKNOWN",
    "USAGE",
    "Acknowledgments",
    "Action",
    "Asked",
    "Begun",
    "BrowserToolInfo",
    "Calls",
    "ChatDriver",
    "ChatState",
    "ChatView",
    "Discard",
    "DrivenReply",
    "Ended",
    "Entry",
    "Framework",
    "GatedCall",
    "GatedResult",
    "Handed",
    "Histories",
    "History",
    "JsonMessages",
    "OutOfTurn",
    "PartOutcome",
    "Prompt",
    "Ran",
    "Rejected",
    "Relay",
    "Result",
    "Run",
    "Said",
    "Step",
    "Translator",
    "Turn",
    "Withheld",
    "Writing",
    "approval_request",
    "browser_result",
    "check_task",
    "check",
    "current_turn",
    "drive",
    "gated_call",
    "handed",
    "heard",
    "in_browser",
    "json_arguments",
    "json_outcome",
    "json_text",
    "moved_on",
    "output",
    "task_news",
    "task_status",
    "tasks_only",
    "ui_messages",
    "withdraw",
]
