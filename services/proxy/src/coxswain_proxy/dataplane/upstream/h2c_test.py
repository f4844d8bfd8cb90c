"""Backends declaring `appProtocol: kubernetes.io/h2c`: HTTP/1.1 clients, cleartext HTTP/2 upstream.

Covers: the devkit echo's h2c port answers a request the proxy turned into an HTTP/2 stream
(method, path, query, `:authority` from the Host, hop-by-hop fields gone); request bodies with a
Content-Length or chunked, larger than HTTP/2's initial flow-control window, arrive whole, and a
large response streams back; sequential requests share one connection as successive streams; a
stream the backend resets is a connection failure: 503, and retried under a retry stanza (to a
good answer, or to 503 once the attempts are used up); a backend that announces GOAWAY gets its
next request on a fresh connection. The backends beyond the devkit echo are small h2 servers
made in the test.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import cast

import h2.config
import h2.connection
import h2.events
import pytest

from coxswain_devkit.echo import EchoServer
from coxswain_proxy.dataplane.testing import (
    HTTP_LISTENER,
    NO_RETRY,
    actual,
    client,
    endpoints,
    get,
    routes,
    rule,
    running,
)
from coxswain_routing import Backend, BackendProtocol, Resource, Retry


def _h2c(name: str) -> Backend:
    return Backend(endpoints=f"endpoints/default/{name}/80", protocol=BackendProtocol.H2C)


def _snapshot(port: int, retry: Retry = NO_RETRY) -> list[Resource]:
    r = rule("r", _h2c("grpcish"), retry=retry)
    return [HTTP_LISTENER, endpoints("grpcish", port), routes("", r)]


async def test_the_devkit_echo_sees_an_http2_request_built_from_the_client_request() -> None:
    async with EchoServer(pod="h2c-0", h2c_port=0) as echo:
        assert echo.h2c_port is not None
        async with running(_snapshot(echo.h2c_port)) as plane:
            response = await get(
                actual(plane), "/hello?x=1", host="app.example.com", extra="Keep-Alive: 5\r\n"
            )
    assert response.status == 200
    seen = json.loads(response.body)
    assert seen["proto"] == "HTTP/2.0"
    assert (seen["method"], seen["path"], seen["host"]) == ("GET", "/hello?x=1", "app.example.com")
    assert "keep-alive" not in seen["headers"] and "connection" not in seen["headers"]
    assert seen["headers"]["x-forwarded-proto"] == ["http"]


@dataclass
class _Stream:
    headers: dict[bytes, bytes] = field(default_factory=dict)
    body: bytearray = field(default_factory=bytearray)


class _Backend(asyncio.Protocol):
    """An h2c server: echoes the request body (or `big` bytes), or resets, or says GOAWAY."""

    def __init__(self, server: H2Server) -> None:
        self.server = server
        self.h2 = h2.connection.H2Connection(h2.config.H2Configuration(client_side=False))
        self.transport: asyncio.Transport | None = None
        self.streams: dict[int, _Stream] = {}

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's are not subclasses
        self.server.connections += 1
        self.h2.initiate_connection()
        self.transport.write(self.h2.data_to_send())

    def data_received(self, data: bytes) -> None:
        assert self.transport is not None
        for event in self.h2.receive_data(data):
            if isinstance(event, h2.events.RequestReceived):
                self.streams[event.stream_id] = _Stream(dict(event.headers or []))
                self.server.stream_ids.append(event.stream_id)
            elif isinstance(event, h2.events.DataReceived):
                self.streams[event.stream_id].body += event.data
                self.h2.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
            elif isinstance(event, h2.events.StreamEnded):
                self._answer(event.stream_id)
            elif isinstance(event, h2.events.WindowUpdated):
                self._pump()
        self.transport.write(self.h2.data_to_send())

    def _answer(self, stream_id: int) -> None:
        stream = self.streams[stream_id]
        mode = self.server.mode
        if mode == "reset" or (mode == "reset-once" and len(self.server.stream_ids) == 1):
            self.h2.reset_stream(stream_id)
            return
        body = bytes(stream.body) if not self.server.big else b"z" * self.server.big
        self.server.pending[stream_id] = body
        headers = [(":status", "200"), ("x-path", stream.headers[b":path"].decode())]
        self.h2.send_headers(stream_id, headers)
        self._pump()
        if mode == "goaway":
            self.h2.close_connection(last_stream_id=stream_id)

    def _pump(self) -> None:
        for stream_id, body in list(self.server.pending.items()):
            while body:
                window = self.h2.local_flow_control_window(stream_id)
                size = min(len(body), window, self.h2.max_outbound_frame_size)
                if not size:
                    break  # the rest when the proxy opens the window
                self.h2.send_data(stream_id, body[:size])
                body = body[size:]
            if body:
                self.server.pending[stream_id] = body
            else:
                del self.server.pending[stream_id]
                self.h2.end_stream(stream_id)


class H2Server:
    def __init__(self, mode: str = "echo", big: int = 0) -> None:
        self.mode = mode
        self.big = big
        self.connections = 0
        self.stream_ids: list[int] = []
        self.pending: dict[int, bytes] = {}
        self.port = 0


@pytest.fixture
async def h2_server(request: pytest.FixtureRequest) -> AsyncIterator[H2Server]:
    mode, big = getattr(request, "param", ("echo", 0))
    state = H2Server(mode, big)
    loop = asyncio.get_running_loop()
    server = await loop.create_server(lambda: _Backend(state), "127.0.0.1", 0)
    state.port = server.sockets[0].getsockname()[1]
    try:
        yield state
    finally:
        server.close()
        await server.wait_closed()


BODY = bytes(range(256)) * 800  # 200 KiB: beyond the 64 KiB initial window of HTTP/2


async def test_request_bodies_arrive_whole_with_a_length_or_chunked(h2_server: H2Server) -> None:
    async with running(_snapshot(h2_server.port)) as plane, client(actual(plane)) as c:
        c.send(
            b"POST /upload HTTP/1.1\r\nHost: example.com\r\n"
            + f"Content-Length: {len(BODY)}\r\n\r\n".encode()
            + BODY
        )
        sized = await c.response()
        c.send(b"POST /chunks HTTP/1.1\r\nHost: example.com\r\nTransfer-Encoding: chunked\r\n\r\n")
        for start in range(0, len(BODY), 50_000):
            piece = BODY[start : start + 50_000]
            c.send(b"%x\r\n%b\r\n" % (len(piece), piece))
            await asyncio.sleep(0)
        c.send(b"0\r\n\r\n")
        chunked = await c.response()
    assert (sized.status, sized.header("x-path"), sized.body) == (200, "/upload", BODY)
    assert (chunked.status, chunked.header("x-path"), chunked.body) == (200, "/chunks", BODY)


@pytest.mark.parametrize("h2_server", [("echo", 3_000_000)], indirect=True)
async def test_a_large_response_streams_back_through_flow_control(h2_server: H2Server) -> None:
    async with running(_snapshot(h2_server.port)) as plane:
        response = await get(actual(plane), "/big")
    assert response.status == 200
    assert response.body == b"z" * 3_000_000


async def test_sequential_requests_are_successive_streams_on_one_connection(
    h2_server: H2Server,
) -> None:
    async with running(_snapshot(h2_server.port)) as plane, client(actual(plane)) as c:
        for path in ("/a", "/b", "/c"):
            assert (await c.request(path)).header("x-path") == path
    assert h2_server.connections == 1
    assert h2_server.stream_ids == [1, 3, 5]


@pytest.mark.parametrize("h2_server", [("reset", 0)], indirect=True)
async def test_a_reset_stream_answers_503(h2_server: H2Server) -> None:
    async with running(_snapshot(h2_server.port)) as plane:
        response = await get(actual(plane), "/x")
    assert response.status == 503
    assert len(h2_server.stream_ids) == 1


@pytest.mark.parametrize(
    ("h2_server", "status", "streams"),
    [
        pytest.param(("reset-once", 0), 200, 2, id="reset-then-answered-200"),
        pytest.param(("reset", 0), 503, 3, id="every-attempt-reset-503"),
    ],
    indirect=["h2_server"],
)
async def test_a_reset_stream_is_retried(h2_server: H2Server, status: int, streams: int) -> None:
    async with running(_snapshot(h2_server.port, Retry(attempts=2))) as plane:
        response = await get(actual(plane), "/x")
    assert response.status == status
    assert len(h2_server.stream_ids) == streams


@pytest.mark.parametrize("h2_server", [("goaway", 0)], indirect=True)
async def test_after_goaway_the_next_request_opens_a_new_connection(h2_server: H2Server) -> None:
    async with running(_snapshot(h2_server.port)) as plane, client(actual(plane)) as c:
        first = await c.request("/one")
        second = await c.request("/two")
    assert (first.status, second.status) == (200, 200)
    assert second.header("x-path") == "/two"
    assert h2_server.connections == 2
