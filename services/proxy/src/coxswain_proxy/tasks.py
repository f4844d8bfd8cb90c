"""Background tasks, all started through `spawn()`: named, referenced, and never silent.

asyncio keeps only weak references to tasks and reports a crashed task's exception only when it
is garbage collected, if ever. Every long-lived task of the proxy goes through here instead, so
each has a name in logs and a crash or an unexpected end is logged when it happens.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from typing import Any

log = logging.getLogger(__name__)

_running: set[asyncio.Task[Any]] = set()


def spawn(coro: Coroutine[Any, Any, Any], name: str, *, may_end: bool = False) -> asyncio.Task[Any]:
    """Start `coro` as a task called `name`. `may_end`: returning is normal, not worth a warning
    (a per-stream reader ends with its stream; the discovery client itself should not end)."""
    task = asyncio.get_running_loop().create_task(coro, name=name)
    _running.add(task)
    task.add_done_callback(lambda t: _finished(t, may_end))
    return task


def _finished(task: asyncio.Task[Any], may_end: bool) -> None:
    _running.discard(task)
    fields = {"task": task.get_name()}
    if task.cancelled():
        log.debug("task cancelled", extra={"fields": fields})
    elif (exc := task.exception()) is not None:
        log.error("task crashed", exc_info=exc, extra={"fields": fields})
    elif may_end:
        log.debug("task ended", extra={"fields": fields})
    else:
        log.warning("task ended unexpectedly", extra={"fields": fields})
