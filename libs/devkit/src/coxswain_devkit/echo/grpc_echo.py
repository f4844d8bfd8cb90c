"""The echo backend's gRPC side: any method of any service, answered with what it saw.

There is no .proto: the server registers a generic handler, so whatever `/package.Service/Method`
a test (or the proxy's GRPCRoute matching) calls is accepted. Messages travel as raw bytes; the
reply is JSON naming the method, the request metadata, the request size, and the backend's
namespace and pod. `ECHO_METHOD` is the conventional name tests call.
"""

from __future__ import annotations

import json
from typing import Any

import grpc

from coxswain_devkit.echo.web import Identity

ECHO_METHOD = "/coxswain.devkit.echo.v1.Echo/Echo"


def _identity(data: bytes) -> bytes:
    return data


class _EchoHandler(grpc.GenericRpcHandler):  # type: ignore[misc]
    def __init__(self, identity: Identity) -> None:
        self._identity = identity

    def service(self, details: Any) -> Any:
        method = str(details.method)

        async def unary(request: bytes, context: Any) -> bytes:
            metadata: dict[str, list[str]] = {}
            for key, value in context.invocation_metadata() or ():
                metadata.setdefault(key, []).append(
                    value if isinstance(value, str) else repr(value)
                )
            reply = {
                "method": method,
                "metadata": metadata,
                "request_size": len(request),
                "namespace": self._identity.namespace,
                "pod": self._identity.pod,
            }
            return json.dumps(reply).encode()

        return grpc.unary_unary_rpc_method_handler(
            unary, request_deserializer=_identity, response_serializer=_identity
        )


async def start(identity: Identity, host: str, port: int) -> tuple[Any, int]:
    """A started `grpc.aio` server and the port it bound (plaintext h2c)."""
    server = grpc.aio.server()
    server.add_generic_rpc_handlers((_EchoHandler(identity),))
    bound = server.add_insecure_port(f"{host}:{port}")
    await server.start()
    return server, bound
