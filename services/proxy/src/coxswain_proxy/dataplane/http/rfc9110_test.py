"""What the proxy adds to, takes from and answers about forwarded messages (RFC 9110, RFC 9112).

On real sockets, through a strict recording backend (`recording`) whose answers each test
chooses: Via both ways, Max-Forwards, Expect: 100-continue and interim responses (never to an
HTTP/1.0 client), how a response is framed for an HTTP/1.0 client, what responses to HEAD and
204/304 carry, and field syntax the proxy refuses. Request-line, Host, target and request
framing rules are in rfc9112_test.py.
"""

from __future__ import annotations

import re

import pytest

from coxswain_proxy.dataplane import testing as t
from coxswain_proxy.dataplane.http import recording
from coxswain_proxy.dataplane.http.recording import GET2, H, kept, until_closed


def answer(data: bytes) -> recording.Respond:
    return lambda _: data


OK = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok"
CHUNKED_OK = b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n"
UNTIL_CLOSE = b"HTTP/1.1 200 OK\r\nconnection: close\r\n\r\nhello"
UPSTREAM_UNSIZED = [
    pytest.param(CHUNKED_OK, id="upstream-chunked"),
    pytest.param(UNTIL_CLOSE, id="upstream-close-delimited"),
]


# ------------------------------------------------------------------------------ Via


async def test_via_is_added_after_the_via_a_request_carried() -> None:
    # RFC 9110 §7.6.3: "A proxy MUST send an appropriate Via header field, as described below,
    # in each message that it forwards"; the field lines of a list combine in order, so the
    # proxy's entry comes after the ones before it.
    request = b"GET / HTTP/1.1\r\n" + H + b"Via: 1.0 fred, 1.1 p.example\r\n\r\n"
    _, rec = await kept(request, 1)
    assert rec.requests[0].values(b"via") == [b"1.0 fred, 1.1 p.example", b"1.1 coxswain"]


async def test_via_names_the_version_received_from_an_http_1_0_client() -> None:
    _, rec = await until_closed(b"GET / HTTP/1.0\r\n" + H + b"\r\n")
    assert rec.requests[0].values(b"via") == [b"1.0 coxswain"]


async def test_via_is_added_to_the_response_after_the_upstreams() -> None:
    upstream = b"HTTP/1.1 200 OK\r\nvia: 1.1 inner\r\ncontent-length: 2\r\n\r\nok"
    answered, _ = await kept(b"GET / HTTP/1.1\r\n" + H + b"\r\n", 1, answer(upstream))
    assert [v for n, v in answered[0].headers if n.lower() == "via"] == [
        "1.1 inner",
        "1.1 coxswain",
    ]


# ------------------------------------------------------------------------------ Date

IMF_FIXDATE = re.compile(
    r"(Mon|Tue|Wed|Thu|Fri|Sat|Sun), \d\d [A-Z][a-z]{2} \d{4} \d\d:\d\d:\d\d GMT"
)


@pytest.mark.parametrize(
    ("upstream", "date"),
    [
        pytest.param(OK, None, id="added-when-missing"),
        pytest.param(b"HTTP/1.1 200 OK\r\ndate: Sun, 06 Nov 1994 08:49:37 GMT\r\n"
                     b"content-length: 2\r\n\r\nok", "Sun, 06 Nov 1994 08:49:37 GMT",
                     id="the-upstreams-kept"),
    ],
)  # fmt: skip
async def test_a_forwarded_response_carries_one_date(upstream: bytes, date: str | None) -> None:
    # RFC 9110 §6.6.1: "A recipient with a clock that receives a response message without a
    # Date header field MUST record the time it was received and append a corresponding Date
    # header field to the message's header section if it is cached or forwarded downstream."
    answered, _ = await kept(b"GET / HTTP/1.1\r\n" + H + b"\r\n", 1, answer(upstream))
    dates = [v for n, v in answered[0].headers if n.lower() == "date"]
    assert len(dates) == 1 and IMF_FIXDATE.fullmatch(dates[0])
    assert date is None or dates[0] == date


async def test_the_proxys_own_answers_carry_a_date() -> None:
    # RFC 9110 §6.6.1: "An origin server with a clock MUST generate a Date header field in all
    # 2xx (Successful), 3xx (Redirection), and 4xx (Client Error) responses".
    answered, _ = await until_closed(b"GET / HTTP/1.1\r\n\r\n")  # no Host: 400
    assert IMF_FIXDATE.fullmatch(answered[0].header("date") or "")


# ------------------------------------------------------------------------------ Max-Forwards


async def test_options_with_max_forwards_zero_is_answered_by_the_proxy() -> None:
    # RFC 9110 §7.6.2: "If the received Max-Forwards value is zero (0), the recipient MUST NOT
    # forward the request; instead, the recipient MUST respond as the final recipient."
    request = b"OPTIONS /x HTTP/1.1\r\n" + H + b"Max-Forwards: 0\r\n\r\n"
    answered, rec = await kept(request, 1)
    assert answered[0].status == 200 and "GET" in (answered[0].header("allow") or "")
    assert rec.requests == []


