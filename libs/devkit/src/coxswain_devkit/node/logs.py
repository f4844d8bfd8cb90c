"""Container logs: what each process wrote, and the kubelet's log endpoint that serves it.

Each container instance (each restart is a new one) gets a `LogBuffer` of its stdout and stderr
lines, bounded in bytes so a chatty service cannot grow the agent without limit; the previous
instance's buffer is kept for `kubectl logs --previous`. `KubeletServer` answers the kubelet's
`GET /containerLogs/<namespace>/<pod>/<container>` with `tailLines`, `limitBytes`,
`sinceSeconds`, `timestamps`, `previous` and `follow` (which streams until the instance ends),
and the API emulator proxies `pods/<name>/log` to it, as kube-apiserver proxies to the kubelet
of the pod's node (see `apiserver/podlogs.py`).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import deque
from collections.abc import AsyncGenerator, Callable
from datetime import UTC, datetime

from aiohttp import web

__all__ = ["KubeletServer", "LogBuffer", "LIMIT_BYTES"]

LIMIT_BYTES = 4 * 1024 * 1024  # per container instance
Lookup = Callable[[str, str, str, bool], "LogBuffer | str"]  # a buffer, or why there is none


class LogBuffer:
    def __init__(self, limit_bytes: int = LIMIT_BYTES) -> None:
        self._lines: deque[tuple[float, bytes]] = deque()
        self._limit = limit_bytes
        self._size = 0
        self._dropped = 0  # lines dropped off the front: the sequence number of _lines[0]
        self._closed = False
        self._changed = asyncio.Event()

    def append(self, line: bytes) -> None:
        self._lines.append((time.time(), line))
        self._size += len(line)
        while self._size > self._limit and len(self._lines) > 1:
            self._size -= len(self._lines.popleft()[1])
            self._dropped += 1
        self._wake()

    def close(self) -> None:
        self._closed = True
        self._wake()

    def text(self) -> str:
        return b"".join(line for _, line in self._lines).decode(errors="replace")

    def _wake(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()

    def _start(self, tail: int | None, since: float | None) -> int:
        first = self._dropped
        if since is not None:
            first += sum(1 for ts, _ in self._lines if ts < since)
        if tail is not None:
            first = max(first, self._dropped + len(self._lines) - tail)
        return first

    async def lines(
        self, *, tail: int | None, since: float | None, follow: bool
    ) -> AsyncGenerator[tuple[float, bytes], None]:
        cursor = self._start(tail, since)
        while True:
            cursor = max(cursor, self._dropped)
            while cursor < self._dropped + len(self._lines):
                yield self._lines[cursor - self._dropped]
                cursor += 1
            if not follow or self._closed:
                return
            await self._changed.wait()


def _stamp(ts: float) -> bytes:
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ ").encode()


def _int(request: web.Request, name: str) -> int | None:
    value = request.query.get(name, "")
    return int(value) if value.lstrip("-").isdigit() else None


class KubeletServer:
    """The node's log endpoint; `port` is what the Node's `kubeletEndpoint` advertises."""

    def __init__(self, lookup: Lookup, *, host: str = "127.0.0.1", port: int = 0) -> None:
        self._lookup = lookup
        self.host = host
        self.port = port
        self._runner: web.AppRunner | None = None

    async def start(self) -> None:
        app = web.Application()
        app.router.add_get("/containerLogs/{namespace}/{pod}/{container}", self._logs)
        app.router.add_get("/healthz", self._healthz)
        runner = web.AppRunner(app, access_log=None, shutdown_timeout=1.0)
        await runner.setup()
        await web.TCPSite(runner, self.host, self.port).start()
        self._runner = runner
        self.port = runner.addresses[0][1]

    async def stop(self) -> None:
        runner, self._runner = self._runner, None
        if runner is not None:
            await runner.cleanup()

    async def _healthz(self, _: web.Request) -> web.Response:
        return web.Response(text="ok")

    async def _logs(self, request: web.Request) -> web.StreamResponse:
        m = request.match_info
        found = self._lookup(m["namespace"], m["pod"], m["container"], _flag(request, "previous"))
        if isinstance(found, str):
            return web.Response(status=400, text=found)
        response = web.StreamResponse(headers={"Content-Type": "text/plain"})
        await response.prepare(request)
        try:
            await _stream(found, request, response)
            await response.write_eof()
        except ConnectionResetError:
            pass  # the reader went away: nothing left to tell it
        return response


def _flag(request: web.Request, name: str) -> bool:
    return request.query.get(name, "") in ("true", "1")


async def _stream(buffer: LogBuffer, request: web.Request, response: web.StreamResponse) -> None:
    since_seconds = _int(request, "sinceSeconds")
    since = time.time() - since_seconds if since_seconds is not None else None
    stamps, budget = _flag(request, "timestamps"), _int(request, "limitBytes")
    tail, follow = _int(request, "tailLines"), _flag(request, "follow")
    async with contextlib.aclosing(buffer.lines(tail=tail, since=since, follow=follow)) as lines:
        async for ts, line in lines:
            chunk = _stamp(ts) + line if stamps else line
            if budget is not None:
                chunk, budget = chunk[:budget], budget - len(chunk)
            await response.write(chunk)
            if budget is not None and budget <= 0:
                return
