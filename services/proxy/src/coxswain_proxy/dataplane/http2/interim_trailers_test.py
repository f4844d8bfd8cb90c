"""Interim (1xx) responses to HTTP/2 clients, and HTTP/1.1 clients' request trailers upstream.

Covers: a backend's 103 Early Hints reaches an HTTP/2 client as an informational HEADERS frame
with its Link field, whether it arrives in the same read as the final response or on its own
before it exists (RFC 9113 §8.1, RFC 9110 §15.2), and from an h2c backend too; an HTTP/2
client's `expect: 100-continue` gets the backend's 100 before it sends the body; an HTTP/1.1
client now gets a 103's fields. A chunked HTTP/1.1 request's trailer section reaches an
HTTP/1.1 backend as chunked trailers and an h2c or gRPC backend as a trailing HEADERS frame,
less the fields RFC 9110 §6.5.1 keeps out of trailers (framing, routing, authentication,
request modifiers, content format, and the proxy's own X-Forwarded-*), and the request
pipelined behind it is untouched; an HTTP/2 client's trailers are filtered the same way.
Left out: trailers on a retried attempt (not kept: docs/proxy.md).

The backends: a scripted HTTP/1.1 one the test writes the response of, byte by byte
(`scripted`), and an h2 one made here that records a stream's trailers and answers 103 then 200.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import cast

import h2.config
import h2.connection
import h2.events
import pytest

from coxswain_proxy.dataplane import testing as t
from coxswain_proxy.dataplane.http2.h2client import Answer, connected
from coxswain_proxy.dataplane.http2.scripted import scripted
from coxswain_routing import Backend, BackendProtocol

HINTS = b"HTTP/1.1 103 Early Hints\r\nlink: </s.css>; rel=preload\r\n\r\n"
OK = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok"
# Trailer fields a client sends: the first two may go upstream, the rest may not. (A
# Content-Length among an HTTP/1.1 request's trailers is llhttp's parse error: 400, below.)
SENT = [
    (b"X-Checksum", b"abc123"), (b"x-count", b"7  "),
    (b"host", b"evil.example"), (b"authorization", b"Bearer late"),
    (b"x-forwarded-for", b"203.0.113.9"), (b"content-type", b"text/evil"),
    (b"cache-control", b"no-store"), (b"cookie", b"a=b"),
]  # fmt: skip
RELAYED = [(b"x-checksum", b"abc123"), (b"x-count", b"7")]


# ------------------------------------------------------------------------------ backends


class _H2Backend(asyncio.Protocol):
    """Records each stream's trailers; answers 103 Early Hints, then 200 once the stream ends."""

    def __init__(self, seen: list[list[tuple[bytes, bytes]]]) -> None:
        self.seen = seen
        self.h2 = h2.connection.H2Connection(h2.config.H2Configuration(client_side=False))
        self.transport: asyncio.Transport | None = None
        self.trailers: dict[int, list[tuple[bytes, bytes]]] = {}

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)
        self.h2.initiate_connection()
        self.transport.write(self.h2.data_to_send())

    def data_received(self, data: bytes) -> None:
        assert self.transport is not None
        for event in self.h2.receive_data(data):
            if isinstance(event, h2.events.DataReceived):
                self.h2.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
            elif isinstance(event, h2.events.TrailersReceived):
                self.trailers[event.stream_id] = list(event.headers or [])
            elif isinstance(event, h2.events.StreamEnded):
                self.seen.append(self.trailers.pop(event.stream_id, []))
                hints = [(b":status", b"103"), (b"link", b"</h2.css>; rel=preload")]
                self.h2.send_headers(event.stream_id, hints)
                self.h2.send_headers(event.stream_id, [(b":status", b"200")], end_stream=True)
        self.transport.write(self.h2.data_to_send())


@contextlib.asynccontextmanager
async def h2_backend() -> AsyncIterator[tuple[int, list[list[tuple[bytes, bytes]]]]]:
    seen: list[list[tuple[bytes, bytes]]] = []
    loop = asyncio.get_running_loop()
    server = await loop.create_server(lambda: _H2Backend(seen), "127.0.0.1", 0)
    try:
        yield server.sockets[0].getsockname()[1], seen
    finally:
        server.close()
        await server.wait_closed()


