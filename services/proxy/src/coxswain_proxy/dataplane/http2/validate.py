"""An HTTP/2 request's header block checked (RFC 9113 §8.2-8.3) and turned into what a cycle takes.

Where it sits: `server.H2ServerConnection` calls `request` for each stream's HEADERS (the
`h2` library's own inbound checks are off, so a malformed request is a stream error here, not
the connection's end). A `MalformedRequest` becomes RST_STREAM PROTOCOL_ERROR: RFC 9113 §8.1.1,
"Malformed requests or responses that are detected MUST be treated as a stream error of type
PROTOCOL_ERROR".
"""

from __future__ import annotations

from dataclasses import dataclass

AUTHORITY, METHOD, PATH, SCHEME = b":authority", b":method", b":path", b":scheme"
_PSEUDO = frozenset({AUTHORITY, METHOD, PATH, SCHEME})
# RFC 9113 §8.2.2: "An endpoint MUST NOT generate an HTTP/2 message containing
# connection-specific header fields. This includes the Connection header field and those listed
# as having connection-specific semantics in Section 7.6.1 of [HTTP] (that is, Proxy-Connection,
# Keep-Alive, Transfer-Encoding, and Upgrade). Any message containing connection-specific header
# fields MUST be treated as malformed".
_CONNECTION_SPECIFIC = frozenset(
    {b"connection", b"keep-alive", b"proxy-connection", b"transfer-encoding", b"upgrade"}
)
# RFC 9113 §8.2.1: "A field name MUST NOT contain characters in the ranges 0x00-0x20, 0x41-0x5a,
# or 0x7f-0xff (all ranges inclusive)."
_BAD_NAME = frozenset(range(0x21)) | frozenset(range(0x41, 0x5B)) | frozenset(range(0x7F, 0x100))
_GRPC_UNITS = {b"H": 3600.0, b"M": 60.0, b"S": 1.0, b"m": 1e-3, b"u": 1e-6, b"n": 1e-9}
CHUNKED = (b"transfer-encoding", b"chunked")


class MalformedRequest(Exception):
    """The request breaks RFC 9113 §8: its stream is reset with PROTOCOL_ERROR."""


@dataclass(slots=True)
class Request:
    method: bytes
    target: bytes
    authority: bytes | None
    fields: list[tuple[bytes, bytes]]  # regular fields, Cookie joined, no Host
    length: int  # Content-Length, -1 without
    grpc: bool  # content-type application/grpc*: the proxy's own errors are gRPC statuses
    deadline: float  # grpc-timeout in seconds, 0: none


def _check_name(name: bytes) -> None:
    if not name or not _BAD_NAME.isdisjoint(name):
        raise MalformedRequest(f"field name {name!r} is not lowercase token characters")


def _check_value(value: bytes) -> None:
    # RFC 9113 §8.2.1: "A field value MUST NOT contain the zero value (ASCII NUL, 0x00), line
    # feed (ASCII LF, 0x0a), or carriage return (ASCII CR, 0x0d) at any position" and "MUST NOT
    # start or end with an ASCII whitespace character (ASCII SP or HTAB, 0x20 or 0x09)".
    if b"\0" in value or b"\n" in value or b"\r" in value:
        raise MalformedRequest("a field value holds NUL, CR or LF")
    if value[:1] in (b" ", b"\t") or value[-1:] in (b" ", b"\t"):
        raise MalformedRequest("a field value starts or ends with whitespace")


def request(block: list[tuple[bytes, bytes]]) -> Request:
    """The request a header block says, or `Malformed`."""
    key = tuple(block)
    known = _requests_seen.get(key)
    if known is None:
        known = _request(block)
        if len(block) > _REQUEST_MEMO_FIELDS or sum(len(n) + len(v) for n, v in block) > 2048:
            return known
        if len(_requests_seen) >= _REQUEST_MEMO_SIZE:
            _requests_seen.clear()
        _requests_seen[key] = known
    # A copy for the caller: its fields list is the cycle's to change, the memo's is not.
    return Request(known.method, known.target, known.authority, known.fields.copy(),
                   known.length, known.grpc, known.deadline)  # fmt: skip


# Header blocks checked before, with what they said. HPACK makes a client's repeated request
# the same field objects (its table's entries), so the key hashes and compares fast, and a
# repeated block (a poll, an asset, a load test) skips every check below. Only small blocks are
# kept, the memo is bounded and emptied when full; a miss costs the key and one lookup.
_requests_seen: dict[tuple[tuple[bytes, bytes], ...], Request] = {}
_REQUEST_MEMO_SIZE = 1024
_REQUEST_MEMO_FIELDS = 16  # and 2 KiB


