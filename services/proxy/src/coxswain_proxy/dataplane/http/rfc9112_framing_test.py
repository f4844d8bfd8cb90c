"""Framing and persistence at the HTTP/1.1 front door (RFC 9112 §6, §7, §9), on real sockets.

As rfc9112_test.py (through a strict recording backend, `recording`), for how messages are
delimited: Connection: close and HTTP/1.0 persistence, a broken request pipelined behind a good
one, Transfer-Encoding and Content-Length, connection-options that name framing fields,
trailer fields, and what follows an Upgrade request until (and unless) the upstream switches.
"""

from __future__ import annotations

import asyncio

import pytest

from coxswain_proxy.dataplane import testing as t
from coxswain_proxy.dataplane.http.recording import GET2, H, kept, until_closed

# ------------------------------------------------------------------------------ upgrade


UPGRADE = b"GET /ws HTTP/1.1\r\n" + H + b"Connection: upgrade\r\nUpgrade: websocket\r\n"


async def test_bytes_after_an_upgrade_request_wait_for_the_switch() -> None:
    # Until the upstream answers 101, what follows an Upgrade request is no request of the
    # proxy's: sent on, an upstream that declines (here with a 200) would read it as one the
    # proxy never routed. It is held, and dropped when the upstream does not switch.
    smuggled = b"GET /smuggled HTTP/1.1\r\nHost: internal.example\r\n\r\n"
    answered, rec = await until_closed(UPGRADE + b"\r\n" + smuggled)
    assert [r.status for r in answered] == [200]
    assert [r.target for r in rec.requests] == [b"/ws"]


