"""Running until the process is asked to stop: SIGTERM (Kubernetes) or SIGINT (Ctrl-C).

A service's `serve` awaits `wait()` after starting its work, then stops each part in order and
returns, so the exit status is 0 on a requested stop. `on_stop` is for a server that owns its
loop's run (uvicorn), which only needs telling.
"""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Callable

__all__ = ["STOP_SIGNALS", "on_stop", "wait"]

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


def on_stop(callback: Callable[[], object]) -> None:
    """Call `callback` on the running loop when a stop signal arrives."""
    loop = asyncio.get_running_loop()
    for sig in STOP_SIGNALS:
        loop.add_signal_handler(sig, callback)


async def wait() -> None:
    """Until a stop signal arrives."""
    stop = asyncio.Event()
    on_stop(stop.set)
    await stop.wait()
