"""Request framing and persistence checks that llhttp leaves to the proxy (RFC 9112 §6, §9).

Where it sits: `http11.HttpConnection.on_headers_complete` calls these on the rare heads that
need them (a Transfer-Encoding, an Upgrade, an HTTP/1.0 keep-alive), and `data_received` asks
`token_first` after llhttp refused a method; a plain request runs none of it. Pure functions
over a head's raw fields.
"""

from __future__ import annotations

import re

from coxswain_proxy.dataplane import errors

HTTP10 = "1.0"
CHUNKED = b"chunked"
CONNECT = b"CONNECT"
OWS = b" \t"
# The fields llhttp reads a request's keep-alive from (RFC 9112 §9.3; Proxy-Connection as
# browsers once sent it).
CONNECTION_FIELDS = (b"connection", b"proxy-connection")
_TOKEN_SP = re.compile(rb"[!#$%&'*+\-.^_`|~0-9A-Za-z]{1,64}(?: |$)")  # a method, then SP


def token_first(data: bytes) -> bool:
    """Whether `data` starts (after the empty lines RFC 9112 §2.2 lets a client send) with a
    token a method could be."""
    return _TOKEN_SP.match(data.lstrip(b"\r\n")) is not None


def says_close(headers: list[tuple[bytes, bytes]]) -> bool:
    """Whether a Connection field holds "close" (llhttp keeps an HTTP/1.0 request's connection
    for a "keep-alive" even then). RFC 9112 §9.3: "If the "close" connection option is present
    (Section 9.6), the connection will not persist after the current response"."""
    return any(
        name.lower() in CONNECTION_FIELDS
        and b"close" in (o.strip(OWS).lower() for o in value.split(b","))
        for name, value in headers
    )


def check_codings(codings: bytes, version: str) -> None:
    """Refuse a Transfer-Encoding the proxy cannot frame a body by.

    RFC 9112 §6.1: "A server or client that receives an HTTP/1.0 message containing a
    Transfer-Encoding header field MUST treat the message as if the framing is faulty, even if
    a Content-Length is present, and close the connection after processing the message"; §6.3:
    "If a Transfer-Encoding header field is present in a request and the chunked transfer
    coding is not the final encoding, the message body length cannot be determined reliably;
    the server MUST respond with the 400 (Bad Request) status code and then close the
    connection"; §6.1: "A server that receives a request message with a transfer coding it
    does not understand SHOULD respond with 501 (Not Implemented)". Empty list elements are
    not codings (RFC 9110 §5.6.1.2: "A recipient MUST parse and ignore a reasonable number of
    empty list elements").
    """
    if version == HTTP10:
        raise errors.BadRequest("Transfer-Encoding in an HTTP/1.0 request")
    listed = [c for c in (e.strip(OWS).lower() for e in codings.split(b",")) if c]
    if listed == [CHUNKED]:
        return
    if not listed or listed[-1] != CHUNKED or listed.count(CHUNKED) > 1:
        raise errors.BadRequest("chunked is not the final transfer coding, once")
    raise errors.NotImplementedCoding("no transfer coding but chunked is understood")


def switches(method: bytes, version: str, headers: list[tuple[bytes, bytes]]) -> bool:
    """Whether a request llhttp stopped after as an upgrade really switches protocols.

    CONNECT does not (`dispatch` refuses it); nor does HTTP/1.0 (RFC 9110 §7.8: "A server MUST
    ignore an Upgrade header field that is received in an HTTP/1.0 request"). llhttp reads no
    body of any of them: what follows the head is handed on as the new protocol's bytes, or as
    the next request. Content there cannot be told from either, so a request with content is
    refused (RFC 9110 §9.3.6: "A CONNECT request message does not have content").
    """
    if _has_body(headers):
        raise errors.BadRequest("content with an Upgrade or a CONNECT")
    return method != CONNECT and version != HTTP10


def _has_body(headers: list[tuple[bytes, bytes]]) -> bool:
    for name, value in headers:
        lower = name.lower()
        if lower == b"transfer-encoding" or (
            lower == b"content-length" and value.strip(OWS) != b"0"
        ):
            return True
    return False
