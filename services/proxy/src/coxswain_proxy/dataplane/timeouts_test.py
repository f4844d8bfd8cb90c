"""Slow and idle clients are ended cleanly, each bound at its default and no sooner.

Covers: a request head late by `header_timeout` gets 408 then the close; a request body that
stalls for `body_timeout` gets 408; a connection with no request for `keepalive_timeout`
(before its first request too) is closed without a byte; an HTTPS client whose TLS handshake
(silence, or half a ClientHello) takes longer than `handshake_timeout` is closed; none fires a
second early; a slow response, a pipelined request waiting its turn and an Upgrade tunnel are
not idleness; each ending is counted in `coxswain_proxy_client_timeouts_total` by kind; worker
stats merge the counts; the defaults are no laxer than nginx's 60 s.

The clock is fast-forwarded: a test skips time by calling the data plane's sweep with a later
loop time (and giving the connections the same clock), never by waiting for it. Leaves out the
once-a-second sweeper task (http/http11_test's slowloris test runs it on the real clock) and the
flags (coxswain_proxy/cli_test.py).
"""

from __future__ import annotations

import array
import asyncio
import contextlib
import fcntl
import functools
import ssl
import termios
from collections.abc import AsyncIterator, Callable

from prometheus_client import CollectorRegistry, generate_latest

from coxswain_devkit.pki import CertificateAuthority
from coxswain_proxy.dataplane import collector
from coxswain_proxy.dataplane import testing as t
from coxswain_proxy.dataplane.core import Dataplane
from coxswain_proxy.dataplane.handshake import Handshake
from coxswain_proxy.dataplane.http.http11 import HttpConnection
from coxswain_proxy.dataplane.runtime import Config
from coxswain_proxy.dataplane.stats import TIMEOUT_KINDS, Stats
from coxswain_routing import ListenerProtocol, TlsCertificate, TlsStore

DEFAULTS = Config()
OK = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok"
SWITCHED = b"HTTP/1.1 101 Switching Protocols\r\nconnection: upgrade\r\nupgrade: echo\r\n\r\n"
HOST = "shop.example.com"
CA = CertificateAuthority.create()


class Backend:
    """Answers each request 200 once `release` is set, or echoes after an Upgrade."""

    def __init__(self) -> None:
        self.release = asyncio.Event()
        self.release.set()
        self.received = asyncio.Event()  # a request head has arrived
        self.port = 0

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            await self._serve(reader, writer)
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            head = (await reader.readuntil(b"\r\n\r\n")).lower()
            self.received.set()
            if b"upgrade: echo" in head:
                writer.write(SWITCHED)
                while data := await reader.read(65536):
                    writer.write(data)
                return
            await reader.readexactly(_content_length(head))
            await self.release.wait()
            writer.write(OK)


def _content_length(head: bytes) -> int:
    for line in head.split(b"\r\n"):
        if line.startswith(b"content-length:"):
            return int(line.split(b":")[1])
    return 0


@contextlib.asynccontextmanager
async def backend() -> AsyncIterator[Backend]:
    served = Backend()
    tasks: set[asyncio.Task[None]] = set()

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        tasks.add(task)
        await served.handle(reader, writer)

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    served.port = server.sockets[0].getsockname()[1]
    try:
        yield served
    finally:
        server.close()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await server.wait_closed()


def cert() -> TlsCertificate:
    issued = CA.issue(dns=[HOST])
    return TlsCertificate((HOST,), issued.chain_pem, issued.key_pem, "ns/shop")


@contextlib.asynccontextmanager
async def plane(*, tls: bool = False) -> AsyncIterator[tuple[Dataplane, Backend, int]]:
    """A data plane with the default limits in front of a `Backend`, and its port."""
    port = t.TLS_PORT if tls else t.PORT
    protocol = ListenerProtocol.HTTPS if tls else ListenerProtocol.HTTP
    host = HOST if tls else "example.com"
    async with backend() as served:
        resources: list[t.Resource] = [
            t.listeners((port, protocol, host if tls else "")),
            t.endpoints("raw", served.port),
            t.routes(host, t.rule("r", t.backend("raw")), port=port),
        ]
        if tls:
            resources.append(TlsStore(port, (cert(),)))
        async with t.running(resources) as running:
            yield running, served, t.actual(running, port)


