"""Background tasks: every one is started here, named, and watched for an unexpected end.

A task that crashes silently is the worst failure a long-running service has; here a crash is
logged with its traceback and the task's name, and a task that simply returns is logged too.
The sources and the leader elector start theirs here (the controller has no top-level helper
yet; this one can move up to `coxswain_controller.tasks` unchanged).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from typing import Any

log = logging.getLogger(__name__)

# Strong references: the loop keeps only weak ones, and a collected task stops silently.
_running: set[asyncio.Task[Any]] = set()


def spawn(coro: Coroutine[Any, Any, Any], *, name: str, may_end: bool = False) -> asyncio.Task[Any]:
    """Start a named task; a crash is logged, and so is an end unless `may_end` (a one-shot)."""
    task = asyncio.create_task(coro, name=name)
    _running.add(task)
    task.add_done_callback(lambda done: _finished(done, may_end=may_end))
    return task


def _finished(task: asyncio.Task[Any], *, may_end: bool) -> None:
    _running.discard(task)
    if task.cancelled():
        return
    fields = {"task": task.get_name()}
    exc = task.exception()
    if exc is not None:
        log.error("background task crashed", exc_info=exc, extra={"fields": fields})
    elif not may_end:
        log.warning("background task ended", extra={"fields": fields})


async def cancel(*tasks: asyncio.Task[Any]) -> None:
    """Cancel and wait for the tasks, so none outlives the service that started it."""
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
