"""`signals.wait` returns when the process gets SIGTERM (the signal really sent to this
process), so a service's `serve` can stop its parts in order and exit 0."""

from __future__ import annotations

import asyncio
import os
import signal

from coxswain_service import signals


async def test_wait_returns_on_sigterm() -> None:
    loop = asyncio.get_running_loop()
    waiting = asyncio.ensure_future(signals.wait())
    try:
        await asyncio.sleep(0)
        assert not waiting.done()
        os.kill(os.getpid(), signal.SIGTERM)
        await asyncio.wait_for(waiting, timeout=30)
    finally:
        for sig in signals.STOP_SIGNALS:
            loop.remove_signal_handler(sig)
