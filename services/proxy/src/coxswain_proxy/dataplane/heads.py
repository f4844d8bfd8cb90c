"""Message heads as bytes: the request sent upstream and the response sent to the client.

Where it sits: `forward.Exchange` calls these once per request and once per response. Pure
functions over raw header lists, so the hop-by-hop and X-Forwarded rules are tested on bytes.

RFC 9110 §7.6.1: "a proxy or gateway MUST parse a received Connection header field before a
message is forwarded and, for each connection-option in this field, remove any header or trailer
field(s) from the message with the same name as the connection-option, and then remove the
Connection header field itself". The fixed hop-by-hop names are removed as well.
"""

from __future__ import annotations

from dataclasses import dataclass

from coxswain_proxy.dataplane import responses
from coxswain_proxy.dataplane.tables import BytesPlan, apply_plan

Headers = list[tuple[bytes, bytes]]

CONNECTION = b"connection"
HOP_BY_HOP = frozenset(
    {b"connection", b"keep-alive", b"proxy-connection", b"te", b"trailer", b"transfer-encoding",
     b"upgrade"}
)  # fmt: skip
# Request fields the proxy writes itself.
REQUEST_OWN = HOP_BY_HOP | {b"host", b"x-forwarded-for", b"x-forwarded-proto", b"x-forwarded-host"}
TRANSFER_ENCODING = b"transfer-encoding"
CONTENT_LENGTH = b"content-length"
XFF = b"x-forwarded-for"


def _connection_options(headers: Headers) -> frozenset[bytes]:
    options: set[bytes] = set()
    for name, value in headers:
        if name.lower() == CONNECTION:
            options.update(o.strip().lower() for o in value.split(b","))
    options.discard(b"close")
    options.discard(b"keep-alive")
    return frozenset(options)


@dataclass(slots=True)
class RequestFraming:
    chunked: bool = False  # the client sent Transfer-Encoding: chunked
    has_body: bool = False  # chunked, or a Content-Length above zero
    expect_continue: bool = False


def upstream_request(
    method: bytes,
    target: bytes,
    headers: Headers,
    *,
    host: bytes,
    client: str,
    scheme: bytes,
    plan: BytesPlan,
    upgrade: bytes = b"",
    close: bool = False,
) -> tuple[bytes, RequestFraming]:
    """The request head to send upstream, and how the client framed its body."""
    framing = RequestFraming()
    xff = b""
    options = _connection_options(headers) if _has(headers, CONNECTION) else frozenset()
    kept: Headers = []
    for name, value in headers:
        lower = name.lower()
        if lower in REQUEST_OWN:
            if lower == TRANSFER_ENCODING:
                framing.chunked = framing.has_body = b"chunked" in value.lower()
            elif lower == XFF:
                xff = value + b", "
            continue
        if options and lower in options:
            continue
        if lower == CONTENT_LENGTH:
            framing.has_body = framing.has_body or value.strip() not in (b"0", b"")
        elif lower == b"expect":
            framing.expect_continue = value.lower() == b"100-continue"
        kept.append((name, value))
    if plan:
        kept = apply_plan(plan, kept)
    parts = [method, b" ", target, b" HTTP/1.1\r\nhost: ", host, b"\r\n"]
    for name, value in kept:
        parts += (name, b": ", value, b"\r\n")
    parts += (b"x-forwarded-for: ", xff, client.encode(), b"\r\nx-forwarded-proto: ", scheme)
    parts += (b"\r\nx-forwarded-host: ", host, b"\r\n")
    if framing.chunked:
        parts.append(b"transfer-encoding: chunked\r\n")
    if upgrade:
        parts += (b"connection: upgrade\r\nupgrade: ", upgrade, b"\r\n")
    elif close:
        parts.append(responses.CLOSE)
    parts.append(b"\r\n")
    return b"".join(parts), framing


def _has(headers: Headers, wanted: bytes) -> bool:
    return any(len(n) == len(wanted) and n.lower() == wanted for n, _ in headers)


@dataclass(slots=True)
class ResponseFraming:
    length: bool = False  # the upstream sent a Content-Length: bytes pass as they come
    chunked_in: bool = False  # the upstream sent chunked


def client_response(
    status: int,
    headers: Headers,
    *,
    plan: BytesPlan,
    extra: Headers,
    keep_upgrade: bool = False,
) -> tuple[Headers, ResponseFraming]:
    """The upstream response's headers as the client gets them (before framing is decided)."""
    framing = ResponseFraming()
    options = _connection_options(headers) if _has(headers, CONNECTION) else frozenset()
    kept: Headers = []
    for name, value in headers:
        lower = name.lower()
        if lower in HOP_BY_HOP:
            if lower == TRANSFER_ENCODING:
                framing.chunked_in = b"chunked" in value.lower()
            elif keep_upgrade and lower in (b"upgrade", CONNECTION):
                kept.append((name, value))
            continue
        if options and lower in options:
            continue
        if lower == CONTENT_LENGTH:
            framing.length = True
        kept.append((name, value))
    if plan:
        kept = apply_plan(plan, kept)
    if extra:
        kept.extend(extra)
    return kept, framing


def serialize(status: int, headers: Headers, tail: bytes) -> bytes:
    """Status line, headers, then `tail` (framing and connection fields, and the blank line)."""
    parts = [responses.status_line(status)]
    for name, value in headers:
        parts += (name, b": ", value, b"\r\n")
    parts.append(tail)
    return b"".join(parts)
