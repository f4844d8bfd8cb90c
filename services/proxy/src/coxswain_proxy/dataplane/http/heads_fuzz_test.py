"""Property: the heads the proxy writes, both ways, are well-formed whatever fields they carry.

A generated client request (HTTP/1.0 or 1.1; GET, HEAD or POST; any token-named fields, with
hop-by-hop ones and Connection options among them) goes through the data plane to a strict
recording backend (`recording`), which checks the head it receives and answers with a
generated response (any status a client may get, framed by Content-Length, chunked or the
close, after interim responses or not, with fields of its own). The client's bytes are then
read strictly: interim responses only to HTTP/1.1, the framing a client of that version and
method expects (RFC 9112 §6.1, §6.3; RFC 9110 §8.6), the body whole, no hop-by-hop field and
none a Connection option named (RFC 9110 §7.6.1), and the proxy's Via last (§7.6.3).
Leaves out bytes that are not HTTP (malformed_test.py).
"""

from __future__ import annotations

import re

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from coxswain_proxy.dataplane import testing as t
from coxswain_proxy.dataplane.http import recording

_TOKEN = st.text("!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ",
                 min_size=1, max_size=8).map(str.encode)  # fmt: skip
# A field value: visible ASCII, spaces and tabs inside, obs-text (RFC 9110 §5.5).
_VALUE = st.binary(max_size=12).map(
    lambda b: bytes(c for c in b if c == 9 or 32 <= c < 127 or c >= 128).strip(b" \t")
)
_NAMED = st.sampled_from(
    [(b"Connection", b"x-drop"), (b"X-Drop", b"1"), (b"Keep-Alive", b"timeout=5"),
     (b"Proxy-Connection", b"keep-alive"), (b"TE", b"trailers"), (b"Trailer", b"X-T"),
     (b"Via", b"1.0 fred"), (b"Connection", b"content-length"), (b"Upgrade", b"h2c")]
)  # fmt: skip
_FIELDS = st.lists(st.tuples(_TOKEN, _VALUE) | _NAMED, max_size=5)
_HOP = {b"keep-alive", b"proxy-connection", b"te", b"trailer", b"upgrade"}
_DROP = (b"Connection", b"x-drop")  # names X-Drop as hop-by-hop (RFC 9110 §7.6.1)
_STATUSES = st.sampled_from([200, 201, 204, 206, 304, 404, 500, 503])
_FRAMINGS = st.sampled_from(["length", "chunked", "close"])
_INTERIM = st.sampled_from(
    [b"", b"HTTP/1.1 100 Continue\r\n\r\n", b"HTTP/1.1 103 Early Hints\r\n\r\n"]
)
_STATUS_LINE = re.compile(rb"HTTP/1\.1 [1-5][0-9][0-9] [^\r\n\x00]*")
_FIELD = re.compile(rb"([!#$%&'*+\-.^_`|~0-9A-Za-z]+): ([^\x00-\x08\x0a-\x1f\x7f]*)")
BODY = b"hello"