class SkippingClock:
    """The loop's time plus what the test has skipped, for the sweep and the connections."""

    def __init__(self, plane: Dataplane) -> None:
        assert plane.rt is not None
        self.rt = plane.rt
        self.plane = plane
        self.skipped = 0.0

    def now(self) -> float:
        return self.rt.loop.time() + self.skipped

    def skip(self, seconds: float) -> None:
        """`seconds` pass: the sweep runs at the new time."""
        self.skipped += seconds
        self.plane.sweep(self.now())

    async def connection(self, read: Callable[[HttpConnection], bool]) -> HttpConnection:
        """The client connection once the proxy has `read` what the client sent (its clocks
        start when it reads), on this clock from then on."""
        await until(lambda: self._connection(read) is not None)
        conn = self._connection(read)
        assert conn is not None
        conn.clock = self.now
        return conn

    def _connection(self, read: Callable[[HttpConnection], bool]) -> HttpConnection | None:
        for conn in self.rt.connections:
            if isinstance(conn, HttpConnection) and read(conn):
                return conn
        return None

    async def handshaking(self, count: int = 1) -> None:
        """Until `count` HTTPS clients are in their handshake with all they sent read."""
        await until(lambda: self._handshaking(count))

    def _handshaking(self, count: int) -> bool:
        started = [
            h
            for h in self.rt.handshakes
            if isinstance(h, Handshake) and h.upgrading and h.raw and _all_read(h.raw)
        ]
        return len(started) == count


def _all_read(transport: asyncio.Transport) -> bool:
    """Reading, with nothing left in the socket's receive queue: a close with bytes unread
    would reach the client as a reset, not as the close the proxy makes."""
    if not transport.is_reading():
        return False
    unread = array.array("i", [0])
    fcntl.ioctl(transport.get_extra_info("socket").fileno(), termios.FIONREAD, unread)
    return unread[0] == 0


async def until(predicate: Callable[[], bool]) -> None:
    """Poll state the proxy owns (it offers no event to wait on), within a generous bound."""
    async with asyncio.timeout(10):
        while not predicate():  # noqa: ASYNC110
            await asyncio.sleep(0.005)


def counted(plane: Dataplane) -> dict[str, float | None]:
    """`coxswain_proxy_client_timeouts_total` by kind, as scraped."""
    registry = CollectorRegistry()
    rt = plane.rt
    assert rt is not None
    registry.register(collector.Collector(lambda: rt.stats, lambda: 0.0))
    name = "coxswain_proxy_client_timeouts_total"
    return {kind: registry.get_sample_value(name, {"kind": kind}) for kind in TIMEOUT_KINDS}


def _read_since(conn: HttpConnection, *, before: float) -> bool:
    """The connection read something after loop time `before`."""
    return conn.last_active > before


def only(kind: str, count: float = 1.0) -> dict[str, float | None]:
    return {k: count if k == kind else 0.0 for k in TIMEOUT_KINDS}


NONE = {k: 0.0 for k in TIMEOUT_KINDS}


# ------------------------------------------------------------------------------ request heads


async def test_a_late_request_head_gets_408_then_the_close() -> None:
    async with plane() as (running, _, port), t.client(port) as c:
        clock = SkippingClock(running)
        c.send(b"GET / HTTP/1.1\r\nHost: exa")
        await clock.connection(lambda conn: conn.head_started > 0)
        clock.skip(DEFAULTS.header_timeout - 1)
        c.send(b"mple.com\r\n\r\n")
        assert (await c.response()).status == 200

        c.send(b"GET / HTTP/1.1\r\nHost: exa")
        await clock.connection(lambda conn: conn.head_started > 0)
        clock.skip(DEFAULTS.header_timeout + 1)
        answer = await c.closed()
        assert answer.startswith(b"HTTP/1.1 408 ")
        assert b"\r\nconnection: close\r\n" in answer.lower()
        assert counted(running) == only("head")