@pytest.mark.parametrize(
    ("method", "given", "sent"),
    [
        pytest.param(b"OPTIONS", b"5", b"4", id="options-decremented"),
        pytest.param(b"OPTIONS", b"99999999999999", b"999999999", id="options-bounded"),
        pytest.param(b"OPTIONS", b"x", b"x", id="options-invalid-value-left-alone"),
        pytest.param(b"GET", b"0", b"0", id="other-methods-untouched"),
    ],
)
async def test_max_forwards_is_decremented_on_options(
    method: bytes, given: bytes, sent: bytes
) -> None:
    # RFC 9110 §7.6.2: "the intermediary MUST generate an updated Max-Forwards field in the
    # forwarded message with a field value that is the lesser of a) the received value
    # decremented by one (1) or b) the recipient's maximum supported value"; "A recipient MAY
    # ignore a Max-Forwards header field received with any other request methods."
    request = method + b" /x HTTP/1.1\r\n" + H + b"Max-Forwards: " + given + b"\r\n\r\n"
    answered, rec = await kept(request, 1)
    assert answered[0].status == 200
    assert rec.requests[0].value(b"max-forwards") == sent


# ------------------------------------------------------------------------------ Expect, 1xx

EXPECT_10 = b"POST /p HTTP/1.0\r\n" + H + b"Expect: 100-continue\r\nContent-Length: 5\r\n\r\nhello"


async def test_an_http_1_0_expectation_is_ignored_and_not_passed_on() -> None:
    # RFC 9110 §10.1.1: "A server that receives a 100-continue expectation in an HTTP/1.0
    # request MUST ignore that expectation."
    async with recording.plane() as (port, rec), t.client(port) as c:
        c.send(EXPECT_10)
        data = await c.closed()
    assert data.startswith(b"HTTP/1.1 200 ") and data.count(b"HTTP/1.1 ") == 1
    assert rec.requests[0].value(b"expect") is None and rec.requests[0].body == b"hello"


@pytest.mark.parametrize(
    ("version", "interim"),
    [pytest.param(b"1.0", [], id="not-to-http-1.0"), pytest.param(b"1.1", [103], id="to-http-1.1")],
)
async def test_an_interim_response_is_forwarded_only_to_http_1_1(
    version: bytes, interim: list[int]
) -> None:
    # RFC 9110 §15.2: "A proxy MUST forward 1xx responses unless the proxy itself requested
    # the generation of the 1xx response", and "A server MUST NOT send a 1xx response to an
    # HTTP/1.0 client."
    upstream = b"HTTP/1.1 103 Early Hints\r\nlink: </s.css>\r\n\r\n" + OK
    async with recording.plane(answer(upstream)) as (port, _), t.client(port) as c:
        c.send(b"GET / HTTP/" + version + b"\r\n" + H + b"Connection: close\r\n\r\n")
        data = await c.closed()
    statuses = [int(line.split()[1]) for line in data.split(b"\r\n") if line.startswith(b"HTTP/")]
    assert statuses == [*interim, 200]


# ------------------------------------------------------------------------------ HTTP/1.0 responses


@pytest.mark.parametrize("upstream", UPSTREAM_UNSIZED)
async def test_a_response_to_http_1_0_is_never_chunked(upstream: bytes) -> None:
    # RFC 9112 §6.1: "A server MUST NOT send a response containing Transfer-Encoding unless the
    # corresponding request indicates HTTP/1.1 (or later minor revisions)." No length known:
    # the body is delimited by the close.
    async with recording.plane(answer(upstream)) as (port, _), t.client(port) as c:
        c.send(b"GET / HTTP/1.0\r\n" + H + b"Connection: keep-alive\r\n\r\n")
        data = await c.closed()
    head, _, body = data.partition(b"\r\n\r\n")
    assert b"transfer-encoding" not in head.lower() and b"content-length" not in head.lower()
    assert b"connection: close" in head and body == b"hello"


@pytest.mark.parametrize("upstream", UPSTREAM_UNSIZED)
async def test_the_same_response_to_http_1_1_is_chunked_and_kept(upstream: bytes) -> None:
    # RFC 9112 §8: a response with neither chunked nor Content-Length "is terminated by
    # closure of the connection and ... is considered complete": its last chunk is sent.
    answered, _ = await kept(b"GET / HTTP/1.1\r\n" + H + b"\r\n", 1, answer(upstream))
    assert answered[0].header("transfer-encoding") == "chunked" and answered[0].body == b"hello"


# ------------------------------------------------------------------------------ bodiless responses


