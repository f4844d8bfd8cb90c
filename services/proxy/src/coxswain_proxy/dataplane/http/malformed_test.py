"""Hostile and broken HTTP/1.1 from clients: answered 4xx, never forwarded ambiguously, never fatal.

Covers request-smuggling shapes (Content-Length with Transfer-Encoding, two differing lengths,
an obfuscated or non-final chunked coding, bad chunk sizes, bare CR or LF line endings, a space
before the colon), broken request lines and headers; each is refused with a 4xx and the
connection closed, and the backend never receives a request from it. Then two generated
fuzzes: valid requests cut, spliced and corrupted at random, and requests assembled from the
pieces the RFC checks are about (methods, targets, versions, Host, framing and connection
fields, bodies), seeded with the cases of the rfc91*_test.py modules. Whatever the
bytes, the proxy answers only well-formed responses or closes, logs no internal error, forwards
nothing a strict backend finds malformed (`recording`), and serves another client afterwards.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from typing import cast

import httptools
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from coxswain_proxy.dataplane import testing as t
from coxswain_proxy.dataplane.http import recording

GOOD = b"GET /ok HTTP/1.1\r\nHost: example.com\r\n\r\n"


class _Counting(asyncio.Protocol):
    """A backend that counts the requests it parses and answers each with 200."""

    def __init__(self, seen: list[bytes]) -> None:
        self.seen = seen
        self.parser = httptools.HttpRequestParser(self)
        self.transport: asyncio.Transport | None = None
        self.url = b""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            # An Upgrade the proxy let through: this backend declines it with its 200.
            self.on_message_complete()
        except httptools.HttpParserError:
            self.seen.append(b"<unparseable>")
            assert self.transport is not None
            self.transport.close()

    def on_url(self, url: bytes) -> None:
        self.url += url

    def on_message_complete(self) -> None:
        self.seen.append(self.url)
        self.url = b""
        assert self.transport is not None
        self.transport.write(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok")


@contextlib.asynccontextmanager
async def counting_plane() -> AsyncIterator[tuple[int, list[bytes]]]:
    seen: list[bytes] = []
    loop = asyncio.get_running_loop()
    server = await loop.create_server(lambda: _Counting(seen), "127.0.0.1", 0)
    backend_port = server.sockets[0].getsockname()[1]
    resources: list[t.Resource] = [
        t.HTTP_LISTENER,
        t.endpoints("echo", backend_port),
        t.routes("example.com", t.rule("r", t.backend("echo"))),
    ]
    try:
        async with t.running(resources) as plane:
            yield t.actual(plane), seen
    finally:
        server.close()
        await server.wait_closed()


SMUGGLING = [
    pytest.param(
        b"POST /a HTTP/1.1\r\nHost: example.com\r\nContent-Length: 6\r\n"
        b"Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n"
        b"GET /smuggled HTTP/1.1\r\nHost: example.com\r\n\r\n",
        id="content-length-and-chunked",
    ),
    pytest.param(
        b"POST /a HTTP/1.1\r\nHost: example.com\r\nContent-Length: 4\r\nContent-Length: 40\r\n\r\n"
        b"abcd",
        id="two-different-lengths",
    ),
    pytest.param(
        b"POST /a HTTP/1.1\r\nHost: example.com\r\nTransfer-Encoding: chunked, identity\r\n\r\n"
        b"4\r\nabcd\r\n0\r\n\r\n",
        id="chunked-not-final",
    ),
    pytest.param(
        b"POST /a HTTP/1.1\r\nHost: example.com\r\nTransfer-Encoding: xchunked\r\n\r\n"
        b"4\r\nabcd\r\n0\r\n\r\n",
        id="unknown-coding",
    ),
    pytest.param(
        b"POST /a HTTP/1.1\r\nHost: example.com\r\nTransfer-Encoding : chunked\r\n\r\n"
        b"4\r\nabcd\r\n0\r\n\r\n",
        id="space-before-colon",
    ),
    pytest.param(
        b"POST /a HTTP/1.1\r\nHost: example.com\r\nTransfer-Encoding: chunked\r\n\r\n"
        b"zz\r\nabcd\r\n0\r\n\r\n",
        id="bad-chunk-size",
    ),
    pytest.param(
        b"POST /a HTTP/1.1\r\nHost: example.com\r\nTransfer-Encoding: chunked\r\n\r\n"
        b"ffffffffffffffffff\r\nabcd\r\n",
        id="chunk-size-overflow",
    ),
    pytest.param(
        b"POST /a HTTP/1.1\r\nHost: example.com\r\nContent-Length: -1\r\n\r\n",
        id="negative-length",
    ),
    pytest.param(
        b"GET /a HTTP/1.1\nHost: example.com\rX-Smuggle: 1\r\n\r\n",
        id="bare-cr",
    ),
    pytest.param(
        b"GET /a HTTP/1.1\r\nHost: example.com\r\n folded: continuation\r\n\r\n",
        id="obsolete-line-folding",
    ),
    pytest.param(b"GET /a HTTP/7.1\r\nHost: example.com\r\n\r\n", id="unknown-version"),
    pytest.param(b"GET /a\x00b HTTP/1.1\r\nHost: example.com\r\n\r\n", id="nul-in-target"),
    pytest.param(b"GET /a HTTP/1.1\r\nHost: example.com\r\nBad\x01Name: v\r\n\r\n", id="ctl-name"),
    pytest.param(b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03" + b"\x00" * 40, id="tls-hello"),
]


@pytest.mark.parametrize("request_bytes", SMUGGLING)
async def test_ambiguous_or_broken_framing_is_refused_and_never_forwarded(
    request_bytes: bytes,
) -> None:
    async with counting_plane() as (port, seen), t.client(port) as c:
        c.send(request_bytes)
        answer = await c.closed()
        assert answer.startswith(b"HTTP/1.1 4"), answer[:80]
        assert answer.count(b"HTTP/1.1 ") == 1  # one refusal, nothing answered after it
        assert seen == []
        assert (await t.get(port, "/ok")).status == 200
        assert seen == [b"/ok"]


def _corrupt(base: bytes, cut: int, splice: bytes, flip: int) -> bytes:
    data = bytearray(base[:cut] + splice + base[cut:])
    if data:
        data[flip % len(data)] ^= 0x20
    return bytes(data)


BASES = [
    GOOD,
    b"POST /p HTTP/1.1\r\nHost: example.com\r\nContent-Length: 5\r\n\r\nhello",
    b"POST /p HTTP/1.1\r\nHost: example.com\r\nTransfer-Encoding: chunked\r\n\r\n"
    b"5\r\nhello\r\n0\r\n\r\n",
    b"GET /w HTTP/1.1\r\nHost: example.com\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n",
    b"GET /a HTTP/1.0\r\n\r\n",
]


@settings(
    max_examples=60,
    deadline=None,
    # caplog is cleared at the start of each example, so sharing it across them is sound.
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(
    base=st.sampled_from(BASES),
    cut=st.integers(0, 120),
    splice=st.binary(max_size=12) | st.sampled_from([b"\r\n", b"\n", b"\r", b":", b" ", b"\x00"]),
    flip=st.integers(0, 200),
    repeat=st.integers(1, 3),
)
# Found by this fuzz: bytes after an Upgrade request were sent on before the upstream switched.
@example(base=BASES[3], cut=0, splice=b"", flip=17, repeat=2)
@example(base=BASES[3], cut=79, splice=b"\x00", flip=17, repeat=1)
async def test_corrupted_requests_get_well_formed_answers_and_harm_no_one(
    base: bytes, cut: int, splice: bytes, flip: int, repeat: int, caplog: pytest.LogCaptureFixture
) -> None:
    garbage = _corrupt(base, cut, splice, flip) * repeat
    caplog.clear()
    with caplog.at_level(logging.ERROR, logger="coxswain_proxy"):
        async with recording.plane() as (port, rec):
            async with t.client(port) as c:
                c.send(garbage)
                with contextlib.suppress(TimeoutError, ConnectionError):
                    answer = await c.closed(within=1.0)
                    _assert_responses(answer)
            assert rec.problems == []  # nothing malformed or ambiguous was forwarded
            forwarded = len(rec.requests)
            assert (await t.get(port, "/ok")).status == 200
            assert len(rec.requests) == forwarded + 1
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]


def _assert_responses(data: bytes, *, strict: bool = False) -> None:
    """Every response in `data` parses, with a status a proxy may send (`strict`: and carries
    no field line the proxy would refuse in a request: CR, LF or NUL in a value)."""
    statuses: list[int] = []

    class Statuses:
        def on_message_complete(self) -> None:
            statuses.append(parser.get_status_code())

    parser = httptools.HttpResponseParser(Statuses())
    with contextlib.suppress(httptools.HttpParserUpgrade):
        parser.feed_data(data)
    assert all(100 <= s < 600 for s in statuses)
    if strict:
        for head in data.split(b"\r\n\r\n"):
            if head.startswith(b"HTTP/1.1 "):
                assert b"\x00" not in head and b"\n" not in head.replace(b"\r\n", b"")


# ------------------------------------------------------------------------------ assembled requests

_METHODS = [b"GET", b"HEAD", b"POST", b"PUT", b"DELETE", b"OPTIONS", b"PATCH", b"CONNECT",
            b"TRACE", b"G(T", b"get", b""]  # fmt: skip
_TARGETS = [b"/", b"/a?b=c", b"*", b"//x", b"/x#f", b"http://example.com/x?y", b"http://example.com",
            b"HTTPS://[::1]:8080/p", b"http://u@example.com/", b"http:///x", b"ftp://example.com/",
            b"example.com:443", b"/" + b"a" * 300, b"/a b", b"/\xff"]  # fmt: skip
_VERSIONS = [
    b"HTTP/1.1",
    b"HTTP/1.0",
    b"HTTP/2.0",
    b"HTTP/0.9",
    b"HTTP/1.2",
    b"HTTP/1.1 ",
    b"HTTP/11",
]
_FIELDS = [
    (b"Host", b"example.com"), (b"Host", b"u@example.com"), (b"Host", b"a.example, b.example"),
    (b"Host", b"[::1]:8080"), (b"Host", b"example.com:0"), (b"Host", b"example.com:65536"),
    (b"Host", b""), (b"Host", b"exa mple.com"), (b"Content-Length", b"5"),
    (b"Content-Length", b"0"),
    (b"Content-Length", b"+5"), (b"Content-Length", b"-1"), (b"Content-Length", b"5, 5"),
    (b"Transfer-Encoding", b"chunked"), (b"Transfer-Encoding", b", chunked"),
    (b"Transfer-Encoding", b"gzip, chunked"), (b"Transfer-Encoding", b"chunked, gzip"),
    (b"Connection", b"close"), (b"Connection", b"keep-alive"), (b"Connection", b", close ,"),
    (b"Connection", b"content-length"), (b"Connection", b"transfer-encoding, close"),
    (b"Connection", b"host"), (b"Connection", b"upgrade"), (b"Upgrade", b"websocket"),
    (b"Expect", b"100-continue"), (b"Max-Forwards", b"0"), (b"Max-Forwards", b"3"),
    (b"Via", b"1.0 fred"), (b"TE", b"trailers"), (b"Trailer", b"X-T"), (b"X-A ", b"b"),
    (b"X-A", b"b\x00c"), (b"X-A", b"b\rc"), (b"X(A)", b"b"), (b" X-A", b"b"),
]  # fmt: skip
_BODIES = [b"", b"hello", b"5\r\nhello\r\n0\r\n\r\n", b"0\r\nX-T: 1\r\nHost: e\r\n\r\n",
           b"zz\r\n", b"0\r\n\r\n", b"\r\n"]  # fmt: skip
# What follows each example on its connection: a request that asks for the close, so a proxy
# still in step answers it and ends the exchange.
_LAST = b"GET /last HTTP/1.1\r\nHost: example.com\r\nConnection: close\r\n\r\n"


@st.composite
def _request(draw: st.DrawFn) -> bytes:
    line = b" ".join(
        (draw(st.sampled_from(_METHODS)), draw(st.sampled_from(_TARGETS)),
         draw(st.sampled_from(_VERSIONS)))
    )  # fmt: skip
    field = st.sampled_from(_FIELDS) | st.tuples(st.binary(max_size=6), st.binary(max_size=8))
    fields = draw(st.lists(field, max_size=6))
    head = line + b"\r\n" + b"".join(n + b": " + v + b"\r\n" for n, v in fields) + b"\r\n"
    return head + draw(st.sampled_from(_BODIES))


_requests = st.lists(_request(), min_size=1, max_size=3).map(b"".join)


H = b"Host: example.com\r\n"


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(data=_requests)
# Seeds: the cases the rfc91*_test.py modules hold the proxy to.
@example(data=b"GET / HTTP/1.1\r\n\r\n")
@example(data=b"GET / HTTP/1.1\r\n" + H + H + b"\r\n")
@example(data=b"GET / HTTP/1.1\r\nHost: u@example.com\r\n\r\n")
@example(data=b"GET / HTTP/1.1\r\nHost: a.example, b.example\r\n\r\n")
@example(data=b"GET / HTTP/1.1\r\nHost: example.com:65536\r\n\r\n")
@example(data=b"GET / HTTP/1.1\r\nHost: [::1]:8080\r\n\r\n")
@example(data=b"GET http://example.com/x?y=1 HTTP/1.1\r\nHost: other.example\r\n\r\n")
@example(data=b"GET http://u@example.com/ HTTP/1.1\r\n" + H + b"\r\n")
@example(data=b"CONNECT example.com:443 HTTP/1.1\r\n" + H + b"\r\n" + GOOD)
@example(data=b"CONNECT example.com:443 HTTP/1.1\r\n" + H + b"Content-Length: 5\r\n\r\nGET /")
@example(data=b"GET * HTTP/1.1\r\n" + H + b"\r\n" + GOOD)
@example(data=b"OPTIONS * HTTP/1.1\r\n" + H + b"\r\n")
@example(data=b"GET / HTTP/2.0\r\n" + H + b"\r\n")
@example(data=b"GET / HTTP/0.9\r\n" + H + b"\r\n")
@example(data=b"GET / HTTP/1.1\r\n" + H + b"Connection: foo, close\r\n\r\n" + GOOD)
@example(data=b"GET / HTTP/1.1\r\n" + H + b"Connection: , close ,\r\n\r\n" + GOOD)
@example(data=b"POST / HTTP/1.1\r\n" + H + b"Transfer-Encoding: , chunked\r\n\r\n0\r\n\r\n")
@example(data=b"POST / HTTP/1.1\r\n" + H + b"Transfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n")
@example(data=b"POST / HTTP/1.0\r\n" + H + b"Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n")
@example(data=b"POST / HTTP/1.1\r\n" + H + b"Connection: content-length\r\n"
         b"Content-Length: 5\r\n\r\nhello" + GOOD)  # fmt: skip
@example(data=b"POST / HTTP/1.1\r\n" + H + b"Connection: transfer-encoding\r\n"
         b"Transfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n" + GOOD)  # fmt: skip
@example(data=b"GET / HTTP/1.1\r\n" + H + b"Connection: host\r\n\r\n")
@example(data=b"GET /" + b"a" * 9000 + b" HTTP/1.1\r\n" + H + b"\r\n")
@example(data=GOOD + b"POST /b HTTP/1.1\r\n" + H + b"Content-Length: abc\r\n\r\n")
@example(
    data=b"POST / HTTP/1.0\r\n" + H + b"Expect: 100-continue\r\nContent-Length: 5\r\n\r\nhello"
)
@example(data=b"POST / HTTP/1.1\r\n" + H + b"Transfer-Encoding: chunked\r\n\r\n"
         b"5\r\nhello\r\n0\r\nHost: evil\r\n\r\n" + GOOD)  # fmt: skip
@example(data=b"TRACE / HTTP/1.1\r\n" + H + b"\r\n")
@example(data=b"OPTIONS / HTTP/1.1\r\n" + H + b"Max-Forwards: 0\r\n\r\n")
@example(data=b"GET / HTTP/1.1\r\n" + H + b"X-A: b\r\n c\r\n\r\n")
@example(data=b"POST / HTTP/1.1\r\n" + H + b"Content-Length: +5\r\n\r\nhello")
@example(data=b"GET / HTTP/1.0\r\n" + H + b"Connection: upgrade, keep-alive\r\nUpgrade: ws\r\n\r\n")
async def test_assembled_requests_are_answered_or_closed_and_never_forwarded_malformed(
    data: bytes, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.clear()
    with caplog.at_level(logging.ERROR, logger="coxswain_proxy"):
        async with recording.plane() as (port, rec):
            async with t.client(port) as c:
                c.send(data + _LAST)
                answer = await _read_until_close(c)
            _assert_responses(answer, strict=True)
            assert rec.problems == []
            forwarded = len(rec.requests)
            assert (await t.get(port, "/ok")).status == 200
            assert len(rec.requests) == forwarded + 1 and rec.problems == []
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]


async def _read_until_close(c: t.Client) -> bytes:
    """What the proxy sent until it closed, or until a second passed without it closing (a
    request whose body never comes keeps the connection open)."""
    got = b""
    with contextlib.suppress(TimeoutError, ConnectionError):
        async with asyncio.timeout(1.0):
            while data := await c.reader.read(65536):
                got += data
    return got
