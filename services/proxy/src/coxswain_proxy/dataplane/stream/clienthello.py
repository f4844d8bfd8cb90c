"""A sans-IO ClientHello reader: the server name a TLS client offers, without terminating TLS.

Where it sits: `tls_relay.TlsRelay` feeds it every byte a client sends until it answers,
then replays those same bytes to the backend it chose by the name. It holds no socket and no
clock (the connection's sweep bounds the time), so tests feed it bytes, byte by byte if they
like, and assert on what it answers.

Why the shape: a ClientHello may be split over several TLS records (RFC 8446 §5.1: "Handshake
messages MAY be coalesced into a single TLSPlaintext record or fragmented across several
records") and over any number of TCP segments, so the reader joins record fragments into one
handshake message before parsing it. It reads at most `limit` bytes (16 KiB by default: a
ClientHello with post-quantum key shares is under 2 KiB; the largest seen in the wild under 8),
so a client cannot make the proxy buffer without bound before it has been routed.
"""

from __future__ import annotations

from dataclasses import dataclass

MAX_HELLO_BYTES = 16 * 1024

_HANDSHAKE = 22  # ContentType.handshake (RFC 8446 §5.1)
_CLIENT_HELLO = 1  # HandshakeType.client_hello (RFC 8446 §4)
_SERVER_NAME = 0  # ExtensionType.server_name (RFC 6066 §3)
_HOST_NAME = 0  # NameType.host_name (RFC 6066 §3)
_MAX_RECORD = 1 << 14  # RFC 8446 §5.1: "The length MUST NOT exceed 2^14 bytes."


class NotClientHello(Exception):
    """What the client sent is not the start of a TLS handshake that can be routed."""


@dataclass(frozen=True, slots=True)
class Hello:
    server_name: str  # lower-cased, no trailing dot; "" when the client offers none


class ClientHelloReader:
    """Fed the client's bytes; `feed` answers the `Hello` once the message is complete."""

    __slots__ = ("limit", "received", "_size", "_records", "_at")

    def __init__(self, limit: int = MAX_HELLO_BYTES) -> None:
        self.limit = limit
        self.received: list[bytes] = []  # every byte fed, to replay to the backend as it came
        self._size = 0
        self._records = bytearray()  # all bytes fed, joined: records are parsed from `_at`
        self._at = 0

    def feed(self, data: bytes) -> Hello | None:
        """`None` while more is needed; raises `NotClientHello` for what can never be one."""
        self.received.append(data)
        self._size += len(data)
        if self._size > self.limit:
            raise NotClientHello(f"no ClientHello within {self.limit} bytes")
        self._records += data
        message = self._handshake_bytes()
        if message is None:
            return None
        return Hello(_server_name(message))

    def _handshake_bytes(self) -> bytes | None:
        """The first handshake message, when every record carrying it has arrived."""
        joined = bytearray()
        at = 0
        records = self._records
        while len(records) - at >= 5:
            kind, length = records[at], int.from_bytes(records[at + 3 : at + 5])
            # RFC 8446 §5.1: the first bytes a client sends are a handshake record.
            if kind != _HANDSHAKE:
                raise NotClientHello("not a TLS handshake record")
            if length == 0 or length > _MAX_RECORD:
                raise NotClientHello("a TLS record of a length no peer may send")
            if len(records) - at - 5 < length:
                return None
            joined += records[at + 5 : at + 5 + length]
            at += 5 + length
            if len(joined) >= 4:
                if joined[0] != _CLIENT_HELLO:
                    raise NotClientHello("the first handshake message is not a ClientHello")
                need = 4 + int.from_bytes(joined[1:4])
                if need > self.limit:
                    raise NotClientHello(f"a ClientHello of over {self.limit} bytes")
                if len(joined) >= need:
                    return bytes(joined[4:need])
        if len(records) - at >= 1 and records[at] != _HANDSHAKE:
            raise NotClientHello("not a TLS handshake record")
        return None


class _Cursor:
    """Reads a ClientHello body; a length past the end is `NotClientHello`."""

    __slots__ = ("data", "at")

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.at = 0

    def take(self, n: int) -> bytes:
        if self.at + n > len(self.data):
            raise NotClientHello("a ClientHello field runs past its end")
        piece = self.data[self.at : self.at + n]
        self.at += n
        return piece

    def number(self, n: int) -> int:
        return int.from_bytes(self.take(n))

    def vector(self, length_bytes: int) -> bytes:
        return self.take(self.number(length_bytes))

    def done(self) -> bool:
        return self.at >= len(self.data)


def _server_name(body: bytes) -> str:
    # RFC 8446 §4.1.2: legacy_version, random[32], legacy_session_id<0..32>,
    # cipher_suites<2..2^16-2>, legacy_compression_methods<1..2^8-1>, extensions<8..2^16-1>.
    cursor = _Cursor(body)
    cursor.take(2 + 32)
    cursor.vector(1)
    cursor.vector(2)
    cursor.vector(1)
    if cursor.done():
        return ""  # RFC 5246 §7.4.1.2 allowed a ClientHello with no extensions at all
    extensions = _Cursor(cursor.vector(2))
    while not extensions.done():
        kind = extensions.number(2)
        data = extensions.vector(2)
        if kind == _SERVER_NAME:
            return _host_name(data)
    return ""


def _host_name(data: bytes) -> str:
    # RFC 6066 §3: ServerNameList server_name_list<1..2^16-1>, each a NameType and a HostName;
    # "The ServerNameList MUST NOT contain more than one name of the same name_type."
    names = _Cursor(_Cursor(data).vector(2))
    while not names.done():
        kind = names.number(1)
        name = names.vector(2)
        if kind == _HOST_NAME:
            try:
                text = name.decode("ascii")
            except UnicodeDecodeError:
                raise NotClientHello("a server name that is not ASCII") from None
            # RFC 6066 §3: "The hostname is represented as a byte string using ASCII encoding
            # without a trailing dot."; accepted with one, matched without it.
            return text.rstrip(".").lower()
    return ""
