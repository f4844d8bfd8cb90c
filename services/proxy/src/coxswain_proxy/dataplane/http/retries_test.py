"""Retries and timeouts through real sockets: what is tried again, and what a client gets.

Each test runs a data plane on loopback in front of a scripted backend on 127.0.0.1 (port 0)
that counts the requests it reads and meets each as its script says: resets the connection
(RST), closes it (FIN), never answers, breaks off mid-response, or answers. Covers, after the
Gateway API's HTTPRouteRetry and its conformance cases (HTTPRouteRetryConnectionError,
HTTPRouteRetryWithTimeouts): a connection failure of every kind (refused, reset, closed, before
the response) is retried when a retry stanza is set and answered 503 once the attempts are used
up, 503 with no stanza too; `attempts` counts the attempts after the first; an attempt that runs
out of `timeouts.backendRequest` is retried and a later one's answer reaches the client, and
504 when every attempt or `timeouts.request` ran out; a backendRequest timeout bounds the whole
response; a retried status's response does not leave its attempt's timer behind; only an
idempotent request whose body was kept whole is repeated, with that body and its trailer
fields; a response that broke
off is never retried; HTTP/2 clients get the same, and gRPC requests the grpc-status of each
answer.

Counts, not durations, are asserted: an attempt that times out is one whose backend never
answers. Leaves out the phases each path moves through (phases_test), the pool's side of an
abandoned attempt (upstream/connector_test) and the controller's lowering of `retry` (the
controller's golden cases).
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct
from collections.abc import AsyncIterator

import pytest

from coxswain_proxy.dataplane import testing as t
from coxswain_proxy.dataplane.http2 import h2client
from coxswain_proxy.dataplane.runtime import Config
from coxswain_routing import Retry, Timeouts

OK = "ok"  # answer 200, with the body received
STATUS_503 = "503"  # answer 503 Unavailable
RESET = "reset"  # read the request, then reset the connection (RST)
CLOSE = "close"  # read the request, then close the connection (FIN)
SILENT = "silent"  # read the request, never answer
BREAK = "break"  # answer a head and part of the body, then reset
STALL = "stall"  # answer a head and part of the body, then nothing more
SLOW_503 = "slow-503"  # answer 503 after `ScriptedBackend.delay` seconds
SLOW_OK = "slow-ok"  # answer 200 after `ScriptedBackend.delay` seconds

PARTIAL = b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\npartial"


class ScriptedBackend:
    """Meets the n-th request it reads as `script[n]` says (the last entry: every later one)."""

    def __init__(self, *script: str, delay: float = 0.0) -> None:
        self.script = script
        self.delay = delay
        self.requests: list[tuple[bytes, bytes]] = []  # (head, body) of each request read
        self.port = 0

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            head = await _read_head(reader)
            if not head:
                return
            body = await _read_body(reader, head)
            self.requests.append((head, body))
            action = self.script[min(len(self.requests), len(self.script)) - 1]
            if not await self._meet(action, body, reader, writer):
                return

    async def _meet(
        self, action: str, body: bytes, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> bool:
        """Meet one request; False: the connection is done with."""
        if action in (SLOW_503, SLOW_OK):
            await asyncio.sleep(self.delay)
        if action in (OK, SLOW_OK):
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%b" % (len(body), body))
        elif action in (STATUS_503, SLOW_503):
            writer.write(b"HTTP/1.1 503 Unavailable\r\nContent-Length: 2\r\n\r\nno")
        elif action in (RESET, BREAK):
            if action == BREAK:
                writer.write(PARTIAL)
                await writer.drain()
            _reset(writer)
            return False
        elif action == CLOSE:
            writer.close()
            return False
        else:  # SILENT, STALL: until the proxy gives up on it
            if action == STALL:
                writer.write(PARTIAL)
            await reader.read()
            return False
        await writer.drain()
        return True


def _reset(writer: asyncio.StreamWriter) -> None:
    sock = writer.get_extra_info("socket")
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.transport.abort()


async def _read_head(reader: asyncio.StreamReader) -> bytes:
    try:
        return await reader.readuntil(b"\r\n\r\n")
    except (asyncio.IncompleteReadError, ConnectionError):
        return b""


async def _read_body(reader: asyncio.StreamReader, head: bytes) -> bytes:
    lowered = head.lower()
    if b"transfer-encoding: chunked" in lowered:
        # The chunked body, framing and all, up to the last chunk and its trailer section.
        body = await reader.readuntil(b"0\r\n")
        while (line := await reader.readuntil(b"\r\n")) != b"\r\n":
            body += line
        return body + b"\r\n"
    for line in lowered.split(b"\r\n"):
        if line.startswith(b"content-length:"):
            return await reader.readexactly(int(line.split(b":")[1]))
    return b""


@contextlib.asynccontextmanager
async def backend(scripted: ScriptedBackend) -> AsyncIterator[ScriptedBackend]:
    tasks: set[asyncio.Task[None]] = set()

    async def guarded(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        tasks.add(task)
        try:
            await scripted.serve(reader, writer)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(guarded, "127.0.0.1", 0)
    scripted.port = server.sockets[0].getsockname()[1]
    try:
        yield scripted
    finally:
        server.close()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await server.wait_closed()


@contextlib.asynccontextmanager
async def plane(
    *ports: int,
    retry: Retry = t.NO_RETRY,
    timeouts: Timeouts = t.NO_TIMEOUTS,
    config: Config | None = None,
) -> AsyncIterator[int]:
    r = t.rule("r", t.backend("scripted"), retry=retry, timeouts=timeouts)
    resources: list[t.Resource] = [
        t.HTTP_LISTENER,
        t.endpoints("scripted", *ports),
        t.routes("example.com", r),
    ]
    async with t.running(resources, config) as running:
        yield t.actual(running)


async def _dead_port() -> int:
    server = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
    port: int = server.sockets[0].getsockname()[1]
    server.close()
    await server.wait_closed()
    return port


async def request(
    port: int, method: str = "GET", body: bytes = b"", chunked: bool = False, trailer: bytes = b""
) -> t.Response:
    async with t.client(port) as c:
        if chunked:
            framing = "Transfer-Encoding: chunked\r\n"
            sent = b"".join(b"%x\r\n%b\r\n" % (1, body[i : i + 1]) for i in range(len(body)))
            sent += b"0\r\n" + trailer + b"\r\n"
        else:
            framing = f"Content-Length: {len(body)}\r\n" if body or method != "GET" else ""
            sent = body
        c.send(f"{method} / HTTP/1.1\r\nHost: example.com\r\n{framing}\r\n".encode() + sent)
        return await c.response()


# ------------------------------------------------------------------------------ connection failures


@pytest.mark.parametrize(
    ("script", "attempts", "status", "seen"),
    [
        # HTTPRouteRetryConnectionError: attempts 3, the backend recovers after 2 failures ...
        pytest.param((RESET, RESET, OK), 3, 200, 3, id="resets-then-answered"),
        # ... and after 4, past the attempts: "500 or 503".
        pytest.param((RESET,), 3, 503, 4, id="every-attempt-reset-503"),
        pytest.param((CLOSE, OK), 1, 200, 2, id="closed-then-answered"),
        pytest.param((CLOSE,), 2, 503, 3, id="every-attempt-closed-503"),
        pytest.param((RESET,), 0, 503, 1, id="no-stanza-reset-503"),
        pytest.param((CLOSE,), 0, 503, 1, id="no-stanza-closed-503"),
    ],
)
async def test_connection_lost_before_the_response(
    script: tuple[str, ...], attempts: int, status: int, seen: int
) -> None:
    async with (
        backend(ScriptedBackend(*script)) as b,
        plane(b.port, retry=Retry(attempts=attempts)) as p,
    ):
        response = await request(p)
    assert response.status == status
    assert len(b.requests) == seen


async def test_every_connect_refused_is_retried_then_503() -> None:
    dead = [await _dead_port() for _ in range(3)]
    async with plane(*dead, retry=Retry(attempts=2)) as p:
        response = await request(p)
    assert response.status == 503
    assert b"connect to" in response.body


async def test_a_refused_endpoint_is_skipped_for_a_live_one() -> None:
    dead = await _dead_port()
    async with backend(ScriptedBackend(OK)) as b, plane(dead, b.port, retry=Retry(attempts=1)) as p:
        statuses = [(await request(p)).status for _ in range(4)]
    assert statuses == [200] * 4


async def test_a_response_that_broke_off_is_not_retried() -> None:
    async with (
        backend(ScriptedBackend(BREAK, OK)) as b,
        plane(b.port, retry=Retry(attempts=3)) as p,
        t.client(p) as c,
    ):
        c.send(b"GET / HTTP/1.1\r\nHost: example.com\r\n\r\n")
        data = await c.closed()
    assert data.startswith(b"HTTP/1.1 200") and data.endswith(b"partial")
    assert len(b.requests) == 1


async def test_a_retried_status_is_passed_on_when_the_attempts_are_used_up() -> None:
    async with (
        backend(ScriptedBackend(STATUS_503)) as b,
        plane(b.port, retry=Retry(attempts=2, codes=(503,))) as p,
    ):
        response = await request(p)
    assert (response.status, response.body) == (503, b"no")
    assert len(b.requests) == 3


# ------------------------------------------------------------------------------ timeouts


@pytest.mark.parametrize(
    ("script", "status", "seen"),
    [
        # HTTPRouteRetryWithTimeouts: attempts 2, the first two attempts outlast backendRequest.
        pytest.param((SILENT, SILENT, OK), 200, 3, id="timed-out-twice-then-answered"),
        pytest.param((SILENT,), 504, 3, id="every-attempt-timed-out-504"),
        pytest.param((SILENT, RESET), 503, 3, id="the-last-failure-answers"),
    ],
)
async def test_a_backend_request_timeout_is_retried(
    script: tuple[str, ...], status: int, seen: int
) -> None:
    timeouts = Timeouts(request_ms=30_000, backend_request_ms=300)
    async with (
        backend(ScriptedBackend(*script)) as b,
        plane(b.port, retry=Retry(attempts=2), timeouts=timeouts) as p,
    ):
        response = await request(p)
    assert response.status == status
    assert len(b.requests) == seen


async def test_a_backend_request_timeout_with_no_stanza_is_504_at_once() -> None:
    async with (
        backend(ScriptedBackend(SILENT, OK)) as b,
        plane(b.port, timeouts=Timeouts(backend_request_ms=200)) as p,
    ):
        assert (await request(p)).status == 504
    assert len(b.requests) == 1


async def test_the_request_timeout_ends_the_retries() -> None:
    # Ten attempts allowed of 300 ms each, within 800 ms: the request bound ends them. Timers
    # fire in the order of their deadlines, so no fourth attempt can start before it.
    timeouts = Timeouts(request_ms=800, backend_request_ms=300)
    async with (
        backend(ScriptedBackend(SILENT)) as b,
        plane(b.port, retry=Retry(attempts=10), timeouts=timeouts) as p,
    ):
        assert (await request(p)).status == 504
    assert 1 <= len(b.requests) <= 3


async def test_the_request_timeout_ends_a_backoff() -> None:
    timeouts = Timeouts(request_ms=300)
    async with (
        backend(ScriptedBackend(RESET, OK)) as b,
        plane(b.port, retry=Retry(attempts=1, backoff_ms=60_000), timeouts=timeouts) as p,
    ):
        assert (await request(p)).status == 504
    assert len(b.requests) == 1


async def test_a_backend_request_timeout_bounds_the_whole_response() -> None:
    async with (
        backend(ScriptedBackend(STALL)) as b,
        plane(b.port, retry=Retry(attempts=2), timeouts=Timeouts(backend_request_ms=300)) as p,
        t.client(p) as c,
    ):
        c.send(b"GET / HTTP/1.1\r\nHost: example.com\r\n\r\n")
        data = await c.closed()
    assert data.startswith(b"HTTP/1.1 200") and data.endswith(b"partial")  # cut short
    assert len(b.requests) == 1  # the head was out: not retried


async def test_a_discarded_attempt_leaves_no_timer_behind() -> None:
    # Each answer takes 0.6 s of a 1 s backendRequest: the retry's answer comes 1.2 s after the
    # first attempt began, inside its own second, and is the one the client gets.
    timeouts = Timeouts(backend_request_ms=1000)
    async with (
        backend(ScriptedBackend(SLOW_503, SLOW_OK, delay=0.6)) as b,
        plane(b.port, retry=Retry(attempts=1, codes=(503,)), timeouts=timeouts) as p,
    ):
        assert (await request(p)).status == 200
    assert len(b.requests) == 2


# ------------------------------------------------------------------------------ what is repeated


@pytest.mark.parametrize(
    ("method", "chunked", "seen", "status"),
    [
        pytest.param("PUT", False, 2, 200, id="put-with-length-repeated"),
        pytest.param("PUT", True, 2, 200, id="put-chunked-repeated"),
        pytest.param("POST", False, 1, 503, id="post-not-repeated"),
    ],
)
async def test_a_body_is_sent_again_whole(
    method: str, chunked: bool, seen: int, status: int
) -> None:
    async with (
        backend(ScriptedBackend(RESET, OK)) as b,
        plane(b.port, retry=Retry(attempts=2)) as p,
    ):
        response = await request(p, method, b"payload", chunked=chunked)
    assert response.status == status
    assert len(b.requests) == seen
    bodies = {body for _, body in b.requests}
    assert len(bodies) == 1  # every attempt carried the same body
    if status == 200:
        assert response.body == bodies.pop()


async def test_request_trailers_are_sent_again_with_the_body() -> None:
    async with (
        backend(ScriptedBackend(RESET, OK)) as b,
        plane(b.port, retry=Retry(attempts=1)) as p,
    ):
        sent = b"x-checksum: 5d41402a\r\n"
        response = await request(p, "PUT", b"payload", chunked=True, trailer=sent)
    assert response.status == 200 and len(b.requests) == 2
    for _, body in b.requests:
        assert body.endswith(b"0\r\nx-checksum: 5d41402a\r\n\r\n")


@pytest.mark.parametrize(
    "chunked", [pytest.param(False, id="one-piece"), pytest.param(True, id="byte-by-byte")]
)
async def test_a_body_too_long_to_keep_is_not_sent_again(chunked: bool) -> None:
    async with (
        backend(ScriptedBackend(RESET, OK)) as b,
        plane(b.port, retry=Retry(attempts=2), config=Config(replay_limit=4)) as p,
    ):
        response = await request(p, "PUT", b"longer than four", chunked=chunked)
    assert response.status == 503
    assert len(b.requests) == 1


# ------------------------------------------------------------------------------ HTTP/2 and gRPC


async def test_http2_streams_are_retried_alike() -> None:
    async with (
        backend(ScriptedBackend(RESET, OK, RESET)) as b,
        plane(b.port, retry=Retry(attempts=1)) as p,
        h2client.connected(p) as c,
    ):
        first = await c.get("/")
        second = await c.get("/")
    assert (first.status, second.status) == (200, 503)
    assert len(b.requests) == 4


async def test_an_http2_requests_trailers_are_sent_again_with_its_body() -> None:
    async with (
        backend(ScriptedBackend(RESET, OK)) as b,
        plane(b.port, retry=Retry(attempts=1)) as p,
        h2client.connected(p) as c,
    ):
        stream = c.request("/", method="PUT", end=False)
        c.h2.send_data(stream, b"payload")
        c.send_trailers(stream, [(b"x-checksum", b"5d41402a")])
        answer = await c.answer(stream)
    assert answer.status == 200 and len(b.requests) == 2
    for _, body in b.requests:
        assert body.endswith(b"0\r\nx-checksum: 5d41402a\r\n\r\n")


@pytest.mark.parametrize(
    ("script", "timeouts", "code"),
    [
        pytest.param((RESET,), t.NO_TIMEOUTS, b"14", id="connection-failure-unavailable"),
        pytest.param((SILENT,), Timeouts(backend_request_ms=200), b"4", id="timeout-deadline"),
    ],
)
async def test_grpc_answers_carry_the_grpc_status(
    script: tuple[str, ...], timeouts: Timeouts, code: bytes
) -> None:
    grpc = [(b"content-type", b"application/grpc"), (b"te", b"trailers")]
    async with (
        backend(ScriptedBackend(*script)) as b,
        plane(b.port, retry=Retry(attempts=2), timeouts=timeouts) as p,
        h2client.connected(p) as c,
    ):
        answer = await c.answer(c.request("/echo.Echo/Unary", method="POST", extra=grpc, body=b""))
    assert answer.status == 200
    assert answer.header(b"grpc-status") == code
    assert len(b.requests) == 1  # a gRPC call is a POST: never repeated
