"""grpc.aio bindings for the Discovery and Identity services.

betterproto2 generates messages and sync grpcio stubs only, so this module supplies what
grpc.aio needs for each method: its path and its (de)serialisers, for servers and for clients.
Messages travel as their protobuf bytes (`bytes(message)` / `Message.parse`).

`WIRE_VERSION` is the discovery protocol's version: a proxy sends it in Subscribe and the
controller refuses a stream whose version differs (FAILED_PRECONDITION naming both).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, Protocol, cast

import grpc
import grpc.aio

from coxswain_proto import discovery, identity

__all__ = [
    "WIRE_VERSION",
    "DISCOVERY_SERVICE",
    "DISCOVERY_STREAM",
    "IDENTITY_SERVICE",
    "IDENTITY_ISSUE_SVID",
    "DiscoveryHandler",
    "IssueSvidHandler",
    "add_discovery_handler",
    "add_identity_handler",
    "discovery_stream",
    "issue_svid",
]

WIRE_VERSION = 1

DISCOVERY_SERVICE = "coxswain.discovery.v1.Discovery"
DISCOVERY_STREAM = f"/{DISCOVERY_SERVICE}/Stream"
IDENTITY_SERVICE = "coxswain.identity.v1.Identity"
IDENTITY_ISSUE_SVID = f"/{IDENTITY_SERVICE}/IssueSvid"


class DiscoveryHandler(Protocol):
    """The server side of Stream: proxy messages in, controller messages out."""

    def __call__(
        self, requests: AsyncIterator[discovery.ProxyMessage], context: grpc.aio.ServicerContext
    ) -> AsyncIterator[discovery.ControllerMessage]: ...


IssueSvidHandler = Callable[
    [identity.IssueSvidRequest, grpc.aio.ServicerContext], Awaitable[identity.IssueSvidResponse]
]


def _serialize(message: Any) -> bytes:
    return bytes(message)


def add_discovery_handler(server: grpc.aio.Server, handler: DiscoveryHandler) -> None:
    method = grpc.stream_stream_rpc_method_handler(
        handler,
        request_deserializer=discovery.ProxyMessage.parse,
        response_serializer=_serialize,
    )
    server.add_generic_rpc_handlers(
        (grpc.method_handlers_generic_handler(DISCOVERY_SERVICE, {"Stream": method}),)
    )


def add_identity_handler(server: grpc.aio.Server, handler: IssueSvidHandler) -> None:
    method = grpc.unary_unary_rpc_method_handler(
        handler,
        request_deserializer=identity.IssueSvidRequest.parse,
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