def _snapshot(port: int, protocol: BackendProtocol = BackendProtocol.HTTP1) -> list[t.Resource]:
    backend = Backend(endpoints="endpoints/default/b/80", protocol=protocol)
    return [t.HTTP_LISTENER, t.endpoints("b", port), t.routes("", t.rule("r", backend))]


def _statuses(answer: Answer) -> list[bytes]:
    return [dict(block)[b":status"] for block in answer.informational]


# ------------------------------------------------------------------------------ 1xx


@pytest.mark.parametrize(
    "apart", [pytest.param(False, id="one-read"), pytest.param(True, id="apart")]
)
async def test_early_hints_reach_an_http2_client_as_informational_headers(apart: bool) -> None:
    async with (
        scripted() as (port, arrived),
        t.running(_snapshot(port)) as plane,
        connected(t.actual(plane)) as client,
    ):
        stream = client.request("/page")
        backend = await arrived.get()
        await backend.until(b"\r\n\r\n")
        answer = client.answers[stream]
        if apart:
            # The final response does not exist yet: the 103 can only have come on its own.
            backend.write(HINTS)
            await client.until(lambda: answer.informational)
            assert answer.status == 0
            backend.write(OK)
        else:
            backend.write(HINTS + OK)
        await client.answer(stream)
    assert _statuses(answer) == [b"103"]
    assert (b"link", b"</s.css>; rel=preload") in answer.informational[0]
    assert (answer.status, answer.body) == (200, b"ok")


async def test_an_h2c_backends_early_hints_reach_an_http2_client() -> None:
    async with (
        h2_backend() as (port, _),
        t.running(_snapshot(port, BackendProtocol.H2C)) as plane,
        connected(t.actual(plane)) as client,
    ):
        answer = await client.get("/page")
    assert _statuses(answer) == [b"103"]
    assert (b"link", b"</h2.css>; rel=preload") in answer.informational[0]
    assert answer.status == 200


async def test_an_http2_expectation_gets_the_backends_100_before_the_body_is_sent() -> None:
    extra = [(b"content-length", b"5"), (b"expect", b"100-continue")]
    async with (
        scripted() as (port, arrived),
        t.running(_snapshot(port)) as plane,
        connected(t.actual(plane)) as client,
    ):
        stream = client.request("/upload", method="POST", extra=extra, end=False)
        backend = await arrived.get()
        head = await backend.until(b"\r\n\r\n")
        assert b"\r\nexpect: 100-continue\r\n" in head.lower()
        backend.write(b"HTTP/1.1 100 Continue\r\n\r\n")
        answer = client.answers[stream]
        await client.until(lambda: answer.informational)
        client.send_body(stream, b"hello")
        assert (await backend.until(b"hello")).endswith(b"\r\n\r\nhello")
        backend.write(OK)
        await client.answer(stream)
    assert _statuses(answer) == [b"100"]
    assert (answer.status, answer.body) == (200, b"ok")


async def test_an_http11_client_gets_a_103s_fields() -> None:
    async with (
        scripted() as (port, arrived),
        t.running(_snapshot(port)) as plane,
        t.client(t.actual(plane)) as client,
    ):
        client.send(b"GET / HTTP/1.1\r\nHost: example.com\r\n\r\n")
        backend = await arrived.get()
        await backend.until(b"\r\n\r\n")
        backend.write(HINTS + OK)
        hints, final = await client.responses(2)
    assert (hints.status, hints.header("link")) == (103, "</s.css>; rel=preload")
    assert final.status == 200


# ------------------------------------------------------------------------------ trailers


def _chunked_with_trailers(path: str = "/t", sent: list[tuple[bytes, bytes]] = SENT) -> bytes:
    section = b"".join(n + b": " + v + b"\r\n" for n, v in sent)
    return (
        (
            f"POST {path} HTTP/1.1\r\nHost: example.com\r\nTransfer-Encoding: chunked\r\n"
            "Trailer: X-Checksum\r\n\r\n5\r\nhello\r\n"
        ).encode()
        + b"0\r\n"
        + section
        + b"\r\n"
    )


