"""Background tasks: every long-lived one is started here, named, and watched for its end.

asyncio keeps only weak references to tasks and reports a crashed task's exception only when
it is garbage collected, if ever (kopf's guarded tasks answer the same problem). A task started
with `spawn` is held until it ends; a crash is logged with its traceback and the task's name,
and a task that returns is logged too unless returning is normal for it (`may_end`: a one-shot,
or a per-stream reader that ends with its stream).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from typing import Any

__all__ = ["spawn", "cancel", "running"]

log = logging.getLogger(__name__)

# Strong references: the loop keeps only weak ones, and a collected task stops silently.
_running: set[asyncio.Task[Any]] = set()


def spawn(coro: Coroutine[Any, Any, Any], *, name: str, may_end: bool = False) -> asyncio.Task[Any]:
    """Start `coro` on the running loop as a task called `name`."""
    task = asyncio.get_running_loop().create_task(coro, name=name)
    _running.add(task)
    task.add_done_callback(lambda done: _finished(done, may_end=may_end))
    return task


def _finished(task: asyncio.Task[Any], *, may_end: bool) -> None:
    _running.discard(task)
    fields = {"task": task.get_name()}
    if task.cancelled():
        log.debug("background task cancelled", extra={"fields": fields})
    elif (exc := task.exception()) is not None:
        log.error("background task crashed", exc_info=exc, extra={"fields": fields})
    elif may_end:
        log.debug("background task ended", extra={"fields": fields})
    else:
        log.warning("background task ended unexpectedly", extra={"fields": fields})


async def cancel(*tasks: asyncio.Task[Any]) -> None:
    """Cancel the tasks and wait for them, so none outlives what started it."""
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


def running() -> frozenset[str]:
    """The names of the tasks `spawn` started that have not ended (for tests and health)."""
    return frozenset(task.get_name() for task in _running)
