"""The echo backend's gRPC side: the conformance suite's `GrpcEcho` service, answered as it is.

The Gateway API conformance tests for GRPCRoute call `gateway_api_conformance.echo_basic.
grpcecho.GrpcEcho` (methods `Echo`, `EchoTwo`; `EchoThree` is deliberately unimplemented) and
check the `EchoResponse` it returns: the fully qualified method called, the pod, namespace and
service it ran on (`Context`), the request metadata it received (`headers`) and the
`:authority`. This module answers those calls the same way, so the same assertions hold
against the devkit echo (`grpc_messages` holds the messages; `grpcecho.proto` the schema).

Why not grpcio's server: its handlers never see `:authority` (the conformance echo reports it),
so the calls are served over the echo's own HTTP/2 server (`h2c`), which hands each gRPC stream
here whole: `answer` is a pure function from the request to the frames of the reply. Any other
method is UNIMPLEMENTED, as a gRPC server that does not know it answers. The metadata echoed
are the request's fields less those gRPC itself consumes (as grpc-go's metadata holds them),
plus `:authority`; a `-bin` value is given decoded when its bytes are UTF-8.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass
from urllib.parse import quote

from coxswain_devkit.echo import grpc_messages as pb
from coxswain_devkit.echo.web import Identity

__all__ = ["Reply", "answer", "is_grpc", "OK", "UNIMPLEMENTED", "INTERNAL", "RESOURCE_EXHAUSTED"]

OK, RESOURCE_EXHAUSTED, UNIMPLEMENTED, INTERNAL = 0, 8, 12, 13
MAX_REQUEST = 4 * 1024 * 1024  # gRPC's default limit on a received message
# Fields gRPC consumes itself, which grpc-go's server keeps out of the metadata it hands on.
_RESERVED = frozenset(
    {b"te", b"grpc-timeout", b"grpc-encoding", b"grpc-message-type", b"grpc-message",
     b"grpc-status", b"grpc-status-details-bin"}
)  # fmt: skip
_IMPLEMENTED = frozenset({pb.ECHO, pb.ECHO_TWO})


@dataclass(frozen=True, slots=True)
class Reply:
    """The frames of one answer: HEADERS, then DATA and trailing HEADERS when `trailers` is set;
    a "Trailers-Only" answer is its HEADERS alone, ending the stream."""

    headers: list[tuple[bytes, bytes]]
    data: bytes = b""
    trailers: list[tuple[bytes, bytes]] | None = None


def is_grpc(headers: list[tuple[bytes, bytes]]) -> bool:
    return any(n == b"content-type" and v.startswith(b"application/grpc") for n, v in headers)


def answer(
    headers: list[tuple[bytes, bytes]],
    body: bytes,
    identity: Identity,
    tls: pb.TLSAssertions | None = None,
) -> Reply:
    """The reply to one gRPC request (its HTTP/2 header block and whole body)."""
    pseudo = {n: v for n, v in headers if n.startswith(b":")}
    method = pseudo.get(b":path", b"").decode("latin-1")
    if method not in _IMPLEMENTED:
        return _status(UNIMPLEMENTED, f"unknown method {method}" if method not in pb.METHODS
                       else f"method {method.rsplit('/', 1)[-1]} not implemented")  # fmt: skip
    try:
        found = pb.messages(body)
        if len(found) != 1:
            return _status(INTERNAL, f"a unary call got {len(found)} request messages")
        if found[0][0]:
            return _status(UNIMPLEMENTED, "compressed messages are not supported")
        pb.EchoResponse.decode(found[0][1])  # an EchoRequest has no fields: only well-formed
    except pb.DecodeError as exc:
        return _status(INTERNAL, f"request not decodable: {exc}")
    authority = pseudo.get(b":authority", b"").decode("latin-1")
    assertions = pb.Assertions(
        fully_qualified_method=method,
        headers=(pb.Header(":authority", authority), *_metadata(headers)),
        authority=authority,
        context=pb.Context(identity.namespace, "", identity.service, identity.pod),
        tls_assertions=tls,
    )
    data = pb.frame(pb.EchoResponse(assertions).encode())
    return Reply(_head(), data, [(b"grpc-status", b"0")])


def too_large() -> Reply:
    return _status(RESOURCE_EXHAUSTED, f"request larger than {MAX_REQUEST} bytes")


def _metadata(headers: list[tuple[bytes, bytes]]) -> list[pb.Header]:
    kept = []
    for name, value in headers:
        if name.startswith(b":") or name in _RESERVED:
            continue
        if name.endswith(b"-bin"):
            value = _unbase64(value)
        kept.append(pb.Header(name.decode("latin-1"), value.decode("utf-8", "replace")))
    return kept


def _unbase64(value: bytes) -> bytes:
    """gRPC sends binary metadata base64-encoded, padded or not; given decoded when UTF-8."""
    try:
        raw = base64.b64decode(value + b"=" * (-len(value) % 4), validate=True)
        raw.decode()
    except (binascii.Error, UnicodeDecodeError):
        return value
    return raw


def _head() -> list[tuple[bytes, bytes]]:
    return [(b":status", b"200"), (b"content-type", b"application/grpc")]


def _status(code: int, message: str) -> Reply:
    # gRPC over HTTP/2: "Status-Message → "grpc-message" Value", percent-encoded.
    text = quote(message, safe=" !\"#$&'()*+,-./:;<=>?@[\\]^_`{|}~").encode()
    return Reply([*_head(), (b"grpc-status", b"%d" % code), (b"grpc-message", text)])
