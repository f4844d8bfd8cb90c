"""HTTP/2 end to end at its edges: request trailers upstream, and a gRPC failure mid-response.

Covers: a client's request trailers reach an h2c backend as a trailing HEADERS frame, and a
gRPC backend's too (the gRPC-only fields as sent); trailers holding a pseudo-header are a
malformed request (RST_STREAM PROTOCOL_ERROR); a gRPC backend that resets its stream after the
response began reaches a grpcio client as UNAVAILABLE in the trailers, not as a reset. The
backend is a small h2 server made here, so that what it received can be seen, and so that it can
reset a stream half-way, which no grpcio server does on demand. And a gRPC backend under a
BackendTLSPolicy (a grpcio server with TLS, certificates from coxswain_devkit.pki) is reached by
HTTP/2 over TLS, ALPN h2, verified against the policy's CA.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import cast

import grpc
import h2.config
import h2.connection
import h2.events
import pytest

from coxswain_devkit.pki import CertificateAuthority
from coxswain_proxy.dataplane import testing as t
from coxswain_proxy.dataplane.http2.h2client import Answer, connected
from coxswain_routing import Backend, BackendProtocol, UpstreamTLS

MESSAGE = b"\x00\x00\x00\x00\x03one"  # one length-prefixed gRPC message, uncompressed


class _TrailerBackend(asyncio.Protocol):
    """Answers each stream once it ends: 200 with the request's trailers echoed as response
    headers (`x-got-<name>`); in "reset" mode a gRPC head and one message, then RST_STREAM."""

    def __init__(self, mode: str, seen: list[list[tuple[bytes, bytes]]]) -> None:
        self.mode, self.seen = mode, seen
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
            if isinstance(event, h2.events.RequestReceived) and self.mode == "reset":
                self._reset_midway(event.stream_id)
            elif isinstance(event, h2.events.DataReceived):
                self.h2.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
            elif isinstance(event, h2.events.TrailersReceived):
                self.trailers[event.stream_id] = list(event.headers or [])
            elif isinstance(event, h2.events.StreamEnded) and self.mode != "reset":
                got = self.trailers.pop(event.stream_id, [])
                self.seen.append(got)
                head = [(b":status", b"200"), *((b"x-got-" + n, v) for n, v in got)]
                self.h2.send_headers(event.stream_id, head, end_stream=True)
        self.transport.write(self.h2.data_to_send())

    def _reset_midway(self, stream_id: int) -> None:
        self.h2.send_headers(
            stream_id, [(b":status", b"200"), (b"content-type", b"application/grpc")]
        )
        self.h2.send_data(stream_id, MESSAGE)
        self.h2.reset_stream(stream_id, 2)  # INTERNAL_ERROR, after the response began


@pytest.fixture
async def backend(
    request: pytest.FixtureRequest,
) -> AsyncIterator[tuple[int, list[list[tuple[bytes, bytes]]]]]:
    mode = getattr(request, "param", "echo")
    seen: list[list[tuple[bytes, bytes]]] = []
    loop = asyncio.get_running_loop()
    server = await loop.create_server(lambda: _TrailerBackend(mode, seen), "127.0.0.1", 0)
    try:
        yield server.sockets[0].getsockname()[1], seen
    finally:
        server.close()
        await server.wait_closed()


def _snapshot(port: int, protocol: BackendProtocol) -> list[t.Resource]:
    backend = Backend(endpoints="endpoints/default/b/80", protocol=protocol)
    return [t.HTTP_LISTENER, t.endpoints("b", port), t.routes("", t.rule("r", backend))]


async def _with_trailers(port: int, trailers: list[tuple[bytes, bytes]], grpc_type: bool) -> Answer:
    block = [(b":method", b"POST"), (b":scheme", b"http"), (b":authority", b"example.com"),
             (b":path", b"/svc.S/M")]  # fmt: skip
    if grpc_type:
        block += [(b"content-type", b"application/grpc"), (b"te", b"trailers")]
    async with connected(port) as client:
        stream = client.h2.get_next_available_stream_id()
        client.answers[stream] = Answer()
        client.h2.send_headers(stream, block)
        client.h2.send_data(stream, MESSAGE)
        client.h2.send_headers(stream, trailers, end_stream=True)
        client.flush()
        return await client.answer(stream)


@pytest.mark.parametrize("protocol", [BackendProtocol.H2C, BackendProtocol.GRPC])
async def test_request_trailers_reach_an_http2_backend(
    backend: tuple[int, list[list[tuple[bytes, bytes]]]], protocol: BackendProtocol
) -> None:
    port, seen = backend
    async with t.running(_snapshot(port, protocol)) as plane:
        trailers = [(b"x-checksum", b"abc123"), (b"x-count", b"1")]
        answer = await _with_trailers(t.actual(plane), trailers, protocol is BackendProtocol.GRPC)
    assert answer.status == 200
    assert seen == [trailers]
    assert answer.header(b"x-got-x-checksum") == b"abc123"


async def test_trailers_with_a_pseudo_header_are_malformed(
    backend: tuple[int, list[list[tuple[bytes, bytes]]]],
) -> None:
    port, seen = backend
    async with t.running(_snapshot(port, BackendProtocol.H2C)) as plane:
        answer = await _with_trailers(t.actual(plane), [(b":path", b"/x")], False)
    assert answer.reset == 1  # PROTOCOL_ERROR
    assert seen == []


@pytest.mark.parametrize("backend", ["reset"], indirect=True)
async def test_a_grpc_backend_resetting_mid_response_is_unavailable(
    backend: tuple[int, list[list[tuple[bytes, bytes]]]],
) -> None:
    port, _ = backend
    async with (
        t.running(_snapshot(port, BackendProtocol.GRPC)) as plane,
        grpc.aio.insecure_channel(f"127.0.0.1:{t.actual(plane)}") as channel,
    ):
        call = channel.unary_stream("/svc.S/Stream")(b"")
        first = await call.read()
        with pytest.raises(grpc.aio.AioRpcError) as failed:
            await call.read()
    assert first == b"one"  # the response had begun
    assert failed.value.code() == grpc.StatusCode.UNAVAILABLE


async def _echo(request: bytes, context: object) -> bytes:
    return b"tls:" + request


async def test_a_grpc_backend_under_a_backend_tls_policy_is_http2_over_tls() -> None:
    ca = CertificateAuthority.create()
    issued = ca.issue(dns=["grpc.backend.example"])
    server = grpc.aio.server()
    handler = grpc.unary_unary_rpc_method_handler(_echo, bytes, bytes)
    server.add_generic_rpc_handlers(
        (grpc.method_handlers_generic_handler("svc.S", {"M": handler}),)
    )
    credentials = grpc.ssl_server_credentials([(issued.key_pem, issued.chain_pem)])
    port = server.add_secure_port("127.0.0.1:0", credentials)
    await server.start()
    tls = UpstreamTLS(sni="grpc.backend.example", ca_bundle_pem=ca.certificate_pem)
    backend = Backend(endpoints="endpoints/default/b/80", protocol=BackendProtocol.GRPC, tls=tls)
    resources: list[t.Resource] = [
        t.HTTP_LISTENER,
        t.endpoints("b", port),
        t.routes("", t.rule("r", backend)),
    ]
    try:
        async with (
            t.running(resources) as plane,
            grpc.aio.insecure_channel(f"127.0.0.1:{t.actual(plane)}") as channel,
        ):
            call = channel.unary_unary("/svc.S/M")(b"hi")
            assert await call == b"tls:hi"
            assert await call.code() == grpc.StatusCode.OK
    finally:
        await server.stop(None)
