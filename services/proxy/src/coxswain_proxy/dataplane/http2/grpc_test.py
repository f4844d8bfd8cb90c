"""gRPC through the proxy: a grpcio client, the proxy, a grpcio server (each call type).

Covers: unary, server-streaming, client-streaming and bidirectional calls by h2c prior knowledge
and over TLS with ALPN h2, metadata both ways and trailing metadata, a trailers-only error
status from the server, and the proxy's own answers as gRPC statuses (docs/proxy.md): no route
UNIMPLEMENTED, no ready endpoint UNAVAILABLE, the route's timeout DEADLINE_EXCEEDED; and a
client deadline shorter than the route's reaches the client as DEADLINE_EXCEEDED.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import grpc
import pytest

from coxswain_devkit.pki import CertificateAuthority
from coxswain_proxy.dataplane import testing as t
from coxswain_routing import (
    Backend,
    BackendProtocol,
    ListenerProtocol,
    TlsCertificate,
    TlsStore,
)

CA = CertificateAuthority.create()
SERVICE = "/echo.Echo/"


def _raw(data: bytes) -> bytes:
    return data


async def _unary(request: bytes, context: Any) -> bytes:
    sent = dict(context.invocation_metadata() or ())
    await context.send_initial_metadata((("x-seen", str(sent.get("x-meta", ""))),))
    context.set_trailing_metadata((("x-trail", "done"),))
    return b"echo:" + request


async def _server_stream(request: bytes, context: Any) -> AsyncIterator[bytes]:
    for i in range(3):
        yield request + b"%d" % i


async def _client_stream(requests: AsyncIterator[bytes], context: Any) -> bytes:
    return b"+".join([r async for r in requests])


async def _bidi(requests: AsyncIterator[bytes], context: Any) -> AsyncIterator[bytes]:
    async for r in requests:
        yield r.upper()


async def _fail(request: bytes, context: Any) -> bytes:
    await context.abort(grpc.StatusCode.NOT_FOUND, "no such thing")
    return b""


async def _slow(request: bytes, context: Any) -> bytes:
    await asyncio.sleep(30)
    return b""


_METHODS = {
    "Unary": grpc.unary_unary_rpc_method_handler(_unary, _raw, _raw),
    "ServerStream": grpc.unary_stream_rpc_method_handler(_server_stream, _raw, _raw),
    "ClientStream": grpc.stream_unary_rpc_method_handler(_client_stream, _raw, _raw),
    "Bidi": grpc.stream_stream_rpc_method_handler(_bidi, _raw, _raw),
    "Fail": grpc.unary_unary_rpc_method_handler(_fail, _raw, _raw),
    "Slow": grpc.unary_unary_rpc_method_handler(_slow, _raw, _raw),
}


@pytest.fixture
async def server() -> AsyncIterator[int]:
    backend = grpc.aio.server()
    backend.add_generic_rpc_handlers((grpc.method_handlers_generic_handler("echo.Echo", _METHODS),))
    port = backend.add_insecure_port("127.0.0.1:0")
    await backend.start()
    try:
        yield port
    finally:
        await backend.stop(None)


def _grpc_backend() -> Backend:
    return Backend(endpoints="endpoints/default/g/80", protocol=BackendProtocol.GRPC)


def _rules(timeouts: t.Timeouts = t.NO_TIMEOUTS) -> t.Rule:
    return t.rule("g", _grpc_backend(), path=SERVICE, timeouts=timeouts)


def _snapshot(port: int, timeouts: t.Timeouts = t.NO_TIMEOUTS) -> list[t.Resource]:
    return [t.HTTP_LISTENER, t.endpoints("g", port), t.routes("", _rules(timeouts))]


async def _all_call_types(channel: grpc.aio.Channel) -> None:
    unary = channel.unary_unary(SERVICE + "Unary")
    call = unary(b"hi", metadata=(("x-meta", "m1"),))
    assert await call == b"echo:hi"
    assert ("x-seen", "m1") in tuple(await call.initial_metadata())
    assert ("x-trail", "done") in tuple(await call.trailing_metadata())
    assert await call.code() == grpc.StatusCode.OK
    streamed = channel.unary_stream(SERVICE + "ServerStream")(b"n")
    assert [m async for m in streamed] == [b"n0", b"n1", b"n2"]

    async def three() -> AsyncIterator[bytes]:
        for part in (b"a", b"b", b"c"):
            yield part

    assert await channel.stream_unary(SERVICE + "ClientStream")(three()) == b"a+b+c"
    bidi = channel.stream_stream(SERVICE + "Bidi")()
    for word in (b"x", b"y"):
        await bidi.write(word)
        assert await bidi.read() == word.upper()  # each reply before the next message
    await bidi.done_writing()
    assert await bidi.code() == grpc.StatusCode.OK
    with pytest.raises(grpc.aio.AioRpcError) as failed:
        await channel.unary_unary(SERVICE + "Fail")(b"")
    assert failed.value.code() == grpc.StatusCode.NOT_FOUND  # a trailers-only response
    assert failed.value.details() == "no such thing"


async def test_each_call_type_by_prior_knowledge(server: int) -> None:
    async with (
        t.running(_snapshot(server)) as plane,
        grpc.aio.insecure_channel(f"127.0.0.1:{t.actual(plane)}") as channel,
    ):
        await _all_call_types(channel)


async def test_each_call_type_over_tls_with_alpn_h2(server: int) -> None:
    issued = CA.issue(dns=["grpc.example.com"])
    store = TlsStore(
        t.TLS_PORT,
        (TlsCertificate(("grpc.example.com",), issued.chain_pem, issued.key_pem, "ns/g"),),
    )
    resources: list[t.Resource] = [
        t.listeners((t.TLS_PORT, ListenerProtocol.HTTPS, "grpc.example.com")),
        t.endpoints("g", server),
        t.routes("grpc.example.com", _rules(), port=t.TLS_PORT),
        store,
    ]
    credentials = grpc.ssl_channel_credentials(root_certificates=CA.certificate_pem)
    options = (("grpc.ssl_target_name_override", "grpc.example.com"),)
    async with t.running(resources) as plane:
        target = f"127.0.0.1:{t.actual(plane, t.TLS_PORT)}"
        async with grpc.aio.secure_channel(target, credentials, options) as channel:
            await _all_call_types(channel)


async def _status(port: int, method: str, deadline: float | None = None) -> grpc.StatusCode:
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
        with pytest.raises(grpc.aio.AioRpcError) as failed:
            await channel.unary_unary(method)(b"", timeout=deadline)
    code: grpc.StatusCode = failed.value.code()
    return code


async def test_no_route_is_unimplemented(server: int) -> None:
    async with t.running(_snapshot(server)) as plane:
        assert await _status(t.actual(plane), "/other.Svc/Call") == grpc.StatusCode.UNIMPLEMENTED


async def test_no_ready_endpoint_is_unavailable(server: int) -> None:
    resources: list[t.Resource] = [
        t.HTTP_LISTENER,
        t.endpoints("g", server, ready=False),
        t.routes("", _rules()),
    ]
    async with t.running(resources) as plane:
        assert await _status(t.actual(plane), SERVICE + "Unary") == grpc.StatusCode.UNAVAILABLE


async def test_the_routes_timeout_is_deadline_exceeded(server: int) -> None:
    async with t.running(_snapshot(server, t.Timeouts(request_ms=200))) as plane:
        code = await _status(t.actual(plane), SERVICE + "Slow")
    assert code == grpc.StatusCode.DEADLINE_EXCEEDED


async def test_a_client_deadline_inside_the_routes_timeout_is_deadline_exceeded(
    server: int,
) -> None:
    async with t.running(_snapshot(server, t.Timeouts(request_ms=60_000))) as plane:
        code = await _status(t.actual(plane), SERVICE + "Slow", deadline=0.3)
    assert code == grpc.StatusCode.DEADLINE_EXCEEDED
