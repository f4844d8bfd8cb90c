"""Request decoding and the server bindings' guards: bytes in, a message or a named field out.

Covers `decode` against betterproto2's own leniency (wrong wire types for strings, integers,
enums and nested messages; truncation; groups and unused wire types; invalid UTF-8; two members
of one oneof; over-long varints), what it must still accept (unknown fields, packed and unpacked
repeated scalars, every well-formed message), and, over a real grpc.aio server on 127.0.0.1,
that a malformed request ends INVALID_ARGUMENT and a handler's exception INTERNAL, both with
fixed text. mTLS, and each service's own field checks, are the services' tests.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import grpc
import grpc.aio
import pytest

from coxswain_devkit.protowire import I32, I64, LEN, VARINT, f_len, tag, varint
from coxswain_proto import discovery, identity, rpc


@pytest.mark.parametrize(
    ("cls", "data", "field"),
    [
        pytest.param(
            identity.IssueSvidRequest, tag(1, VARINT) + b"\x05", "token", id="string-as-varint"
        ),
        pytest.param(
            identity.IssueSvidRequest, tag(1, I64) + b"\0" * 8, "token", id="string-as-fixed64"
        ),
        pytest.param(
            identity.IssueSvidRequest, tag(1, I32) + b"\0" * 4, "token", id="string-as-fixed32"
        ),
        pytest.param(
            identity.IssueSvidRequest, tag(2, VARINT) + b"\x05", "csr_pem", id="bytes-as-varint"
        ),
        pytest.param(
            identity.IssueSvidRequest, f_len(1, b"\xc3\x28"), "token", id="string-not-utf8"
        ),
        pytest.param(
            discovery.Subscribe, f_len(2, b"\x01"), "wire_version", id="uint32-packed-not-repeated"
        ),
        pytest.param(
            discovery.Subscribe, tag(2, I32) + b"\0" * 4, "wire_version", id="uint32-as-fixed32"
        ),
        pytest.param(
            discovery.BoundPort, tag(2, I64) + b"\0" * 8, "protocol", id="enum-as-fixed64"
        ),
        pytest.param(
            discovery.ProxyMessage, tag(1, VARINT) + b"\x05", "subscribe", id="message-as-varint"
        ),
        pytest.param(
            discovery.ProxyMessage,
            f_len(1, tag(3, VARINT) + b"\x01"),
            "subscribe.scope",
            id="nested-message-as-varint",
        ),
        pytest.param(
            discovery.NodeStatus, tag(1, I32) + b"\0" * 4, "bound", id="repeated-message-as-fixed32"
        ),
        pytest.param(
            discovery.ProxyMessage,
            f_len(1, b"") + f_len(4, b""),
            "node_status",
            id="two-oneof-members",
        ),
        pytest.param(
            discovery.ProxyMessage,
            tag(1, LEN) + varint(9) + b"ab",
            "subscribe",
            id="truncated-length",
        ),
        pytest.param(
            discovery.ProxyMessage, tag(1, I64) + b"\0", "subscribe", id="truncated-fixed64"
        ),
        pytest.param(discovery.ProxyMessage, tag(1, 3), "subscribe", id="group-start"),
        pytest.param(discovery.ProxyMessage, tag(1, 4), "subscribe", id="group-end"),
        pytest.param(discovery.ProxyMessage, tag(1, 6), "subscribe", id="wire-type-6"),
        pytest.param(
            discovery.ProxyMessage, tag(99, 7), "ProxyMessage", id="unknown-field-wire-type-7"
        ),
        pytest.param(discovery.ProxyMessage, b"\x00\x00", "ProxyMessage", id="field-number-0"),
        pytest.param(
            discovery.Subscribe,
            tag(2, VARINT) + b"\xff" * 10 + b"\x01",
            "wire_version",
            id="varint-11-bytes",
        ),
        pytest.param(
            discovery.Subscribe, tag(2, VARINT) + b"\xff", "wire_version", id="varint-unterminated"
        ),
        pytest.param(discovery.Retry, f_len(2, b"\x01\xff"), "codes", id="packed-truncated-varint"),
        pytest.param(
            discovery.Endpoint, f_len(1, b"\xff"), "address", id="nested-resource-not-utf8"
        ),
    ],
)
def test_malformed_bytes_name_the_first_wrong_field(cls: Any, data: bytes, field: str) -> None:
    with pytest.raises(rpc.MalformedMessage) as caught:
        rpc.decode(cls, data)
    assert caught.value.field == field
    assert caught.value.detail == f"{field}: invalid"


@pytest.mark.parametrize(
    "message",
    [
        pytest.param(discovery.ProxyMessage(), id="empty"),
        pytest.param(
            discovery.ProxyMessage(
                subscribe=discovery.Subscribe(
                    node_id="proxy-1",
                    wire_version=rpc.WIRE_VERSION,
                    scope=discovery.Scope(
                        gateway=discovery.ScopeGateway(namespace="shop", name="gw")
                    ),
                )
            ),
            id="subscribe",
        ),
        pytest.param(
            discovery.ProxyMessage(
                node_status=discovery.NodeStatus(
                    bound=[discovery.BoundPort(port=80, protocol=discovery.ListenerProtocol.HTTP)]
                )
            ),
            id="node-status",
        ),
        pytest.param(discovery.Retry(attempts=2, codes=[500, 503]), id="packed-repeated"),
        pytest.param(identity.IssueSvidRequest(token="a.b.c", csr_pem=b"\xff\x00"), id="bytes"),
    ],
)
def test_well_formed_messages_decode_as_betterproto2_would(message: Any) -> None:
    data = bytes(message)
    assert rpc.decode(type(message), data) == type(message).parse(data)


def test_unknown_fields_are_skipped_and_unpacked_repeated_scalars_accepted() -> None:
    unknown = tag(15, VARINT) + b"\x01" + f_len(16, b"later") + tag(17, I32) + b"\0" * 4
    data = tag(2, VARINT) + varint(500) + tag(2, VARINT) + varint(503) + unknown
    assert rpc.decode(discovery.Retry, data).codes == [500, 503]


# ------------------------------------------------------------------ the guards, over grpc


async def _issue(
    request: identity.IssueSvidRequest, context: grpc.aio.ServicerContext
) -> identity.IssueSvidResponse:
    if request.token == "boom":
        raise RuntimeError("secret internals")
    return identity.IssueSvidResponse(not_after_seconds=7)


async def _stream(
    requests: AsyncIterator[discovery.ProxyMessage], context: grpc.aio.ServicerContext
) -> AsyncIterator[discovery.ControllerMessage]:
    async for message in requests:
        if message.ack is not None:
            raise RuntimeError("secret internals")
        yield discovery.ControllerMessage(snapshot=discovery.Snapshot(version="v"))


@pytest.fixture
async def channel() -> AsyncIterator[grpc.aio.Channel]:
    server = grpc.aio.server()
    rpc.add_identity_handler(server, _issue)
    rpc.add_discovery_handler(server, _stream)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel_:
            yield channel_
    finally:
        await server.stop(None)


async def _unary_error(channel: grpc.aio.Channel, data: bytes) -> grpc.aio.AioRpcError:
    call = channel.unary_unary(rpc.IDENTITY_ISSUE_SVID, request_serializer=None)
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await call(data)
    return caught.value


async def test_a_unary_call_malformed_or_failing_gets_fixed_text(
    channel: grpc.aio.Channel,
) -> None:
    err = await _unary_error(channel, tag(1, VARINT) + b"\x05")
    assert (err.code(), err.details()) == (grpc.StatusCode.INVALID_ARGUMENT, "token: invalid")
    err = await _unary_error(channel, bytes(identity.IssueSvidRequest(token="boom")))
    assert (err.code(), err.details()) == (grpc.StatusCode.INTERNAL, rpc.INTERNAL_DETAIL)
    response = await rpc.issue_svid(channel)(identity.IssueSvidRequest(token="fine"))
    assert response.not_after_seconds == 7


async def _stream_error(channel: grpc.aio.Channel, data: bytes) -> grpc.aio.AioRpcError:
    call: Any = channel.stream_stream(rpc.DISCOVERY_STREAM, request_serializer=None)()
    await call.write(bytes(discovery.ProxyMessage(subscribe=discovery.Subscribe())))
    assert await call.read() is not grpc.aio.EOF
    await call.write(data)
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await call.read()
    return caught.value


async def test_a_stream_malformed_or_failing_gets_fixed_text(channel: grpc.aio.Channel) -> None:
    err = await _stream_error(channel, f_len(1, tag(1, VARINT) + b"\x05"))
    assert (err.code(), err.details()) == (
        grpc.StatusCode.INVALID_ARGUMENT,
        "subscribe.node_id: invalid",
    )
    err = await _stream_error(channel, bytes(discovery.ProxyMessage(ack=discovery.Ack())))
    assert (err.code(), err.details()) == (grpc.StatusCode.INTERNAL, rpc.INTERNAL_DETAIL)