async def test_a_response_to_head_carries_no_body() -> None:
    # RFC 9110 §9.3.2: "The server SHOULD send the same header fields in response to a HEAD
    # request as it would have sent if the request method had been GET"; RFC 9112 §6.3 (1):
    # the response ends at the blank line; the connection then serves the next request.
    upstream = b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\n"
    async with recording.plane(answer(upstream)) as (port, _), t.client(port) as c:
        c.send(
            b"HEAD / HTTP/1.1\r\n"
            + H
            + b"\r\nHEAD /2 HTTP/1.1\r\n"
            + H
            + b"Connection: close\r\n\r\n"
        )
        data = await c.closed()
    first, second, rest = data.split(b"\r\n\r\n")
    assert first.startswith(b"HTTP/1.1 200 ") and b"content-length: 5" in first
    assert second.startswith(b"HTTP/1.1 200 ") and b"content-length: 5" in second
    assert rest == b""


async def test_a_204_carries_no_content_length_and_no_body() -> None:
    # RFC 9110 §8.6: "A server MUST NOT send a Content-Length header field in any response
    # with a status code of 1xx (Informational) or 204 (No Content)"; §15.3.5: a 204 "cannot
    # contain content".
    upstream = b"HTTP/1.1 204 No Content\r\ncontent-length: 0\r\nx-kept: 1\r\n\r\n"
    async with recording.plane(answer(upstream)) as (port, _), t.client(port) as c:
        c.send(b"GET / HTTP/1.1\r\n" + H + b"\r\n" + GET2)
        head = await c.reader.readuntil(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 204 ") and b"x-kept: 1" in head
        assert b"content-length" not in head.lower() and b"transfer-encoding" not in head.lower()
        assert (await c.reader.readuntil(b"\r\n\r\n")).startswith(b"HTTP/1.1 204 ")


async def test_a_304_keeps_its_content_length_and_sends_no_body() -> None:
    # RFC 9110 §8.6: a 304 may carry the length of the representation it stands for; §15.4.5:
    # it "cannot contain content".
    upstream = b"HTTP/1.1 304 Not Modified\r\ncontent-length: 42\r\n\r\n"
    async with recording.plane(answer(upstream)) as (port, _), t.client(port) as c:
        c.send(b"GET / HTTP/1.1\r\n" + H + b"\r\n" + GET2)
        first = await c.reader.readuntil(b"\r\n\r\n")
        second = await c.reader.readuntil(b"\r\n\r\n")
    assert b"content-length: 42" in first and second.startswith(b"HTTP/1.1 304 ")


# ------------------------------------------------------------------------------ field syntax


@pytest.mark.parametrize(
    "request_bytes",
    [
        pytest.param(b"GET / HTTP/1.1\r\n" + H + b"X-A : b\r\n\r\n", id="whitespace-before-colon"),
        pytest.param(b"GET / HTTP/1.1\r\n" + H + b"X-A: b\r\n c\r\n\r\n", id="obs-fold"),
        pytest.param(b"GET / HTTP/1.1\r\n" + H + b"X(A): b\r\n\r\n", id="name-not-a-token"),
        pytest.param(b"GET / HTTP/1.1\r\n" + H + b"X@A: b\r\n\r\n", id="name-with-at"),
        pytest.param(b"GET / HTTP/1.1\r\n" + H + b": b\r\n\r\n", id="empty-name"),
        pytest.param(b"GET / HTTP/1.1\r\n" + H + b"X-A: b\x00c\r\n\r\n", id="nul-in-value"),
        pytest.param(b"GET / HTTP/1.1\r\n" + H + b"X-A: b\rc\r\n\r\n", id="bare-cr-in-value"),
        pytest.param(b"GET / HTTP/1.1\r\n" + H + b"X-A: b\x7f\r\n\r\n", id="del-in-value"),
        pytest.param(b"G(T / HTTP/1.1\r\n" + H + b"\r\n", id="method-not-a-token"),
        pytest.param(b"GET /a b HTTP/1.1\r\n" + H + b"\r\n", id="space-in-target"),
    ],
)
async def test_invalid_field_syntax_is_400_and_never_forwarded(request_bytes: bytes) -> None:
    # RFC 9112 §5.1: "No whitespace is allowed between the field name and colon ... A server
    # MUST reject, with a response status code of 400 (Bad Request), any received request
    # message that contains whitespace between a header field name and colon"; §5.2: "A server
    # that receives an obs-fold in a request message ... MUST either reject the message by
    # sending a 400 (Bad Request) ... or replace each received obs-fold with one or more SP";
    # RFC 9110 §5.1 and §5.5: names are tokens, and "Field values containing CR, LF, or NUL
    # characters are invalid and dangerous"; RFC 9112 §3: a method is a token.
    answered, rec = await until_closed(request_bytes)
    assert [r.status for r in answered] == [400]
    assert rec.requests == []


@pytest.mark.parametrize(
    "method",
    [pytest.param(b"FOO", id="unknown"), pytest.param(b"get", id="methods-are-case-sensitive")],
)
async def test_a_method_the_proxy_does_not_know_is_501(method: bytes) -> None:
    # RFC 9110 §9.1: "An origin server that receives a request method that is unrecognized or
    # not implemented SHOULD respond with the 501 (Not Implemented) status code"; "The method
    # token is case-sensitive".
    answered, rec = await until_closed(method + b" / HTTP/1.1\r\n" + H + b"\r\n")
    assert [r.status for r in answered] == [501]
    assert rec.requests == []
