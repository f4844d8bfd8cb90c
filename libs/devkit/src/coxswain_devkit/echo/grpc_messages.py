"""The conformance echo's messages (`grpcecho.proto`), encoded and decoded by hand.

Where it sits: `grpc_echo` answers with an `EchoResponse` built here; tests and the end-to-end
suite decode what a call through the proxy returned with `EchoResponse.decode`. Five small
messages do not justify generated code and its toolchain: the protobuf encoding of strings and
nested messages is a tag (`field << 3 | wire type`) then a length-prefixed payload
(`coxswain_devkit.protowire`), and decoding skips what it does not know, as proto3 does.
gRPC's own framing of a message (RFC-less, "Length-Prefixed-Message": a compressed flag byte
and a 4-byte big-endian length) is here too.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from coxswain_devkit import protowire
from coxswain_devkit.protowire import I32, I64, LEN, VARINT

__all__ = [
    "PACKAGE", "SERVICE", "METHODS", "ECHO", "ECHO_TWO", "ECHO_THREE",
    "Header", "Context", "TLSAssertions", "Assertions", "EchoResponse", "DecodeError",
    "frame", "messages",
]  # fmt: skip

PACKAGE = "gateway_api_conformance.echo_basic.grpcecho"
SERVICE = f"{PACKAGE}.GrpcEcho"
ECHO, ECHO_TWO, ECHO_THREE = (f"/{SERVICE}/{m}" for m in ("Echo", "EchoTwo", "EchoThree"))
METHODS = (ECHO, ECHO_TWO, ECHO_THREE)


class DecodeError(ValueError):
    """Bytes that are not a well-formed protobuf message (or gRPC message stream)."""


# ------------------------------------------------------------------------------ messages


@dataclass(frozen=True, slots=True)
class Header:
    key: str  # 1
    value: str  # 2

    def encode(self) -> bytes:
        return _strings((1, self.key), (2, self.value))

    @classmethod
    def decode(cls, data: bytes) -> Header:
        got = _text_fields(data, 2)
        return cls(got[1], got[2])


@dataclass(frozen=True, slots=True)
class Context:
    namespace: str = ""  # 1
    ingress: str = ""  # 2
    service_name: str = ""  # 3
    pod: str = ""  # 4

    def encode(self) -> bytes:
        return _strings(
            (1, self.namespace), (2, self.ingress), (3, self.service_name), (4, self.pod)
        )

    @classmethod
    def decode(cls, data: bytes) -> Context:
        got = _text_fields(data, 4)
        return cls(got[1], got[2], got[3], got[4])


@dataclass(frozen=True, slots=True)
class TLSAssertions:
    version: str = ""  # 1
    negotiated_protocol: str = ""  # 2
    server_name: str = ""  # 3
    cipher_suite: str = ""  # 4
    peer_certificates: tuple[str, ...] = ()  # 5, repeated

    def encode(self) -> bytes:
        head = _strings(
            (1, self.version), (2, self.negotiated_protocol), (3, self.server_name),
            (4, self.cipher_suite),
        )  # fmt: skip
        return head + b"".join(protowire.f_str(5, pem) for pem in self.peer_certificates)

    @classmethod
    def decode(cls, data: bytes) -> TLSAssertions:
        scalars: dict[int, str] = {1: "", 2: "", 3: "", 4: ""}
        pems: list[str] = []
        for number, payload in _fields(data):
            if number == 5:
                pems.append(_text(payload))
            elif number in scalars:
                scalars[number] = _text(payload)
        return cls(scalars[1], scalars[2], scalars[3], scalars[4], tuple(pems))


@dataclass(frozen=True, slots=True)
class Assertions:
    fully_qualified_method: str = ""  # 1
    headers: tuple[Header, ...] = ()  # 2, repeated
    authority: str = ""  # 3
    context: Context | None = None  # 4
    tls_assertions: TLSAssertions | None = None  # 5

    def encode(self) -> bytes:
        parts = [_strings((1, self.fully_qualified_method))]
        parts += (protowire.f_len(2, h.encode()) for h in self.headers)
        parts.append(_strings((3, self.authority)))
        if self.context is not None:
            parts.append(protowire.f_len(4, self.context.encode()))
        if self.tls_assertions is not None:
            parts.append(protowire.f_len(5, self.tls_assertions.encode()))
        return b"".join(parts)

    @classmethod
    def decode(cls, data: bytes) -> Assertions:
        method = authority = ""
        headers: list[Header] = []
        context: Context | None = None
        tls: TLSAssertions | None = None
        for number, payload in _fields(data):
            if number == 1:
                method = _text(payload)
            elif number == 2:
                headers.append(Header.decode(payload))
            elif number == 3:
                authority = _text(payload)
            elif number == 4:
                context = Context.decode(payload)
            elif number == 5:
                tls = TLSAssertions.decode(payload)
        return cls(method, tuple(headers), authority, context, tls)

    def metadata(self, key: str) -> list[str]:
        """The values received for `key` (lower case, as HTTP/2 carries it)."""
        return [h.value for h in self.headers if h.key == key]


@dataclass(frozen=True, slots=True)
class EchoResponse:
    assertions: Assertions = field(default_factory=Assertions)  # 1
    # 2 (`request`, an EchoRequest) is never set: the conformance echo leaves it empty too.

    def encode(self) -> bytes:
        return protowire.f_len(1, self.assertions.encode())

    @classmethod
    def decode(cls, data: bytes) -> EchoResponse:
        assertions = Assertions()
        for number, payload in _fields(data):
            if number == 1:
                assertions = Assertions.decode(payload)
        return cls(assertions)


# ------------------------------------------------------------------------------ gRPC framing


def frame(message: bytes) -> bytes:
    """gRPC over HTTP/2: `Length-Prefixed-Message → Compressed-Flag Message-Length Message`."""
    return b"\x00" + len(message).to_bytes(4, "big") + message


def messages(body: bytes) -> list[tuple[bool, bytes]]:
    """The (compressed, message) pairs a request or response body holds, or `DecodeError`."""
    found, at = [], 0
    while at < len(body):
        if len(body) - at < 5 or body[at] > 1:
            raise DecodeError("a gRPC message prefix is cut short or its flag is not 0 or 1")
        size = int.from_bytes(body[at + 1 : at + 5], "big")
        if len(body) - at - 5 < size:
            raise DecodeError("a gRPC message is shorter than its prefix says")
        found.append((body[at] == 1, body[at + 5 : at + 5 + size]))
        at += 5 + size
    return found


# ------------------------------------------------------------------------------ the encoding


def _strings(*pairs: tuple[int, str]) -> bytes:
    # proto3: a scalar at its default value ("") is not written.
    return b"".join(protowire.f_str(number, text) for number, text in pairs if text)


def _text(payload: bytes) -> str:
    try:
        return payload.decode()
    except UnicodeDecodeError as exc:
        raise DecodeError("a string field is not UTF-8") from exc


def _text_fields(data: bytes, count: int) -> dict[int, str]:
    got = dict.fromkeys(range(1, count + 1), "")
    for number, payload in _fields(data):
        if number in got:
            got[number] = _text(payload)
    return got


def _varint(data: bytes, at: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if at >= len(data) or shift > 63:
            raise DecodeError("a varint is cut short or too long")
        byte = data[at]
        value |= (byte & 0x7F) << shift
        at += 1
        if not byte & 0x80:
            return value, at
        shift += 7


def _fields(data: bytes) -> list[tuple[int, bytes]]:
    """The length-delimited fields of a message as (number, payload); every other wire type is
    checked and skipped (none of these messages has one)."""
    found, at = [], 0
    while at < len(data):
        key, at = _varint(data, at)
        number, wire = key >> 3, key & 7
        if number == 0:
            raise DecodeError("field number 0")
        if wire == VARINT:
            _, at = _varint(data, at)
            continue
        width = {I64: 8, I32: 4}.get(wire)
        if width is None and wire != LEN:
            raise DecodeError(f"wire type {wire} (groups or unknown)")
        if width is None:
            width, at = _varint(data, at)
        if len(data) - at < width:
            raise DecodeError("a field is shorter than its length says")
        if wire == LEN:
            found.append((number, data[at : at + width]))
        at += width
    return found
