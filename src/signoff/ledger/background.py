"""One piece of work a part of the process runs beside its requests, in one task at a time.

The watcher, the outbox's settling writer, the channels' delivery, the feeds, the refusals' counter and the
stdio gateway's sweep each keep such a task: started when there is work and none runs, and on close
cancelled and awaited, so that nothing of it outlives what owns it. Those few lines were written once per
owner before.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any


class Background:
    def __init__(self, name: str) -> None:
        self.name = name
        self._task: asyncio.Task[None] | None = None

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()

    def ensure(self, work: Callable[[], Coroutine[Any, Any, None]]) -> None:
        """Run `work()` in a task, unless an earlier run still goes on."""
        if not self.running:
            self._task = asyncio.get_running_loop().create_task(work(), name=self.name)

    async def stop(self) -> None:
        """Cancel the run, if any, and wait until it has ended (whatever it raised)."""
        if (task := self._task) is not None:
            self._task = None
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