async def test_bytes_after_an_upgrade_request_go_on_once_the_upstream_switches() -> None:
    async def switching(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(
            b"HTTP/1.1 101 Switching Protocols\r\nConnection: upgrade\r\nUpgrade: x\r\n\r\n"
        )
        writer.write(b"echo:" + await reader.readexactly(5))
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(switching, "127.0.0.1", 0)
    resources: list[t.Resource] = [
        t.HTTP_LISTENER,
        t.endpoints("up", server.sockets[0].getsockname()[1]),
        t.routes("", t.rule("r", t.backend("up"))),
    ]
    try:
        async with t.running(resources) as plane, t.client(t.actual(plane)) as c:
            c.send(UPGRADE + b"\r\nearly")
            data = await c.closed()
    finally:
        server.close()
        await server.wait_closed()
    assert data.startswith(b"HTTP/1.1 101 ") and data.endswith(b"\r\n\r\necho:early")


async def test_an_upgrade_request_with_content_is_refused() -> None:
    # llhttp hands what follows an Upgrade head on as the new protocol's bytes, content and
    # all: where the content ends and what comes after it begins cannot be told.
    answered, rec = await until_closed(UPGRADE + b"Content-Length: 5\r\n\r\nhello")
    assert [r.status for r in answered] == [400]
    assert rec.requests == []


async def test_an_http_1_0_upgrade_is_ignored() -> None:
    # RFC 9110 §7.8: "A server MUST ignore an Upgrade header field that is received in an
    # HTTP/1.0 request." The request is served as a plain one, and the next one after it.
    first = b"GET /a HTTP/1.0\r\n" + H + b"Connection: upgrade, keep-alive\r\nUpgrade: ws\r\n\r\n"
    answered, rec = await kept(first + GET2, 2)
    assert [r.status for r in answered] == [200, 200]
    assert [(r.target, r.value(b"upgrade")) for r in rec.requests] == [
        (b"/a", None),
        (b"/second", None),
    ]


# ------------------------------------------------------------------------------ persistence


@pytest.mark.parametrize(
    "connection",
    [
        pytest.param(b"close", id="close"),
        pytest.param(b"keep-alive, close", id="in-a-list"),
        pytest.param(b"foo, close", id="after-an-option"),
        pytest.param(b", close ,", id="empty-list-elements"),
        pytest.param(b"Close", id="case-insensitive"),
    ],
)
async def test_connection_close_is_served_then_closed_and_nothing_after_is_read(
    connection: bytes,
) -> None:
    # RFC 9112 §9.6: "A server that receives a "close" connection option MUST initiate closure
    # of the connection (see below) after it sends the final response to the request that
    # contained the "close" connection option. The server SHOULD send a "close" connection
    # option in its final response on that connection. The server MUST NOT process any further
    # requests received on that connection." RFC 9110 §5.6.1: empty list elements are ignored.
    data = b"GET /first HTTP/1.1\r\n" + H + b"Connection: " + connection + b"\r\n\r\n" + GET2
    answered, rec = await until_closed(data)
    assert [(r.status, r.header("connection")) for r in answered] == [(200, "close")]
    assert [r.target for r in rec.requests] == [b"/first"]


@pytest.mark.parametrize(
    "fields",
    [
        pytest.param(b"", id="no-keep-alive"),
        pytest.param(b"Connection: keep-alive, close\r\n", id="close-beside-keep-alive"),
        pytest.param(b"Proxy-Connection: keep-alive\r\nConnection: close\r\n", id="close-wins"),
    ],
)
async def test_an_http_1_0_request_not_kept_alive_is_answered_then_closed(fields: bytes) -> None:
    # RFC 9112 §9.3: "If the "close" connection option is present (Section 9.6), the connection
    # will not persist after the current response; else, ... If the received protocol is
    # HTTP/1.0, the "keep-alive" connection option is present ... the connection will persist".
    data = b"GET /first HTTP/1.0\r\n" + H + fields + b"\r\n" + GET2
    answered, rec = await until_closed(data)
    assert [r.status for r in answered] == [200]
    assert [r.target for r in rec.requests] == [b"/first"]


@pytest.mark.parametrize(
    ("second", "status"),
    [
        pytest.param(
            b"POST /b HTTP/1.1\r\n" + H + b"Content-Length: abc\r\n\r\n",
            400,
            id="invalid-content-length",
        ),
        pytest.param(
            b"POST /b HTTP/1.1\r\n" + H + b"Content-Length: 1\r\nContent-Length: 2\r\n\r\n",
            400,
            id="two-content-lengths",
        ),
        pytest.param(b"GET /b HTTP/2.0\r\n" + H + b"\r\n", 505, id="bad-version"),
        pytest.param(
            b"GET /b HTTP/1.1\r\n" + H + b"X: " + b"x" * 40000 + b"\r\n\r\n",
            431,
            id="fields-too-large",
        ),
        pytest.param(b"GET /b HTTP/1.1\r\nBad Name: v\r\n\r\n", 400, id="unparsable-head"),
    ],
)
async def test_a_broken_pipelined_request_does_not_take_the_answer_before_it(
    second: bytes, status: int
) -> None:
    # RFC 9112 §6.3: "If a message is received without Transfer-Encoding and with an invalid
    # Content-Length header field, then the message framing is invalid and the recipient MUST
    # treat it as an unrecoverable error ... the server MUST respond with a 400 (Bad Request)
    # status code and then close the connection"; §9.3.2: responses go "in the same order
    # that the requests were received". The request before it is owed its answer first.
    answered, rec = await until_closed(b"GET /a HTTP/1.1\r\n" + H + b"\r\n" + second)
    assert [r.status for r in answered] == [200, status]
    assert answered[1].header("connection") == "close"
    assert [r.target for r in rec.requests] == [b"/a"]


async def test_a_chunked_body_that_breaks_while_queued_is_refused_in_its_turn() -> None:
    data = (
        b"GET /a HTTP/1.1\r\n" + H + b"\r\n"
        b"POST /b HTTP/1.1\r\n" + H + b"Transfer-Encoding: chunked\r\n\r\nzz\r\n"
    )
    answered, rec = await until_closed(data)
    assert [r.status for r in answered] == [200, 400]
    assert [r.target for r in rec.requests] == [b"/a"]


# ------------------------------------------------------------------------------ framing


@pytest.mark.parametrize(
    "coding",
    [
        pytest.param(b"chunked", id="chunked"),
        pytest.param(b", chunked", id="empty-element-first"),
        pytest.param(b"Chunked", id="case-insensitive"),
    ],
)
async def test_a_chunked_body_reaches_the_backend_whole(coding: bytes) -> None:
    # RFC 9110 §5.6.1.2: "A recipient MUST parse and ignore a reasonable number of empty list
    # elements"; codings are
    # case-insensitive (RFC 9112 §7).
    body = b"5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n"
    request = b"POST /p HTTP/1.1\r\n" + H + b"Transfer-Encoding: " + coding + b"\r\n\r\n" + body
    answered, rec = await kept(request, 1)
    assert answered[0].status == 200
    assert rec.requests[0].body == b"hello world"


@pytest.mark.parametrize(
    ("fields", "status"),
    [
        pytest.param(b"Transfer-Encoding: gzip, chunked\r\n", 501, id="unknown-coding-first"),
        pytest.param(
            b"Transfer-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n",
            501,
            id="unknown-coding-in-two-lines",
        ),
        pytest.param(b"Transfer-Encoding: chunked, gzip\r\n", 400, id="chunked-not-final"),
        pytest.param(b"Transfer-Encoding: gzip\r\n", 400, id="no-chunked"),
        pytest.param(
            b"Transfer-Encoding: chunked\r\nContent-Length: 5\r\n", 400, id="with-content-length"
        ),
    ],
)
async def test_a_transfer_coding_the_proxy_cannot_frame_by_is_refused_and_closed(
    fields: bytes, status: int
) -> None:
    # RFC 9112 §6.1: "A server that receives a request message with a transfer coding it does
    # not understand SHOULD respond with 501 (Not Implemented)"; §6.3: "If a Transfer-Encoding
    # header field is present in a request and the chunked transfer coding is not the final
    # encoding ... the server MUST respond with the 400 (Bad Request) status code and then
    # close the connection"; with Content-Length too, "MUST" close after responding.
    data = b"POST /p HTTP/1.1\r\n" + H + fields + b"\r\n5\r\nhello\r\n0\r\n\r\n" + GET2
    answered, rec = await until_closed(data)
    assert [r.status for r in answered] == [status]
    assert rec.requests == []


async def test_transfer_encoding_in_http_1_0_is_faulty_framing() -> None:
    # RFC 9112 §6.1: "A server or client that receives an HTTP/1.0 message containing a
    # Transfer-Encoding header field MUST treat the message as if the framing is faulty, even
    # if a Content-Length is present, and close the connection after processing the message."
    data = (
        b"POST /p HTTP/1.0\r\n" + H + b"Transfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n"
    )
    answered, rec = await until_closed(data)
    assert [r.status for r in answered] == [400]
    assert rec.requests == []


@pytest.mark.parametrize(
    "value",
    [
        pytest.param(b"+5", id="plus-sign"),
        pytest.param(b"-1", id="negative"),
        pytest.param(b"0x5", id="hex"),
        pytest.param(b"5, 6", id="a-list-of-two"),
        pytest.param(b"5 5", id="two-numbers"),
    ],
)
async def test_an_invalid_content_length_is_400_and_closed(value: bytes) -> None:
    # RFC 9110 §8.6: Content-Length = 1*DIGIT; RFC 9112 §6.3 (5): 400, then close.
    data = b"POST /p HTTP/1.1\r\n" + H + b"Content-Length: " + value + b"\r\n\r\nhello" + GET2
    answered, rec = await until_closed(data)
    assert [r.status for r in answered] == [400]
    assert rec.requests == []


@pytest.mark.parametrize(
    ("fields", "body"),
    [
        pytest.param(
            b"Connection: content-length\r\nContent-Length: 5\r\n", b"hello", id="content-length"
        ),
        pytest.param(
            b"Connection: Content-Length, keep-alive\r\nContent-Length: 5\r\n",
            b"hello",
            id="content-length-in-a-list",
        ),
        pytest.param(
            b"Connection: transfer-encoding\r\nTransfer-Encoding: chunked\r\n",
            b"5\r\nhello\r\n0\r\n\r\n",
            id="transfer-encoding",
        ),
    ],
)
async def test_a_connection_option_never_unframes_the_body(fields: bytes, body: bytes) -> None:
    # RFC 9110 §7.6.1 has a proxy remove the fields a connection-option names; one naming the
    # framing would leave the body unframed upstream, to be read as the next request. The
    # body arrives whole and framed, and the request behind it is its own.
    smuggled = b"GET /smuggled HTTP/1.1\r\n" + H + b"\r\n"
    request = b"POST /p HTTP/1.1\r\n" + H + fields + b"\r\n" + body
    answered, rec = await kept(request + smuggled, 2)
    assert [r.status for r in answered] == [200, 200]
    assert [(r.target, r.body) for r in rec.requests] == [(b"/p", b"hello"), (b"/smuggled", b"")]


async def test_a_connection_option_never_removes_the_host() -> None:
    _, rec = await kept(b"GET / HTTP/1.1\r\n" + H + b"Connection: host\r\n\r\n", 1)
    assert rec.requests[0].value(b"host") == b"example.com"


async def test_trailer_fields_are_not_the_next_requests_fields() -> None:
    # llhttp reports trailer fields as header fields: they must not become the fields (or the
    # Host) of the request pipelined behind (RFC 9112 §7.1.2: they may be discarded).
    request = (
        b"POST /p HTTP/1.1\r\n" + H + b"Transfer-Encoding: chunked\r\n\r\n"
        b"5\r\nhello\r\n0\r\nX-Injected: 1\r\nHost: evil.example\r\n\r\n" + GET2
    )
    answered, rec = await kept(request, 2)
    assert [r.status for r in answered] == [200, 200]
    second = rec.requests[1]
    assert second.value(b"x-injected") is None and second.value(b"host") == b"example.com"
