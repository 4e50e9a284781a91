"""Tasks over HTTP: `/api/tasks` for operators, and each chat's own tasks for its page.

- `GET /api/tasks` (`?chat=`, `?state=`, `?limit=`), `GET /api/tasks/{id}`, `POST /api/tasks/{id}/cancel`
  and `GET /api/tasks/feed` (SSE, `event: task`) are the operators': they need an admin's credential.
- `GET /api/chat/{id}/tasks` and `POST /api/chat/{id}/tasks/{task_id}/cancel` are the chat owner's, like
  the chat's other routes: only that chat's tasks. The chat's events feed (`/api/chat/{id}/events`)
  carries its task changes.

A cancel is cooperative (see `signoff.tasks`): the answer may still say `running`, with `cancel_by` set,
until the body stops; the feed then says `cancelled`.
"""

from __future__ import annotations

import msgspec
from sse_starlette import ServerSentEvent
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from signoff.core.errors import NotFound, TaskFinished
from signoff.core.principal import Principal
from signoff.core.task import Task, TaskState
from signoff.core.wording import OWNER
from signoff.server.approvals import event_response
from signoff.server.auth import signed_in
from signoff.server.feed import TaskFeed
from signoff.server.http import Forbidden, ListQuery, json_response, read_body, refusal
from signoff.server.owners import Owners
from signoff.tasks import Tasks

MAX_BODY = 16 * 1024


class CancelBody(msgspec.Struct, forbid_unknown_fields=True):
    """Who cancels comes from the credential: a body naming someone (`by`) is a 422."""

    reason: str = ""


def task_event(task: Task) -> ServerSentEvent:
    return ServerSentEvent(msgspec.json.encode(task.public()).decode(), event="task")


class TasksAPI:
    def __init__(self, tasks: Tasks, feed: TaskFeed, owners: Owners, *, ping: float = 15) -> None:
        self.tasks = tasks
        self.ledger = tasks.ledger
        self.feed = feed
        self.owners = owners
        self.ping = ping

    def routes(self) -> list[BaseRoute]:
        return [
            Route("/api/tasks", self.list, methods=["GET"]),
            Route("/api/tasks/feed", self.follow, methods=["GET"]),
            Route("/api/tasks/{id}", self.get, methods=["GET"]),
            Route("/api/tasks/{id}/cancel", self.cancel, methods=["POST"]),
            Route("/api/chat/{chat}/tasks", self.chat_list, methods=["GET"]),
            Route("/api/chat/{chat}/tasks/{id}/cancel", self.chat_cancel, methods=["POST"]),
        ]

    async def list(self, request: Request) -> Response:
        _operator(request)
        query = ListQuery.of(request, TaskState)
        found = await self.ledger.tasks.query(chat_id=query.chat, state=query.state, limit=query.limit)
        return json_response({"tasks": [t.public() for t in found]})

    async def get(self, request: Request) -> Response:
        _operator(request)
        return json_response((await self.ledger.tasks.get(request.path_params["id"])).public())

    async def cancel(self, request: Request) -> Response:
        principal = _operator(request)
        empty = not await request.body()
        body = CancelBody() if empty else await read_body(request, CancelBody, limit=MAX_BODY, what="cancel")
        task_id = request.path_params["id"]
        return await self._cancel(
            request, task_id, principal.id, principal.described, body.reason, chat_id=None
        )

    async def follow(self, request: Request) -> Response:
        _operator(request)
        return event_response((task_event(t) async for t in self.feed.follow()), ping=self.ping)

    async def chat_list(self, request: Request) -> Response:
        chat_id = request.path_params["chat"]
        await self.owners.owned(chat_id, self.owners.principal(request), request)
        found = await self.ledger.tasks.query(chat_id=chat_id)
        return json_response({"tasks": [t.public() for t in found]})

    async def chat_cancel(self, request: Request) -> Response:
        chat_id, principal = request.path_params["chat"], self.owners.principal(request)
        await self.owners.owned(chat_id, principal, request)
        task_id = request.path_params["id"]
        return await self._cancel(request, task_id, principal.id, OWNER, "", chat_id=chat_id)

    async def _cancel(
        self, request: Request, task_id: str, by: str, who: str, reason: str, *, chat_id: str | None
    ) -> Response:
        """A chat reaches only its own tasks: another chat's is as unknown as a missing one (and the
        attempt is audited)."""
        try:
            task = await self.ledger.tasks.get(task_id)
            if chat_id is not None and task.chat_id != chat_id:
                await self.owners.refuse(
                    request, "another-chat", task_id, "cancel from another chat", chat=chat_id
                )
                raise NotFound(f"no task {task_id}")
            return json_response((await self.tasks.cancel(task_id, by, reason, who)).public())
        except TaskFinished as exc:
            return refusal(exc, task=(await self.ledger.tasks.get(task_id)).public())


def _operator(request: Request) -> Principal:
    """The request's principal if it is an admin; `Forbidden` otherwise (audited)."""
    principal = signed_in(request)
    if not principal.is_admin:
        raise Forbidden("the tasks API needs an admin's credential")
    return principal
