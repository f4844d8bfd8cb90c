"""Request trailer fields on their way upstream: which may go, and the last chunk that carries them.

Where it sits: a client's trailer section (HTTP/1.1: after a chunked body, `http11`; HTTP/2: a
trailing HEADERS frame, `http2.validate.trailers`) reaches its request cycle as fields, and goes
upstream in the chunked body's trailer section (`last_chunk`, RFC 9112 §7.1.2), which an h2c or
gRPC backend's connection (`upstream.h2c`) turns back into a trailing HEADERS frame. So both
client protocols reach both backend protocols through one form.

RFC 9110 §6.5.1: "Many fields cannot be processed outside the header section because their
evaluation is necessary prior to receiving the content, such as those that describe message
framing, routing, authentication, request modifiers, response controls, or content format. A
sender MUST NOT generate a trailer field unless the sender knows the corresponding header
field name's definition permits the field to be sent in trailers." The proxy relays trailers it
received rather than generating them, but a backend that merged one of these into the head would
be misled (a second Host, a late Authorization, a Content-Length after the body): they are
dropped, with the fields the proxy writes itself (it is the one that says who the client is).
"""

from __future__ import annotations

from coxswain_proxy.dataplane.http import responses

__all__ = ["FORBIDDEN", "relayable", "last_chunk"]

FORBIDDEN = frozenset(
    {
        # message framing, and what only one connection means (RFC 9110 §7.6.1)
        b"content-length", b"transfer-encoding", b"trailer", b"connection", b"keep-alive",
        b"proxy-connection", b"upgrade", b"te",
        # routing
        b"host",
        # request modifiers: controls (RFC 9110 §10.1) and conditionals (§13.1)
        b"cache-control", b"expect", b"max-forwards", b"pragma", b"range", b"if-match",
        b"if-none-match", b"if-modified-since", b"if-unmodified-since", b"if-range",
        # authentication (RFC 9110 §11; cookies, RFC 6265)
        b"authorization", b"proxy-authorization", b"www-authenticate", b"proxy-authenticate",
        b"cookie", b"set-cookie",
        # response control data (RFC 9110 §10.2)
        b"age", b"expires", b"date", b"location", b"retry-after", b"vary", b"warning",
        # content format
        b"content-encoding", b"content-type", b"content-range",
        # what the proxy writes itself
        b"via", b"forwarded", b"x-forwarded-for", b"x-forwarded-proto", b"x-forwarded-host",
    }
)  # fmt: skip
_OWS = b" \t"


def relayable(fields: list[tuple[bytes, bytes]]) -> list[tuple[bytes, bytes]]:
    """The trailer fields that may go upstream, names lower-cased, values without edge
    whitespace (RFC 9112 §5: "excluding any leading or trailing whitespace"; RFC 9113 §8.2.1
    forbids it in an HTTP/2 field value)."""
    kept = []
    for name, value in fields:
        lowered = name.lower()
        if lowered not in FORBIDDEN:
            kept.append((lowered, value.strip(_OWS)))
    return kept


def last_chunk(fields: list[tuple[bytes, bytes]]) -> bytes:
    """`last-chunk trailer-section CRLF` (RFC 9112 §7.1) holding `fields` (already checked)."""
    if not fields:
        return responses.LAST_CHUNK
    return b"".join((b"0\r\n", *(n + b": " + v + b"\r\n" for n, v in fields), b"\r\n"))
