"""grpc.aio bindings for the Discovery and Identity services.

betterproto2 generates messages and sync grpcio stubs only, so this module supplies what
grpc.aio needs for each method: its path and its (de)serialisers, for servers and for clients.
Messages travel as their protobuf bytes (`bytes(message)` / `Message.parse`).

A server treats every request as untrusted bytes. Each is checked against its schema before
betterproto2 parses it (`_wire`: betterproto2 alone turns a varint sent where a string belongs
into an `int`, and worse), and one that is not well formed never reaches the handler as a
message: a unary handler's call ends INVALID_ARGUMENT, and a stream's request iterator raises
`MalformedMessage` at it. Both details are fixed text naming the field ("subscribe.node_id:
invalid"). An exception escaping a handler ends that call alone, INTERNAL with fixed text: the
exception's own text (which grpc would otherwise send as UNKNOWN) stays in the server's log.

`WIRE_VERSION` is the discovery protocol's version: a proxy sends it in Subscribe and the
controller refuses a stream whose version differs (FAILED_PRECONDITION naming both).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, Protocol, TypeVar, cast

import betterproto2
import grpc
import grpc.aio

from coxswain_proto import _wire, discovery, identity

__all__ = [
    "WIRE_VERSION",
    "DISCOVERY_SERVICE",
    "DISCOVERY_STREAM",
    "IDENTITY_SERVICE",
    "IDENTITY_ISSUE_SVID",
    "INTERNAL_DETAIL",
    "DiscoveryHandler",
    "IssueSvidHandler",
    "MalformedHandler",
    "MalformedMessage",
    "add_discovery_handler",
    "add_identity_handler",
    "decode",
    "discovery_stream",
    "issue_svid",
]

log = logging.getLogger(__name__)

WIRE_VERSION = 1

# The largest discovery message either end will handle: a full snapshot, about 200 bytes per
# simple route. gRPC's default receive limit (4 MiB) would refuse one above about 21k routes, and
# a proxy that reconnected would then never be served again (RESOURCE_EXHAUSTED on every dial).
MAX_SNAPSHOT_BYTES = 64 * 1024 * 1024

DISCOVERY_SERVICE = "coxswain.discovery.v1.Discovery"
DISCOVERY_STREAM = f"/{DISCOVERY_SERVICE}/Stream"
IDENTITY_SERVICE = "coxswain.identity.v1.Identity"
IDENTITY_ISSUE_SVID = f"/{IDENTITY_SERVICE}/IssueSvid"

# What a caller is told when a handler fails: never the exception's text.
INTERNAL_DETAIL = "internal error"

M = TypeVar("M", bound=betterproto2.Message)


class MalformedMessage(ValueError):
    """Request bytes that are not a well-formed encoding of the message expected.

    `field` names the first field found wrong ("subscribe.node_id"), or the message type when
    its own framing is; `detail` is what the peer is told: fixed text naming the field, never
    the bytes nor any exception's text.
    """

    def __init__(self, field: str) -> None:
        super().__init__(field)
        self.field = field

    @property
    def detail(self) -> str:
        return f"{self.field}: invalid"


def decode(cls: type[M], data: bytes) -> M:
    """`cls.parse(data)`, once `data` is known to be well formed; else `MalformedMessage`."""
    try:
        _wire.check(cls, data)
    except _wire.WireError as err:
        raise MalformedMessage(err.path or cls.__name__) from None
    try:
        return cls.parse(data)
    except Exception:  # noqa: BLE001 - the checks above leave nothing known to fail here
        raise MalformedMessage(cls.__name__) from None


class DiscoveryHandler(Protocol):
    """The server side of Stream: proxy messages in, controller messages out.

    Iterating `requests` raises `MalformedMessage` where a message is not well formed.
    """

    def __call__(
        self, requests: AsyncIterator[discovery.ProxyMessage], context: grpc.aio.ServicerContext
    ) -> AsyncIterator[discovery.ControllerMessage]: ...


IssueSvidHandler = Callable[
    [identity.IssueSvidRequest, grpc.aio.ServicerContext], Awaitable[identity.IssueSvidResponse]
]
# Told of a malformed request before its call ends INVALID_ARGUMENT (to count and log it).
MalformedHandler = Callable[[MalformedMessage, grpc.aio.ServicerContext], None]


def _serialize(message: Any) -> bytes:
    return bytes(message)


def _lenient(cls: type[M]) -> Callable[[bytes], M | MalformedMessage]:
    """A request deserializer that never raises: what grpc does with a raising one is its own
    choice of code and text, so a malformed request is handed on as its `MalformedMessage`."""

    def deserialize(data: bytes) -> M | MalformedMessage:
        try:
            return decode(cls, data)
        except MalformedMessage as err:
            return err

    return deserialize


async def _raising(requests: AsyncIterator[Any]) -> AsyncIterator[Any]:
    async for request in requests:
        if isinstance(request, MalformedMessage):
            raise request
        yield request


def _stream_guard(handler: DiscoveryHandler) -> Callable[..., AsyncIterator[Any]]:
    async def stream(
        requests: AsyncIterator[Any], context: grpc.aio.ServicerContext
    ) -> AsyncIterator[Any]:
        try:
            async for reply in handler(_raising(requests), context):
                yield reply
        except grpc.aio.AbortError:
            raise
        except MalformedMessage as err:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, err.detail)
        except Exception:
            log.exception("discovery stream handler failed")
            await context.abort(grpc.StatusCode.INTERNAL, INTERNAL_DETAIL)

    return stream


def _unary_guard(
    handler: IssueSvidHandler, on_malformed: MalformedHandler | None
) -> Callable[..., Awaitable[Any]]:
    async def unary(request: Any, context: grpc.aio.ServicerContext) -> Any:
        try:
            if not isinstance(request, MalformedMessage):
                return await handler(request, context)
            if on_malformed is not None:
                on_malformed(request, context)
        except grpc.aio.AbortError:
            raise
        except Exception:
            log.exception("identity handler failed")
            await context.abort(grpc.StatusCode.INTERNAL, INTERNAL_DETAIL)
        await context.abort(grpc.StatusCode.INVALID_ARGUMENT, request.detail)

    return unary


def add_discovery_handler(server: grpc.aio.Server, handler: DiscoveryHandler) -> None:
    method = grpc.stream_stream_rpc_method_handler(
        _stream_guard(handler),
        request_deserializer=_lenient(discovery.ProxyMessage),
        response_serializer=_serialize,
    )
    server.add_generic_rpc_handlers(
        (grpc.method_handlers_generic_handler(DISCOVERY_SERVICE, {"Stream": method}),)
    )


def add_identity_handler(
    server: grpc.aio.Server,
    handler: IssueSvidHandler,
    *,
    on_malformed: MalformedHandler | None = None,
) -> None:
    method = grpc.unary_unary_rpc_method_handler(
        _unary_guard(handler, on_malformed),
        request_deserializer=_lenient(identity.IssueSvidRequest),
        response_serializer=_serialize,
    )
    server.add_generic_rpc_handlers(
        (grpc.method_handlers_generic_handler(IDENTITY_SERVICE, {"IssueSvid": method}),)
    )


def discovery_stream(channel: grpc.aio.Channel) -> grpc.aio.StreamStreamMultiCallable:
    """A callable opening Stream on `channel`: `call = discovery_stream(ch)(requests)`."""
    return cast(
        grpc.aio.StreamStreamMultiCallable,
        channel.stream_stream(
            DISCOVERY_STREAM,
            request_serializer=_serialize,
            response_deserializer=discovery.ControllerMessage.parse,
        ),
    )


def issue_svid(channel: grpc.aio.Channel) -> grpc.aio.UnaryUnaryMultiCallable:
    """A callable for IssueSvid on `channel`: `response = await issue_svid(ch)(request)`."""
    return cast(
        grpc.aio.UnaryUnaryMultiCallable,
        channel.unary_unary(
            IDENTITY_ISSUE_SVID,
            request_serializer=_serialize,
            response_deserializer=identity.IssueSvidResponse.parse,
        ),
    )