def _upstream(
    status: int, framing: str, fields: list[tuple[bytes, bytes]], interim: bytes
) -> recording.Respond:
    def respond(request: recording.Received) -> bytes:
        bodiless = request.method == b"HEAD" or status in (204, 304)
        head = b"HTTP/1.1 %d X\r\n" % status + b"".join(n + b": " + v + b"\r\n" for n, v in fields)
        if framing == "length":
            head += b"content-length: %d\r\n" % len(BODY)
            body = b"" if bodiless else BODY
        elif framing == "chunked":
            head += b"transfer-encoding: chunked\r\n"
            body = b"" if bodiless else b"5\r\nhello\r\n0\r\n\r\n"
        else:
            head += b"connection: close\r\n"
            body = b"" if bodiless else BODY
        return interim + head + b"\r\n" + body

    return respond


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    method=st.sampled_from([b"GET", b"HEAD", b"POST"]),
    version=st.sampled_from([b"1.1", b"1.0"]),
    request_fields=_FIELDS,
    status=_STATUSES,
    framing=_FRAMINGS,
    response_fields=_FIELDS,
    interim=_INTERIM,
)
@example(b"GET", b"1.0", [], 200, "chunked", [], b"HTTP/1.1 100 Continue\r\n\r\n")
@example(b"GET", b"1.1", [], 200, "close", [], b"HTTP/1.1 100 Continue\r\n\r\n")
@example(b"GET", b"1.0", [(b"Proxy-Connection", b"keep-alive")], 200, "length", [], b"")
@example(b"GET", b"1.1", [], 204, "length", [], b"")
@example(b"HEAD", b"1.1", [], 200, "chunked", [], b"")
@example(b"GET", b"1.1", [], 200, "length", [(b"Connection", b"content-length")], b"")
@example(b"POST", b"1.1", [(b"Connection", b"content-length")], 200, "close", [], b"")
async def test_heads_written_both_ways_are_well_formed(
    method: bytes,
    version: bytes,
    request_fields: list[tuple[bytes, bytes]],
    status: int,
    framing: str,
    response_fields: list[tuple[bytes, bytes]],
    interim: bytes,
) -> None:
    # Fields named like the ones the proxy owns (Host, framing) would make a different request.
    own = {b"host", b"content-length", b"transfer-encoding", b"expect", b"date"}
    request_fields = [(n, v) for n, v in request_fields if n.lower() not in own]
    response_fields = [(n, v) for n, v in response_fields if n.lower() not in own]
    body = b"content-length: 5\r\n\r\nhello" if method == b"POST" else b"\r\n"
    request = (
        method + b" /p HTTP/" + version + b"\r\nHost: example.com\r\n"
        + b"".join(n + b": " + v + b"\r\n" for n, v in request_fields)
        + b"Connection: close\r\n" + body
    )  # fmt: skip
    respond = _upstream(status, framing, response_fields, interim)
    async with recording.plane(respond) as (port, rec), t.client(port) as c:
        c.send(request)
        answer = await c.closed()
    assert rec.problems == [] and len(rec.requests) == 1
    forwarded = rec.requests[0]
    if _DROP in request_fields:
        assert forwarded.value(b"x-drop") is None
    if method == b"POST":
        assert forwarded.body == BODY
    _check_answer(answer, version=version, method=method, status=status)
    if _DROP in response_fields:
        assert b"\r\nx-drop:" not in answer.lower()


def _check_answer(data: bytes, *, version: bytes, method: bytes, status: int) -> None:
    head, _, rest = data.partition(b"\r\n\r\n")
    while head.startswith(b"HTTP/1.1 1"):
        assert version == b"1.1", "an interim response sent to HTTP/1.0 (RFC 9110 §15.2)"
        head, _, rest = rest.partition(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    assert _STATUS_LINE.fullmatch(lines[0]) and int(lines[0].split()[1]) == status, lines[0]
    fields = []
    for line in lines[1:]:
        match = _FIELD.fullmatch(line)
        assert match is not None, line
        fields.append((match[1].lower(), match[2]))
    names = [n for n, _ in fields]
    assert not _HOP & set(names), names
    assert [v for n, v in fields if n == b"via"][-1] == b"1.1 coxswain"
    assert names.count(b"date") == 1  # RFC 9110 §6.6.1: one added when the upstream sent none
    assert set(dict(fields).get(b"connection", b"close").split(b", ")) <= {b"close", b"keep-alive"}
    _check_framing(dict(fields), rest, version=version, method=method, status=status)


def _check_framing(
    fields: dict[bytes, bytes], body: bytes, *, version: bytes, method: bytes, status: int
) -> None:
    coding, length = fields.get(b"transfer-encoding"), fields.get(b"content-length")
    assert not (coding and length), "both Content-Length and Transfer-Encoding"
    if status == 204:
        assert length is None, "Content-Length in a 204 (RFC 9110 §8.6)"
    if method == b"HEAD" or status in (204, 304):
        assert body == b""
        return
    if coding is not None:
        assert version == b"1.1" and coding == b"chunked", "chunked to HTTP/1.0 (RFC 9112 §6.1)"
        assert body == b"5\r\nhello\r\n0\r\n\r\n"
    else:
        assert length is None or int(length) == len(BODY)
        assert body == BODY
