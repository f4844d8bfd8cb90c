"""Precomputed status lines and the proxy's own responses (errors, redirects, preflights).

Where it sits: `http11` and the request cycle (`request_cycle.RequestCycle.local`) write these
when the proxy answers a request itself. Everything that
does not depend on the request is built once at import (conventions, item 4), so answering a
404 or a 503 costs one dict lookup and one `write()`. The Date line is made once a second
(`date_line`) and goes into the proxy's answers and into forwarded responses that lack one.
"""

from __future__ import annotations

import time
from email.utils import formatdate
from http import HTTPStatus

# "HTTP/1.1 <code> <reason>\r\n" for every status the stdlib knows; unknown codes get no reason.
STATUS_LINES: dict[int, bytes] = {
    s.value: f"HTTP/1.1 {s.value} {s.phrase}\r\n".encode() for s in HTTPStatus
}


def status_line(code: int) -> bytes:
    line = STATUS_LINES.get(code)
    if line is None:
        line = STATUS_LINES[code] = f"HTTP/1.1 {code} \r\n".encode()
    return line


SERVER = b"server: coxswain\r\n"
KEEP_ALIVE = b""  # HTTP/1.1 keeps the connection open by default: nothing to say
CLOSE = b"connection: close\r\n"
CHUNKED = b"transfer-encoding: chunked\r\n"
LAST_CHUNK = b"0\r\n\r\n"
CONTINUE = b"HTTP/1.1 100 Continue\r\n\r\n"


# RFC 9110 §6.6.1: "An origin server with a clock MUST generate a Date header field in all 2xx
# (Successful), 3xx (Redirection), and 4xx (Client Error) responses", and "A recipient with a
# clock that receives a response message without a Date header field MUST record the time it
# was received and append a corresponding Date header field to the message's header section if
# it is cached or forwarded downstream."
class _Date:
    second = 0  # the second `line` was made for
    line = b""


def date_line() -> bytes:
    """`date: <IMF-fixdate>` and CRLF, for the current second."""
    now = int(time.time())
    if now != _Date.second:
        _Date.second, _Date.line = now, b"date: %s\r\n" % formatdate(now, usegmt=True).encode()
    return _Date.line


# The methods the proxy forwards. RFC 9110 §15.5.6: "The origin server MUST generate an Allow
# header field in a 405 response containing a list of the target resource's currently
# supported methods"; §9.3.7: an OPTIONS answer may say the same.
METHODS = b"GET, HEAD, POST, PUT, DELETE, OPTIONS, PATCH"
ALLOW = b"allow: " + METHODS + b"\r\n"


def simple(code: int, reason: str = "", *, close: bool = False) -> bytes:
    """A complete text/plain response: the status, and why, for a human reading it."""
    return b"".join((status_line(code), SERVER, date_line(), _simple_rest(code, reason, close)))


def _simple_rest(code: int, reason: str, close: bool) -> bytes:
    """`simple`'s response after its status, server and date lines."""
    body = f"{code} {HTTPStatus(code).phrase if code in STATUS_LINES else ''}".strip()
    if reason:
        body = f"{body}: {reason}"
    data = (body + "\n").encode()
    head = [b"content-type: text/plain; charset=utf-8\r\n", b"content-length: %d\r\n" % len(data)]
    if code == 405:
        head.append(ALLOW)
    if close:
        head.append(CLOSE)
    return b"".join(head) + b"\r\n" + data


def with_headers(
    code: int, headers: list[tuple[str, str]], *, close: bool = False, body: bytes = b""
) -> bytes:
    """A response with the given headers (a redirect, a preflight answer) in one buffer."""
    parts = [status_line(code), SERVER, date_line()]
    for name, value in headers:
        parts.append(f"{name}: {value}\r\n".encode("latin-1"))
    parts.append(b"content-length: %d\r\n" % len(body))
    if close:
        parts.append(CLOSE)
    parts.append(b"\r\n")
    parts.append(body)
    return b"".join(parts)


# The answers the request path gives most: built once (but for the date), keyed by (status,
# close).
_CANNED: dict[tuple[int, bool], tuple[bytes, bytes]] = {}


def canned(code: int, *, close: bool = False) -> bytes:
    key = (code, close)
    parts = _CANNED.get(key)
    if parts is None:
        parts = _CANNED[key] = (status_line(code) + SERVER, _simple_rest(code, "", close))
    return b"".join((parts[0], date_line(), parts[1]))


for _code in (400, 404, 405, 408, 414, 421, 431, 500, 501, 502, 503, 504, 505):
    canned(_code)
    canned(_code, close=True)