def _request(block: list[tuple[bytes, bytes]]) -> Request:
    pseudo: dict[bytes, bytes] = {}
    fields: list[tuple[bytes, bytes]] = []
    cookies: list[bytes] = []
    host: bytes | None = None
    length = -1
    grpc = False
    deadline = 0.0
    for name, value in block:
        _check_value(value)
        if name[:1] == b":":
            # RFC 9113 §8.3: "All pseudo-header fields MUST appear in a field block before all
            # regular field lines"; "The same pseudo-header field name MUST NOT appear more than
            # once in a field block"; "Endpoints MUST NOT generate pseudo-header fields other
            # than those defined in this document" (receipt of one: malformed, §8.1.1).
            if fields or cookies or host is not None:
                raise MalformedRequest("a pseudo-header field after a regular field")
            if name not in _PSEUDO:
                raise MalformedRequest(f"unknown pseudo-header field {name!r}")
            if name in pseudo:
                raise MalformedRequest(f"{name!r} appears more than once")
            pseudo[name] = value
            continue
        _check_name(name)
        if name in _CONNECTION_SPECIFIC:
            raise MalformedRequest(f"connection-specific field {name!r}")
        if name == b"te":
            # RFC 9113 §8.2.2: "The only exception to this is the TE header field, which MAY be
            # present in an HTTP/2 request; when it is, it MUST NOT contain any value other than
            # "trailers"."
            if value.lower() != b"trailers":
                raise MalformedRequest("TE other than trailers")
        elif name == b"host":
            host = value
            continue
        elif name == b"cookie":
            # RFC 9113 §8.2.3: split cookies "MUST be concatenated into a single octet string
            # using the two-octet delimiter of 0x3b, 0x20 (the ASCII string "; ") before being
            # passed into a non-HTTP/2 context".
            cookies.append(value)
            continue
        elif name == b"content-length":
            if not value.isdigit() or (length >= 0 and int(value) != length):
                raise MalformedRequest("Content-Length is not one decimal number")
            length = int(value)
        elif name == b"content-type":
            grpc = value.startswith(b"application/grpc")
        elif name == b"grpc-timeout":
            deadline = _grpc_timeout(value)
        fields.append((name, value))
    if cookies:
        fields.append((b"cookie", b"; ".join(cookies)))
    return _assemble(pseudo, host, fields, length, grpc, deadline)


def _assemble(
    pseudo: dict[bytes, bytes],
    host: bytes | None,
    fields: list[tuple[bytes, bytes]],
    length: int,
    grpc: bool,
    deadline: float,
) -> Request:
    method = pseudo.get(METHOD)
    if method is None:
        raise MalformedRequest(":method is missing")
    authority = pseudo.get(AUTHORITY)
    if method == b"CONNECT":
        # RFC 9113 §8.5: CONNECT carries only :method and :authority. The proxy forwards no
        # tunnels: it goes to routing as it is, which refuses CONNECT (405).
        if SCHEME in pseudo or PATH in pseudo or not authority:
            raise MalformedRequest("CONNECT with :scheme or :path, or without :authority")
        return Request(method, authority, authority, fields, length, grpc, deadline)
    # RFC 9113 §8.3.1: "All HTTP/2 requests MUST include exactly one valid value for the
    # :method, :scheme, and :path pseudo-header fields, unless they are CONNECT requests";
    # ":path ... MUST NOT be empty".
    target = pseudo.get(PATH)
    if SCHEME not in pseudo or not target:
        raise MalformedRequest(":scheme or :path is missing")
    if target[:1] != b"/" and not (target == b"*" and method == b"OPTIONS"):
        raise MalformedRequest(":path is neither origin-form nor * for OPTIONS")
    if authority is not None and host is not None and host.lower() != authority.lower():
        # RFC 9113 §8.3.1: "A server SHOULD treat a request as malformed if it contains a Host
        # header field that identifies an entity that differs from the entity in the
        # :authority pseudo-header field."
        raise MalformedRequest("Host differs from :authority")
    # RFC 9113 §8.3.1: ":authority ... (Host if absent)": routing uses the first present.
    return Request(method, target, authority or host, fields, length, grpc, deadline)


def trailers(block: list[tuple[bytes, bytes]]) -> list[tuple[bytes, bytes]]:
    """A request's trailer block checked as its headers were, or `MalformedRequest`; the
    fields it holds (`http.trailers.relayable` picks those that may go upstream)."""
    kept: list[tuple[bytes, bytes]] = []
    for name, value in block:
        # RFC 9113 §8.1: "Trailers MUST NOT include pseudo-header fields"; §8.2.1 and §8.2.2
        # as for a header block. A CR or LF here would split the HTTP/1.1 trailer section.
        if name[:1] == b":":
            raise MalformedRequest(f"pseudo-header field {name!r} in trailers")
        _check_value(value)
        _check_name(name)
        if name in _CONNECTION_SPECIFIC:
            raise MalformedRequest(f"connection-specific field {name!r} in trailers")
        kept.append((name, value))
    return kept


def _grpc_timeout(value: bytes) -> float:
    """gRPC over HTTP/2: `Timeout → "grpc-timeout" TimeoutValue TimeoutUnit`, at most 8 digits."""
    digits, unit = value[:-1], _GRPC_UNITS.get(value[-1:])
    if unit is None or not digits.isdigit() or len(digits) > 8:
        raise MalformedRequest("grpc-timeout is not TimeoutValue TimeoutUnit")
    return int(digits) * unit
