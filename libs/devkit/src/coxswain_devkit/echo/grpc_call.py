"""One call of the gRPC echo service, for trying a GRPCRoute by hand (`coxswain-devkit grpc-call`).

    coxswain-devkit grpc-call 127.0.200.2:80 --authority grpc.demo.example -H x-user:alice

grpcurl is not on these machines and the echo's schema is not compiled into stubs anywhere an
operator has them, so this makes the call with grpcio's generic unary call and the devkit's own
codec (`grpc_messages`): the request is an empty `EchoRequest`, the answer's `Assertions` are
printed as JSON (the method the backend ran, the authority and metadata it received, the pod
and namespace it runs as). Cleartext HTTP/2 by prior knowledge by default, as gRPC clients
speak to an HTTP listener; `--cacert` calls over TLS, naming the authority for SNI. A failed
call prints its status code and message and exits 1. grpcio is imported when a call is made:
`coxswain-devkit`'s other commands (every echo, the node, the load balancer) need not load it.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from coxswain_devkit.echo import grpc_messages as pb

__all__ = ["add_parser", "call", "describe", "run"]


def call(
    target: str,
    *,
    authority: str = "",
    method: str = "Echo",
    metadata: Sequence[tuple[str, str]] = (),
    ca_file: Path | None = None,
    timeout: float = 10.0,
) -> pb.Assertions:
    """One unary call of `method` (Echo, EchoTwo, EchoThree, or a full /service/method path)
    at `target` (host:port); raises `grpc.RpcError` when the call fails."""
    import grpc

    path = method if method.startswith("/") else f"/{pb.SERVICE}/{method}"
    options: list[tuple[str, str]] = [("grpc.default_authority", authority)] if authority else []
    if ca_file is None:
        channel = grpc.insecure_channel(target, options)
    else:
        if authority:
            options.append(("grpc.ssl_target_name_override", authority))
        credentials = grpc.ssl_channel_credentials(root_certificates=ca_file.read_bytes())
        channel = grpc.secure_channel(target, credentials, options)
    with channel:
        unary = channel.unary_unary(path, request_serializer=None, response_deserializer=None)
        reply = unary(b"", timeout=timeout, metadata=tuple(metadata))
    return pb.EchoResponse.decode(reply).assertions


def describe(assertions: pb.Assertions) -> dict[str, Any]:
    """What the echo saw, as JSON the way the HTTP echo answers (`headers`: name -> values)."""
    headers: dict[str, list[str]] = {}
    for header in assertions.headers:
        headers.setdefault(header.key, []).append(header.value)
    context = assertions.context or pb.Context()
    return {
        "method": assertions.fully_qualified_method,
        "authority": assertions.authority,
        "namespace": context.namespace,
        "pod": context.pod,
        "headers": headers,
        "tls": assertions.tls_assertions is not None,
    }


def add_parser(commands: Any) -> None:
    parser = commands.add_parser("grpc-call", help="call the echo's gRPC service once")
    parser.add_argument("target", help="host:port to call, e.g. a Gateway's HTTP listener")
    parser.add_argument("--authority", default="", help="the :authority (the route's hostname)")
    parser.add_argument("--method", default="Echo", help="Echo, EchoTwo, EchoThree or /svc/m")
    parser.add_argument(
        "-H", "--metadata", action="append", default=[], metavar="KEY:VALUE",
        help="request metadata (repeatable)",
    )  # fmt: skip
    parser.add_argument("--cacert", type=Path, help="call over TLS, trusting this CA file")
    parser.add_argument("--timeout", type=float, default=10.0, help="the call's deadline, s")


def run(args: argparse.Namespace) -> int:
    import grpc

    metadata = []
    for item in args.metadata:
        key, sep, value = item.partition(":")
        if not sep or not key.strip():
            print(f"grpc-call: -H wants KEY:VALUE, not {item!r}", file=sys.stderr)
            return 2
        metadata.append((key.strip().lower(), value.strip()))
    try:
        seen = call(
            args.target,
            authority=args.authority,
            method=args.method,
            metadata=metadata,
            ca_file=args.cacert,
            timeout=args.timeout,
        )
    except grpc.RpcError as exc:
        failed: Any = exc  # a grpc.Call too: it has code() and details()
        print(f"grpc-call: {failed.code().name}: {failed.details()}", file=sys.stderr)
        return 1
    print(json.dumps(describe(seen), indent=2))
    return 0