# ------------------------------------------------------------------------------ request bodies


async def test_a_body_that_keeps_coming_is_read_and_one_that_stalls_gets_408() -> None:
    async with plane() as (running, _, port), t.client(port) as c:
        clock = SkippingClock(running)
        c.send(b"POST / HTTP/1.1\r\nHost: example.com\r\nContent-Length: 10\r\n\r\nabcd")
        conn = await clock.connection(lambda conn: conn.parsing is not None)
        # Each pause shorter than the bound, the whole body longer: the bound is per pause.
        for chunk in (b"ef", b"gh", b"ij"):
            clock.skip(DEFAULTS.body_timeout - 1)
            before = conn.last_active
            c.send(chunk)
            await clock.connection(functools.partial(_read_since, before=before))
        assert (await c.response()).status == 200

        c.send(b"POST / HTTP/1.1\r\nHost: example.com\r\nContent-Length: 10\r\n\r\nabcd")
        await clock.connection(lambda conn: conn.parsing is not None)
        clock.skip(DEFAULTS.body_timeout + 1)
        assert (await c.closed()).startswith(b"HTTP/1.1 408 ")
        assert counted(running) == only("body")


# ------------------------------------------------------------------------------ keep-alive idle


async def test_a_connection_idle_between_requests_is_closed_without_a_byte() -> None:
    async with plane() as (running, _, port), t.client(port) as c:
        clock = SkippingClock(running)
        await clock.connection(lambda conn: True)
        assert (await c.request()).status == 200
        clock.skip(DEFAULTS.keepalive_timeout - 1)
        assert (await c.request()).status == 200
        clock.skip(DEFAULTS.keepalive_timeout + 1)
        assert await c.closed() == b""
        assert counted(running) == only("idle")


async def test_a_connection_that_never_sends_a_request_is_closed_without_a_byte() -> None:
    async with plane() as (running, _, port), t.client(port) as c:
        clock = SkippingClock(running)
        await clock.connection(lambda conn: True)
        clock.skip(DEFAULTS.keepalive_timeout + 1)
        assert await c.closed() == b""
        assert counted(running) == only("idle")


async def test_idle_time_counts_from_the_end_of_a_slow_response() -> None:
    async with plane() as (running, served, port), t.client(port) as c:
        clock = SkippingClock(running)
        await clock.connection(lambda conn: True)
        served.release.clear()
        c.send(b"GET / HTTP/1.1\r\nHost: example.com\r\n\r\n")
        await served.received.wait()
        clock.skip(100)  # the backend takes its time: the client is waiting, not idle
        served.release.set()
        assert (await c.response()).status == 200
        clock.skip(DEFAULTS.keepalive_timeout - 1)
        assert (await c.request()).status == 200
        assert counted(running) == NONE


async def test_a_pipelined_request_waiting_its_turn_is_not_timed_out() -> None:
    async with plane() as (running, served, port), t.client(port) as c:
        clock = SkippingClock(running)
        served.release.clear()
        # The second request's body is cut short: read no further while the first is answered.
        c.send(
            b"GET / HTTP/1.1\r\nHost: example.com\r\n\r\n"
            b"POST / HTTP/1.1\r\nHost: example.com\r\nContent-Length: 5\r\n\r\nab"
        )
        await clock.connection(lambda conn: bool(conn.queue))
        clock.skip(DEFAULTS.body_timeout + DEFAULTS.header_timeout + 1)
        served.release.set()
        c.send(b"cde")
        assert [r.status for r in await c.responses(2)] == [200, 200]
        assert counted(running) == NONE


async def test_an_upgrade_tunnel_is_not_closed_as_idle() -> None:
    async with plane() as (running, _, port), t.client(port) as c:
        clock = SkippingClock(running)
        c.send(
            b"GET / HTTP/1.1\r\nHost: example.com\r\nConnection: upgrade\r\nUpgrade: echo\r\n\r\n"
        )
        head = await asyncio.wait_for(c.reader.readuntil(b"\r\n\r\n"), 10)
        assert head.startswith(b"HTTP/1.1 101 ")
        await clock.connection(lambda conn: conn.tunnel is not None)
        clock.skip(DEFAULTS.keepalive_timeout * 10)
        c.send(b"ping")
        assert await asyncio.wait_for(c.reader.readexactly(4), 10) == b"ping"
        assert counted(running) == NONE


