"""Requests of every kind move through the phases `phases.TRANSITIONS` lists, and only those.

Each test sends real requests through a data plane on loopback (real sockets, the devkit echo
backend or a purpose-built one) whose request cycles record each phase they enter: the cycle is
the production class with one thing added, a `phase` that also writes itself down, so nothing
it does changes. The test asserts on the path its request took, which is the table's design
made concrete: forwarded, answered here, retried at once, after a backoff or on a status, an
attempt timed out and retried (at once or after a backoff), timed out, broken off, tunneled,
abandoned. Leaves out what each answer holds (http11_test and the
RFC tests check the bytes).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import socket
import struct
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, ClassVar

import pytest

from coxswain_devkit.echo import EchoServer
from coxswain_proxy.dataplane import testing as t
from coxswain_proxy.dataplane.http import phases, request_cycle
from coxswain_proxy.dataplane.http.phases import (
    ANSWERED,
    BACKOFF,
    CLOSED,
    CONNECTING,
    DISCARDING,
    DONE,
    RESPONDING,
    SENT,
    TUNNEL,
    WAITING,
)
from coxswain_routing import Retry, Timeouts

# The slot's own descriptor, which the recording `phase` reads and writes through.
_SLOT: Any = request_cycle.RequestCycle.__dict__["phase"]


class Recorded(request_cycle.RequestCycle):
    """The production cycle, writing down each phase it enters."""

    __slots__ = ()
    paths: ClassVar[dict[request_cycle.RequestCycle, list[int]]] = {}
    moved: ClassVar[asyncio.Event] = asyncio.Event()

    @property
    def phase(self) -> int:
        value: int = _SLOT.__get__(self)
        return value

    @phase.setter
    def phase(self, new: int) -> None:
        Recorded.paths.setdefault(self, []).append(new)
        _SLOT.__set__(self, new)
        Recorded.moved.set()


@pytest.fixture(autouse=True)
def recorded(monkeypatch: pytest.MonkeyPatch) -> dict[request_cycle.RequestCycle, list[int]]:
    Recorded.paths, Recorded.moved = {}, asyncio.Event()
    monkeypatch.setattr(request_cycle, "RequestCycle", Recorded)
    return Recorded.paths


def taken() -> list[list[int]]:
    """Each request's path so far, in the order the requests came."""
    return list(Recorded.paths.values())


def names(path: list[int]) -> list[str]:
    return [phases.NAMES[p] for p in path]


def test_every_move_of_the_table_starts_from_a_phase_that_can_be_left() -> None:
    finals = {DONE, TUNNEL, CLOSED}
    for phase, moves in phases.TRANSITIONS.items():
        assert (phase in finals) == (not moves), phases.NAMES[phase]
        if phase not in finals:
            assert CLOSED in moves, f"{phases.NAMES[phase]}: the client may always leave"
    assert set(phases.TRANSITIONS) == set(range(len(phases.NAMES)))


def assert_lawful(path: list[int]) -> None:
    assert path[0] == WAITING
    for before, after in itertools.pairwise(path):
        assert after in phases.TRANSITIONS[before], names(path)


# ------------------------------------------------------------------------------ scenarios


async def test_a_forwarded_request() -> None:
    async with EchoServer() as echo, t.running(_to("echo", echo.port)) as plane:
        assert (await t.get(t.actual(plane))).status == 200
    (path,) = taken()
    assert_lawful(path)
    assert path == [WAITING, CONNECTING, SENT, RESPONDING, ANSWERED, DONE]


async def test_a_request_answered_here() -> None:
    async with EchoServer() as echo, t.running(_to("echo", echo.port)) as plane:
        assert (await t.get(t.actual(plane), host="elsewhere.example.com")).status == 404
    (path,) = taken()
    assert_lawful(path)
    assert path == [WAITING, ANSWERED, DONE]


async def test_pipelined_requests_each_wait_their_turn() -> None:
    async with (
        EchoServer() as echo,
        t.running(_to("echo", echo.port)) as plane,
        t.client(t.actual(plane)) as c,
    ):
        c.send(b"GET /a HTTP/1.1\r\nHost: example.com\r\n\r\n" * 2)
        assert [r.status for r in await c.responses(2)] == [200, 200]
    for path in taken():
        assert_lawful(path)
        assert path == [WAITING, CONNECTING, SENT, RESPONDING, ANSWERED, DONE]


async def test_a_connect_failure_retried_at_once() -> None:
    async with EchoServer() as echo:
        dead = await _dead_port()
        resources = _to("raw", dead, echo.port, retry=Retry(attempts=1))
        async with t.running(resources) as plane:
            assert (await t.get(t.actual(plane))).status == 200
    (path,) = taken()
    assert_lawful(path)
    assert path == [WAITING, CONNECTING, CONNECTING, SENT, RESPONDING, ANSWERED, DONE]


async def test_a_connect_failure_retried_after_a_backoff() -> None:
    async with EchoServer() as echo:
        dead = await _dead_port()
        resources = _to("raw", dead, echo.port, retry=Retry(attempts=1, backoff_ms=10))
        async with t.running(resources) as plane:
            assert (await t.get(t.actual(plane))).status == 200
    (path,) = taken()
    assert_lawful(path)
    assert path == [WAITING, CONNECTING, BACKOFF, CONNECTING, SENT, RESPONDING, ANSWERED, DONE]


async def test_a_connect_failure_not_retried() -> None:
    dead = await _dead_port()
    async with t.running(_to("raw", dead)) as plane:
        assert (await t.get(t.actual(plane))).status == 503
    (path,) = taken()
    assert_lawful(path)
    assert path == [WAITING, CONNECTING, ANSWERED, DONE]


