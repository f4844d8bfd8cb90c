"""Faults a test can inject, to see its client survive what a real API server does to it.

`pause` holds every request (and every watch's next event) until `resume`; `fail_next` answers
the next N requests with 500 or 429 (with Retry-After); `latency` delays each request;
`close_watches` ends every open watch as an API server rollout would; `wait_held(n)` and
`wait_watches_opened(n)` let a test wait until its client's request is held or its watch open.
Restarting the server (keeping its objects, losing its watch window) is `ApiServer.restart`.
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
        # Requests held by `pause` right now, so a test can wait until its request is held.
        self.held = 0
        self._held_changed = asyncio.Condition()
        # Watch streams opened so far and open now, so a test can wait until its client watches.
        self.watches_opened = 0
        self.watching = 0
        self._watching_changed = asyncio.Condition()

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

    async def _hold(self) -> None:
        async with self._held_changed:
            self.held += 1
            self._held_changed.notify_all()
        try:
            await self._running.wait()
        finally:
            self.held -= 1

    async def running(self) -> None:
        """Return once the server is not paused."""
        await self._running.wait()

    async def wait_held(self, count: int) -> None:
        """Return once `count` requests are held by `pause`."""
        async with self._held_changed:
            await self._held_changed.wait_for(lambda: self.held >= count)

    async def watch_opened(self, delta: int = 1) -> None:
        """A watch stream opened (1) or ended (-1)."""
        async with self._watching_changed:
            self.watching += delta
            self.watches_opened += max(delta, 0)
            self._watching_changed.notify_all()

    async def wait_watches_opened(self, total: int) -> None:
        """Return once `total` watches have been opened since the server started."""
        async with self._watching_changed:
            await self._watching_changed.wait_for(lambda: self.watches_opened >= total)

    async def before_request(self) -> None:
        if not self._running.is_set():
            await self._hold()
        if self.latency > 0:
            await asyncio.sleep(self.latency)
        if self._failures > 0:
            self._failures -= 1
            raise (
                errors.too_many_requests() if self._failure_code == 429 else errors.internal_error()
            )