# ------------------------------------------------------------------------------ TLS handshakes


class HandDrivenTls:
    """A TLS client driven by hand over a plain connection, so that it can stop half-way."""

    def __init__(self, c: t.Client) -> None:
        context = ssl.create_default_context(cadata=CA.certificate_pem.decode())
        self.c = c
        self.incoming, self.outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
        self.tls = context.wrap_bio(self.incoming, self.outgoing, server_hostname=HOST)

    def client_hello(self) -> bytes:
        with contextlib.suppress(ssl.SSLWantReadError):
            self.tls.do_handshake()
        return self.outgoing.read()

    async def _read(self) -> None:
        data = await asyncio.wait_for(self.c.reader.read(65536), 10)
        if not data:
            raise ConnectionError("closed during the handshake")
        self.incoming.write(data)

    async def finish(self) -> None:
        while True:
            try:
                self.tls.do_handshake()
            except ssl.SSLWantReadError:
                self.c.send(self.outgoing.read())
                await self._read()
            else:
                self.c.send(self.outgoing.read())
                return

    async def get(self) -> bytes:
        self.tls.write(f"GET / HTTP/1.1\r\nHost: {HOST}\r\n\r\n".encode())
        self.c.send(self.outgoing.read())
        received = b""
        while not received.endswith(b"ok"):
            try:
                received += self.tls.read(65536)
            except ssl.SSLWantReadError:
                await self._read()
        return received


async def test_a_handshake_in_time_is_served_however_it_arrives() -> None:
    async with plane(tls=True) as (running, _, port), t.client(port) as c:
        clock = SkippingClock(running)
        client = HandDrivenTls(c)
        hello = client.client_hello()
        c.send(hello[:50])
        await clock.handshaking()
        clock.skip(DEFAULTS.handshake_timeout - 1)
        c.send(hello[50:])
        await client.finish()
        assert (await client.get()).startswith(b"HTTP/1.1 200 ")
        assert counted(running) == NONE


async def test_a_late_handshake_is_closed() -> None:
    async with plane(tls=True) as (running, _, port):
        clock = SkippingClock(running)
        async with t.client(port) as silent, t.client(port) as halfway:
            halfway.send(HandDrivenTls(halfway).client_hello()[:50])
            await clock.handshaking(2)
            clock.skip(DEFAULTS.handshake_timeout + 1)
            assert await silent.closed() == b""
            assert await halfway.closed() == b""
        assert counted(running) == only("handshake", 2)
        assert running.rt is not None and not running.rt.handshakes


# ------------------------------------------------------------------------------ counting


def test_worker_counts_merge_and_every_kind_is_exported() -> None:
    first, second = Stats(), Stats()
    first.client_timeout("head")
    second.client_timeout("head")
    second.client_timeout("handshake")
    merged = Stats.merged([first.snapshot(), second.snapshot()])
    registry = CollectorRegistry()
    registry.register(collector.Collector(lambda: merged, lambda: 0.0))
    text = generate_latest(registry).decode()
    assert 'coxswain_proxy_client_timeouts_total{kind="head"} 2.0' in text
    assert 'coxswain_proxy_client_timeouts_total{kind="handshake"} 1.0' in text
    assert 'coxswain_proxy_client_timeouts_total{kind="body"} 0.0' in text
    assert 'coxswain_proxy_client_timeouts_total{kind="idle"} 0.0' in text


def test_the_defaults_are_no_laxer_than_nginx() -> None:
    bounds = (
        DEFAULTS.header_timeout,
        DEFAULTS.body_timeout,
        DEFAULTS.keepalive_timeout,
        DEFAULTS.handshake_timeout,
    )
    assert all(0 < bound <= 60 for bound in bounds)
