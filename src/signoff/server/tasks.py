"""Tasks over HTTP: `/api/tasks` for operators, and each chat's own tasks for its page.

- `GET /api/tasks` (`?chat=`, `?state=`, `?limit=`), `GET /api/tasks/{id}`, `POST /api/tasks/{id}/cancel`
  and `GET /api/tasks/feed` (SSE, `event: task`) need the bearer token, like the approvals API.
- `GET /api/chat/{id}/tasks` and `POST /api/chat/{id}/tasks/{task_id}/cancel` carry the chat's own
  authority, like a decision from the chat page: no token, and only that chat's tasks. The chat's events
  feed (`/api/chat/{id}/events`) carries its task changes.

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
from signoff.core.task import Task, TaskState
from signoff.integrations.trust import chat_actor
from signoff.server.approvals import event_response
from signoff.server.auth import Handler, guarded
from signoff.server.feed import TaskFeed
from signoff.server.http import BadBody, ListQuery, error, json_response, read_body
from signoff.tasks import Tasks

MAX_BODY = 16 * 1024


class CancelBody(msgspec.Struct, forbid_unknown_fields=True):
    reason: str = ""
    by: str = ""


def task_event(task: Task) -> ServerSentEvent:
    return ServerSentEvent(msgspec.json.encode(task.public()).decode(), event="task")


class TasksAPI:
    def __init__(self, tasks: Tasks, token: str, feed: TaskFeed, *, ping: float = 15) -> None:
        self.tasks = tasks
        self.ledger = tasks.ledger
        self.token = token
        self.feed = feed
        self.ping = ping

    def routes(self) -> list[BaseRoute]:
        def guard(handler: Handler) -> Handler:
            return guarded(handler, self.token, self.ledger)

        return [
            Route("/api/tasks", guard(self.list), methods=["GET"]),
            Route("/api/tasks/feed", guard(self.follow), methods=["GET"]),
            Route("/api/tasks/{id}", guard(self.get), methods=["GET"]),
            Route("/api/tasks/{id}/cancel", guard(self.cancel), methods=["POST"]),
            Route("/api/chat/{chat}/tasks", self.chat_list, methods=["GET"]),
            Route("/api/chat/{chat}/tasks/{id}/cancel", self.chat_cancel, methods=["POST"]),
        ]

    async def list(self, request: Request) -> Response:
        try:
            query = ListQuery.of(request, TaskState)
        except BadBody as exc:
            return exc.response
        found = await self.ledger.tasks(chat_id=query.chat, state=query.state, limit=query.limit)
        return json_response({"tasks": [t.public() for t in found]})

    async def get(self, request: Request) -> Response:
        try:
            return json_response((await self.ledger.get_task(request.path_params["id"])).public())
        except NotFound as exc:
            return error(404, str(exc))

    async def cancel(self, request: Request) -> Response:
        try:
            empty = not await request.body()
            body = (
                CancelBody() if empty else await read_body(request, CancelBody, limit=MAX_BODY, what="cancel")
            )
        except BadBody as exc:
            return exc.response
        by = f"api:{body.by}" if body.by else "api"
        return await self._cancel(request.path_params["id"], by, body.reason, chat_id=None)

    async def follow(self, request: Request) -> Response:
        return event_response((task_event(t) async for t in self.feed.follow()), ping=self.ping)

    async def chat_list(self, request: Request) -> Response:
        found = await self.ledger.tasks(chat_id=request.path_params["chat"])
        return json_response({"tasks": [t.public() for t in found]})

    async def chat_cancel(self, request: Request) -> Response:
        chat_id = request.path_params["chat"]
        return await self._cancel(request.path_params["id"], chat_actor(chat_id), "", chat_id=chat_id)

    async def _cancel(self, task_id: str, by: str, reason: str, *, chat_id: str | None) -> Response:
        """A chat reaches only its own tasks: another chat's is as unknown as a missing one (and the
        attempt is audited)."""
        try:
            task = await self.ledger.get_task(task_id)
            if chat_id is not None and task.chat_id != chat_id:
                await self.ledger.record("refuse", task_id, by, why="cancel from another chat", chat=chat_id)
                raise NotFound(f"no task {task_id}")
            return json_response((await self.tasks.cancel(task_id, by, reason)).public())
        except NotFound as exc:
            return error(404, str(exc))
        except TaskFinished as exc:
            return error(409, str(exc), task=(await self.ledger.get_task(task_id)).public())