def _trailer_section(received: bytes) -> tuple[bytes, list[tuple[bytes, bytes]]]:
    """The body and the trailer fields of the one chunked request in `received`."""
    head, _, rest = received.partition(b"\r\n\r\n")
    assert b"transfer-encoding: chunked" in head.lower()
    body = b""
    while True:
        size_line, _, rest = rest.partition(b"\r\n")
        size = int(size_line, 16)
        if not size:
            break
        body, rest = body + rest[:size], rest[size + 2 :]
    section, _, after = rest.partition(b"\r\n\r\n")
    assert after == b""
    fields = [tuple(line.split(b": ", 1)) for line in section.split(b"\r\n") if line]
    return body, cast(list[tuple[bytes, bytes]], fields)


async def test_http11_trailers_reach_an_http11_backend_as_chunked_trailers() -> None:
    second = b"GET /second HTTP/1.1\r\nHost: example.com\r\n\r\n"
    async with (
        scripted() as (port, arrived),
        t.running(_snapshot(port)) as plane,
        t.client(t.actual(plane)) as client,
    ):
        client.send(_chunked_with_trailers() + second)
        backend = await arrived.get()
        first = await backend.until(b"\r\n\r\n", 2)  # the head and the trailer section's end
        backend.write(OK)
        await client.response()
        received = await backend.until(b"GET /second")
        backend.write(OK)
        assert (await client.response()).status == 200
    body, fields = _trailer_section(first)
    assert (body, fields) == (b"hello", RELAYED)
    assert b"trailer:" not in first.lower()  # hop-by-hop (RFC 9110 §7.6.1 lists it)
    # The next request is its own: no trailer field leaked into its head.
    tail = received[len(first) :].lower()
    assert tail.startswith(b"get /second ") and b"x-checksum" not in tail


@pytest.mark.parametrize("protocol", [BackendProtocol.H2C, BackendProtocol.GRPC])
async def test_http11_trailers_reach_an_http2_backend_as_trailing_headers(
    protocol: BackendProtocol,
) -> None:
    async with (
        h2_backend() as (port, seen),
        t.running(_snapshot(port, protocol)) as plane,
        t.client(t.actual(plane)) as client,
    ):
        client.send(_chunked_with_trailers())
        hints, final = await client.responses(2)
    assert (hints.status, final.status) == (103, 200)
    assert seen == [RELAYED]


async def test_an_http2_clients_trailers_are_filtered_the_same_way() -> None:
    block = [(b":method", b"POST"), (b":scheme", b"http"), (b":authority", b"example.com"),
             (b":path", b"/t")]  # fmt: skip
    lowered = [(n.lower(), v.strip()) for n, v in SENT] + [(b"content-length", b"3")]
    async with (
        h2_backend() as (port, seen),
        t.running(_snapshot(port, BackendProtocol.H2C)) as plane,
        connected(t.actual(plane)) as client,
    ):
        stream = client.request(block=block, end=False)
        client.h2.send_data(stream, b"hello")
        client.send_trailers(stream, lowered)
        answer = await client.answer(stream)
    assert answer.status == 200
    assert seen == [RELAYED]


@pytest.mark.parametrize(
    "field",
    [pytest.param(b"content-length: 3", id="content-length"),
     pytest.param(b"transfer-encoding: chunked", id="transfer-encoding")],
)  # fmt: skip
async def test_http11_trailers_that_reframe_the_body_are_refused(field: bytes) -> None:
    # llhttp reads a framing field in a trailer section as a malformed message: 400 and close,
    # nothing forwarded (RFC 9112 §7.1.2 lets a recipient discard trailers; refusing is stricter).
    sent = [(b"x-checksum", b"abc"), tuple(field.split(b": "))]
    async with (
        scripted() as (port, arrived),
        t.running(_snapshot(port)) as plane,
        t.client(t.actual(plane)) as client,
    ):
        client.send(_chunked_with_trailers(sent=cast(list[tuple[bytes, bytes]], sent)))
        data = await client.closed()
        forwarded = b"" if arrived.empty() else bytes(arrived.get_nowait().received)
    assert data.startswith(b"HTTP/1.1 400 ")
    assert b"0\r\n" not in forwarded  # the body's end never went upstream
