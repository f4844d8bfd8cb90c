"""Faults a test can inject, to see its client survive what a real API server does to it.

`pause` holds every request (and every watch's next event) until `resume`; `fail_next` answers
the next N requests with 500 or 429 (with Retry-After); `latency` delays each request;
`close_watches` ends every open watch as an API server rollout would. Restarting the server
(keeping its objects, losing its watch window) is `ApiServer.restart`.
"""

from __future__ import annotations

import asyncio

from coxswain_devkit.apiserver import errors
from coxswain_devkit.apiserver.store import Store


class Faults:
    def __init__(self, store: Store) -> None:
        self._store = store
        self._running = asyncio.Event()
        self._running.set()
        self._failures = 0
        self._failure_code = 500
        self.latency = 0.0  # seconds added before each request is handled
        # Bumped by close_watches: a watch that started under an older epoch ends.
        self.watch_epoch = 0

    def pause(self) -> None:
        self._running.clear()

    def resume(self) -> None:
        self._running.set()
        self._store.notify()

    def fail_next(self, count: int, *, code: int = 500) -> None:
        if code not in (429, 500):
            raise ValueError(f"fail_next: code must be 429 or 500, not {code}")
        self._failures, self._failure_code = count, code

    def close_watches(self) -> None:
        self.watch_epoch += 1
        self._store.notify()

    async def running(self) -> None:
        """Return once the server is not paused."""
        await self._running.wait()

    async def before_request(self) -> None:
        await self._running.wait()
        if self.latency > 0:
            await asyncio.sleep(self.latency)
        if self._failures > 0:
            self._failures -= 1
            raise (
                errors.too_many_requests() if self._failure_code == 429 else errors.internal_error()
            )