async def test_a_status_retried_on() -> None:
    calls = 0

    async def flaky(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal calls
        while await _read_head(reader):
            calls += 1
            status = b"503 Unavailable" if calls == 1 else b"200 OK"
            writer.write(b"HTTP/1.1 " + status + b"\r\nContent-Length: 2\r\n\r\nok")
            await writer.drain()

    async with _backend(flaky) as port:
        resources = _to("raw", port, retry=Retry(attempts=2, codes=(503,)))
        async with t.running(resources) as plane:
            assert (await t.get(t.actual(plane))).status == 200
    (path,) = taken()
    assert_lawful(path)
    assert path == [
        WAITING, CONNECTING, SENT, DISCARDING, CONNECTING, SENT, RESPONDING, ANSWERED, DONE,
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("backoff_ms", "expected"),
    [
        pytest.param(
            0,
            [WAITING, CONNECTING, SENT, CONNECTING, SENT, RESPONDING, ANSWERED, DONE],
            id="at-once",
        ),
        pytest.param(
            10,
            [WAITING, CONNECTING, SENT, BACKOFF, CONNECTING, SENT, RESPONDING, ANSWERED, DONE],
            id="after-a-backoff",
        ),
    ],
)
async def test_an_attempt_that_timed_out_retried(backoff_ms: int, expected: list[int]) -> None:
    calls = 0

    async def first_silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal calls
        while await _read_head(reader):
            calls += 1
            if calls == 1:
                await reader.read()  # never answered: the attempt's time runs out
                return
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
            await writer.drain()

    retry = Retry(attempts=1, backoff_ms=backoff_ms)
    async with _backend(first_silent) as port:
        resources = _to("raw", port, retry=retry, timeouts=Timeouts(backend_request_ms=200))
        async with t.running(resources) as plane:
            assert (await t.get(t.actual(plane))).status == 200
    (path,) = taken()
    assert_lawful(path)
    assert path == expected


async def test_a_backend_that_never_answers() -> None:
    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read()

    async with _backend(silent) as port:
        resources = _to("raw", port, timeouts=Timeouts(request_ms=100))
        async with t.running(resources) as plane:
            assert (await t.get(t.actual(plane))).status == 504
    (path,) = taken()
    assert_lawful(path)
    assert path == [WAITING, CONNECTING, SENT, ANSWERED, DONE]


async def test_a_response_that_breaks_off() -> None:
    async def reset(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await _read_head(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\npartial")
        await writer.drain()
        writer.transport.abort()

    async with (
        _backend(reset) as port,
        t.running(_to("raw", port)) as plane,
        t.client(t.actual(plane)) as c,
    ):
        c.send(b"GET / HTTP/1.1\r\nHost: example.com\r\n\r\n")
        assert (await c.closed()).endswith(b"partial")
    (path,) = taken()
    assert_lawful(path)
    assert path == [WAITING, CONNECTING, SENT, RESPONDING, CLOSED]


async def test_an_upgrade_becomes_a_tunnel() -> None:
    import aiohttp

    async with (
        EchoServer() as echo,
        t.running(_to("echo", echo.port)) as plane,
        aiohttp.ClientSession() as session,
    ):
        url = f"http://127.0.0.1:{t.actual(plane)}/ws"
        async with session.ws_connect(url, headers={"Host": "example.com"}) as ws:
            await ws.send_str("hello")
            assert (await ws.receive(timeout=10)).data == "hello"
    (path,) = taken()
    assert_lawful(path)
    assert path == [WAITING, CONNECTING, SENT, RESPONDING, TUNNEL]


async def test_a_client_that_leaves_before_the_answer() -> None:
    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read()

    async with _backend(silent) as port, t.running(_to("raw", port)) as plane:
        c = await t.Client.open(t.actual(plane))
        c.send(b"GET / HTTP/1.1\r\nHost: example.com\r\n\r\n")
        await _until(lambda: bool(taken()) and taken()[0][-1] == SENT)
        # Gone at once, with a reset: a FIN alone is a half-close, still owed its answer.
        sock = c.writer.get_extra_info("socket")
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        c.writer.transport.abort()
        await _until(lambda: taken()[0][-1] == CLOSED)
    (path,) = taken()
    assert_lawful(path)
    assert path == [WAITING, CONNECTING, SENT, CLOSED]


# ------------------------------------------------------------------------------ helpers

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


def _to(
    name: str,
    *ports: int,
    retry: Retry = t.NO_RETRY,
    timeouts: Timeouts = t.NO_TIMEOUTS,
) -> list[t.Resource]:
    r = t.rule("r", t.backend(name), retry=retry, timeouts=timeouts)
    return [t.HTTP_LISTENER, t.endpoints(name, *ports), t.routes("example.com", r)]


@contextlib.asynccontextmanager
async def _backend(handler: Handler) -> AsyncIterator[int]:
    tasks: set[asyncio.Task[None]] = set()

    async def guarded(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        tasks.add(task)
        try:
            await handler(reader, writer)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(guarded, "127.0.0.1", 0)
    try:
        yield server.sockets[0].getsockname()[1]
    finally:
        server.close()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await server.wait_closed()


async def _read_head(reader: asyncio.StreamReader) -> bytes:
    try:
        return await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError:
        return b""


async def _dead_port() -> int:
    server = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
    port: int = server.sockets[0].getsockname()[1]
    server.close()
    await server.wait_closed()
    return port


async def _until(condition: Callable[[], bool]) -> None:
    """Wait for cycles to move until `condition` holds."""
    async with asyncio.timeout(10):
        while not condition():
            Recorded.moved.clear()
            await Recorded.moved.wait()
