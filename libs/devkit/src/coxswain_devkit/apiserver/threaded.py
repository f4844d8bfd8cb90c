"""The emulator on its own event loop thread, for tests that use the blocking `kubernetes` client.

The client blocks its caller, so it cannot share a loop with the server it calls. Everything the
test does to the server itself (faults, restart, seeding) goes through `call`, which runs on the
server's loop and hands back the result, so the server's state is only touched from its thread.
"""

from __future__ import annotations

import asyncio
import inspect
import threading
from collections.abc import Awaitable, Callable
from types import TracebackType
from typing import Any, TypeVar, overload

from coxswain_devkit.apiserver.server import ApiServer

T = TypeVar("T")

START_TIMEOUT = 30.0


class ThreadedApiServer:
    def __init__(self, **settings: Any) -> None:
        self._settings = settings
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name="devkit-apiserver", daemon=True
        )
        self._server: ApiServer | None = None

    @property
    def server(self) -> ApiServer:
        if self._server is None:
            raise RuntimeError("the API server is not running")
        return self._server

    @property
    def url(self) -> str:
        return self.server.url

    def start(self) -> ThreadedApiServer:
        self._thread.start()
        self._server = self._run(self._start())
        return self

    async def _start(self) -> ApiServer:
        return await ApiServer(**self._settings).start()

    @overload
    def call(self, fn: Callable[[ApiServer], Awaitable[T]]) -> T: ...

    @overload
    def call(self, fn: Callable[[ApiServer], T]) -> T: ...

    def call(self, fn: Callable[[ApiServer], Any]) -> Any:
        """Run `fn(server)` on the server's loop; a coroutine it returns is awaited there."""

        async def run() -> Any:
            result: Any = fn(self.server)
            return await result if inspect.isawaitable(result) else result

        return self._run(run())

    def stop(self) -> None:
        if self._server is not None:
            self._run(self._server.stop())
            self._server = None
        if self._thread.is_alive():
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join()
        self._loop.close()

    def _run(self, coro: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(START_TIMEOUT)

    def __enter__(self) -> ThreadedApiServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
