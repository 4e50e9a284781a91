"""The conversation as a sans-I/O state machine: what a chat request does, given what the chat waits on.

Every framework's chat answers the same question the same way before it runs anything: the chat waits on
some things (a person, the browser, its running tasks, nothing), a request comes in (a new message,
answers, a regeneration, or the server's own continuation once browser results are overdue), and exactly
one thing follows. That rule lives here, as a table, in the manner of h11's `_state.py`; the adapters
(`pydantic_ai.chat`, `adk.chat`) do the I/O around it: loading, checking, running, saving.

    waits on \\ request  message     answers     regenerate   overdue
    nothing             RUN         REFUSE      REGENERATE   IGNORE
    person              SUPERSEDE   CONTINUE    REGENERATE   IGNORE
    browser             SUPERSEDE   CONTINUE    REGENERATE   IGNORE
    overdue             SUPERSEDE   EXPIRE      REGENERATE   EXPIRE
    tasks               SUPERSEDE   REFUSE      REGENERATE   IGNORE

A chat that waits on a person and on the browser at once is in the state of the browser (or overdue):
both are answered by the same continuation. Tasks count only when nothing else is open, since only a
user's message moves a chat on from them.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Final

from signoff.protocol import ChatRequest


class Waits(Enum):
    NOTHING = "nothing"
    PERSON = "person"
    BROWSER = "browser"
    OVERDUE = "overdue"
    TASKS = "tasks"


class Request(Enum):
    MESSAGE = "message"
    """A new user message."""
    ANSWERS = "answers"
    """Approval responses and browser results, with no new message: a continuation."""
    REGENERATE = "regenerate"
    """Run the last user message again, in place of the reply to it."""
    OVERDUE = "overdue"
    """The server's own continuation, once the browser's results are overdue."""


class Action(Enum):
    RUN = "run"
    """A new turn from the user's message."""
    CONTINUE = "continue"
    """Resume the open turn with the answers, into the same assistant message."""
    EXPIRE = "expire"
    """Resume the open turn, the browser's calls failing as overdue (an output that came late is not used)."""
    SUPERSEDE = "supersede"
    """The user moved on: withdraw what is open, then run the new message."""
    REGENERATE = "regenerate"
    """Withdraw what is open and run the last user message again."""
    REFUSE = "refuse"
    """Nothing to do: the request is a client's mistake (409)."""
    IGNORE = "ignore"
    """Nothing to do: the server's own continuation came too late or too early."""


TRANSITIONS: Final[dict[Waits, dict[Request, Action]]] = {
    Waits.NOTHING: {
        Request.MESSAGE: Action.RUN,
        Request.ANSWERS: Action.REFUSE,
        Request.REGENERATE: Action.REGENERATE,
        Request.OVERDUE: Action.IGNORE,
    },
    Waits.PERSON: {
        Request.MESSAGE: Action.SUPERSEDE,
        Request.ANSWERS: Action.CONTINUE,
        Request.REGENERATE: Action.REGENERATE,
        Request.OVERDUE: Action.IGNORE,
    },
    Waits.BROWSER: {
        Request.MESSAGE: Action.SUPERSEDE,
        Request.ANSWERS: Action.CONTINUE,
        Request.REGENERATE: Action.REGENERATE,
        Request.OVERDUE: Action.IGNORE,
    },
    Waits.OVERDUE: {
        Request.MESSAGE: Action.SUPERSEDE,
        Request.ANSWERS: Action.EXPIRE,
        Request.REGENERATE: Action.REGENERATE,
        Request.OVERDUE: Action.EXPIRE,
    },
    Waits.TASKS: {
        Request.MESSAGE: Action.SUPERSEDE,
        Request.ANSWERS: Action.REFUSE,
        Request.REGENERATE: Action.REGENERATE,
        Request.OVERDUE: Action.IGNORE,
    },
}

REFUSALS: Final[dict[Waits, str]] = {
    Waits.NOTHING: "this chat is not waiting on any approval or tool result",
    Waits.TASKS: "this chat waits on its running tasks, not on the client",
}
"""Why a refused request can't be taken, as the client is told."""


@dataclass(frozen=True, slots=True)
class Open:
    """What a chat waits on, as its last reply left it."""

    approvals: bool = False
    browser: bool = False
    overdue: bool = False
    tasks: bool = False

    @property
    def waits(self) -> Waits:
        if self.overdue:
            return Waits.OVERDUE
        if self.browser:
            return Waits.BROWSER
        if self.approvals:
            return Waits.PERSON
        return Waits.TASKS if self.tasks else Waits.NOTHING


def request_of(request: ChatRequest, *, server: bool = False) -> Request:
    """The kind of a checked request; `server` for the server's own continuation."""
    if server:
        return Request.OVERDUE
    if request.trigger == "regenerate-message":
        return Request.REGENERATE
    return Request.MESSAGE if request.user_message is not None else Request.ANSWERS


def next_action(open_: Open, request: Request) -> Action:
    return TRANSITIONS[open_.waits][request]


def streams_into_open_message(action: Action) -> bool:
    """The reply continues the assistant message the last one left open, rather than starting one."""
    return action in (Action.CONTINUE, Action.EXPIRE)
