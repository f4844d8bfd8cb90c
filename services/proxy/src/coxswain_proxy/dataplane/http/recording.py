"""A backend for protocol tests: it records each request the proxy forwards and checks it.

Only tests import this (like `testing`). The proxy must never forward anything malformed or
ambiguously framed, so this backend parses what it receives with a strict reader of its own
rather than llhttp (which is what the proxy parses with, and so would share its blind spots):
one request line `token SP origin-form SP HTTP/1.1`, token field names, values free of CR, LF
and NUL, exactly one Host, no hop-by-hop fields, a Via naming the proxy last, and one framing
(a decimal Content-Length, or `transfer-encoding: chunked` with well-formed chunks and a
trailer section free of framing fields and Host). Anything
else is recorded in `problems` and the connection is closed.

Each request is answered by `respond` (by default 200 with `content-length: 2` and "ok"); an
answer saying `connection: close` closes the connection after it.
`until_closed` and `kept` send a client's bytes through a data plane in front of it.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import cast

import httptools

from coxswain_proxy.dataplane import testing as t
from coxswain_proxy.dataplane.runtime import Config

_REQUEST_LINE = re.compile(rb"([!#$%&'*+\-.^_`|~0-9A-Za-z]+) (/[^\x00-\x20\x7f#]*) HTTP/1\.1")
_FIELD = re.compile(rb"([!#$%&'*+\-.^_`|~0-9A-Za-z]+):[ \t]*([^\x00-\x08\x0a-\x1f\x7f]*)")
_HOP = frozenset({b"connection", b"keep-alive", b"proxy-connection", b"te", b"trailer",
                  b"transfer-encoding", b"upgrade"})  # fmt: skip
_CHUNK_SIZE = re.compile(rb"[0-9a-f]+")


class Malformed(Exception):
    """What the proxy forwarded is not a well-formed, unambiguously framed request."""


@dataclass
class Received:
    """One request as the backend read it."""

    method: bytes
    target: bytes
    fields: list[tuple[bytes, bytes]]  # names lower-cased, in order
    body: bytes = b""

    def values(self, name: bytes) -> list[bytes]:
        return [v for n, v in self.fields if n == name]

    def value(self, name: bytes) -> bytes | None:
        found = self.values(name)
        return found[0] if found else None


Respond = Callable[[Received], bytes]


def ok(request: Received) -> bytes:
    if request.method == b"HEAD":
        # No body; and a length a client parsing the answer without its request can read.
        return b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n"
    return b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok"


@dataclass
class Recorder:
    respond: Respond = ok
    requests: list[Received] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


class _Strict(asyncio.Protocol):
    def __init__(self, recorder: Recorder) -> None:
        self.recorder = recorder
        self.buffer = b""
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        try:
            while (request := self._next()) is not None:
                self.recorder.requests.append(request)
                assert self.transport is not None
                answer = self.recorder.respond(request)
                self.transport.write(answer)
                if b"\r\nconnection: close\r\n" in answer.lower():
                    self.transport.close()
                    return
        except Malformed as exc:
            self.recorder.problems.append(str(exc))
            assert self.transport is not None
            self.transport.close()

    def _next(self) -> Received | None:
        end = self.buffer.find(b"\r\n\r\n")
        if end < 0:
            return None
        request = _head(self.buffer[:end])
        rest = self.buffer[end + 4 :]
        body = _body(request, rest)
        if body is None:
            return None
        request.body, used = body
        self.buffer = rest[used:]
        return request


def _head(head: bytes) -> Received:
    lines = head.split(b"\r\n")
    line = _REQUEST_LINE.fullmatch(lines[0])
    if line is None:
        raise Malformed(f"request line {lines[0]!r}")
    fields = []
    for raw in lines[1:]:
        match = _FIELD.fullmatch(raw)
        if match is None:
            raise Malformed(f"field line {raw!r}")
        fields.append((match[1].lower(), match[2].rstrip(b" \t")))
    request = Received(line[1], line[2], fields)
    names = [n for n, _ in fields]
    if names.count(b"host") != 1:
        raise Malformed(f"{names.count(b'host')} Host fields")
    upgrade = request.value(b"upgrade") is not None
    for name in names:
        if name in _HOP and name != b"transfer-encoding" and not upgrade:
            raise Malformed(f"hop-by-hop field {name!r} forwarded")
    via = request.values(b"via")
    if not via or not via[-1].endswith(b" coxswain"):
        raise Malformed(f"no Via naming the proxy last: {via!r}")
    return request


def _body(request: Received, rest: bytes) -> tuple[bytes, int] | None:
    lengths = request.values(b"content-length")
    codings = request.values(b"transfer-encoding")
    if lengths and codings:
        raise Malformed("both Content-Length and Transfer-Encoding")
    if codings:
        if codings != [b"chunked"]:
            raise Malformed(f"Transfer-Encoding {codings!r}")
        return _chunked(rest)
    if len(lengths) > 1 or (lengths and not lengths[0].isdigit()):
        raise Malformed(f"Content-Length {lengths!r}")
    size = int(lengths[0]) if lengths else 0
    return (rest[:size], size) if len(rest) >= size else None


def _chunked(rest: bytes) -> tuple[bytes, int] | None:
    body: list[bytes] = []
    at = 0
    while True:
        eol = rest.find(b"\r\n", at)
        if eol < 0:
            return None
        if not _CHUNK_SIZE.fullmatch(rest[at:eol]):
            raise Malformed(f"chunk size {rest[at:eol]!r}")
        size = int(rest[at:eol], 16)
        start = eol + 2
        if size == 0:
            return _trailer_section(rest, start, body)
        if len(rest) < start + size + 2:
            return None
        if rest[start + size : start + size + 2] != b"\r\n":
            raise Malformed("chunk not followed by CRLF")
        at = start + size + 2
        body.append(rest[start : start + size])


# What a trailer section may never hold (RFC 9110 §6.5.1; the proxy drops them, `trailers`).
_NOT_TRAILERS = frozenset({b"content-length", b"transfer-encoding", b"host", b"trailer"})


def _trailer_section(rest: bytes, at: int, body: list[bytes]) -> tuple[bytes, int] | None:
    """After the last chunk: `trailer-section CRLF` (RFC 9112 §7.1), each line a field."""
    while True:
        eol = rest.find(b"\r\n", at)
        if eol < 0:
            return None
        if eol == at:
            return b"".join(body), at + 2
        match = _FIELD.fullmatch(rest[at:eol])
        if match is None or match[1].lower() in _NOT_TRAILERS:
            raise Malformed(f"trailer field line {rest[at:eol]!r}")
        at = eol + 2


@contextlib.asynccontextmanager
async def backend(respond: Respond = ok) -> AsyncIterator[tuple[int, Recorder]]:
    """A strict recording backend on loopback: (its port, what it saw)."""
    recorder = Recorder(respond)
    loop = asyncio.get_running_loop()
    server = await loop.create_server(lambda: _Strict(recorder), "127.0.0.1", 0)
    try:
        yield server.sockets[0].getsockname()[1], recorder
    finally:
        server.close()
        await server.wait_closed()


@contextlib.asynccontextmanager
async def plane(
    respond: Respond = ok, config: Config | None = None
) -> AsyncIterator[tuple[int, Recorder]]:
    """A data plane whose one hostless route sends every request to a recording backend."""
    async with backend(respond) as (port, recorder):
        resources: list[t.Resource] = [
            t.HTTP_LISTENER,
            t.endpoints("rec", port),
            t.routes("", t.rule("r", t.backend("rec"))),
        ]
        async with t.running(resources, config) as running:
            yield t.actual(running), recorder


# ------------------------------------------------------------------------------ clients

H = b"Host: example.com\r\n"
GET2 = b"GET /second HTTP/1.1\r\n" + H + b"\r\n"  # a request pipelined behind another


def parse(data: bytes) -> list[t.Response]:
    """The responses in `data`, in order."""
    done: list[t.Response] = []
    fields: list[tuple[str, str]] = []
    body: list[bytes] = []

    class Responses:
        def on_header(self, name: bytes, value: bytes) -> None:
            fields.append((name.decode(), value.decode("latin-1")))

        def on_body(self, chunk: bytes) -> None:
            body.append(chunk)

        def on_message_complete(self) -> None:
            done.append(t.Response(parser.get_status_code(), list(fields), b"".join(body)))
            fields.clear()
            body.clear()

    parser = httptools.HttpResponseParser(Responses())
    parser.feed_data(data)
    return done


Answered = tuple[list[t.Response], Recorder]


async def until_closed(
    data: bytes, respond: Respond = ok, config: Config | None = None
) -> Answered:
    """Send `data` on one connection and read until the proxy closes it."""
    async with plane(respond, config) as (port, rec), t.client(port) as c:
        c.send(data)
        answered = parse(await c.closed())
    assert rec.problems == []
    return answered, rec


async def kept(data: bytes, count: int, respond: Respond = ok) -> Answered:
    """Send `data` and read `count` responses; then the connection must still serve a request."""
    async with plane(respond) as (port, rec), t.client(port) as c:
        c.send(data)
        answered = await c.responses(count)
        assert (await c.request("/after")).status == 200
    assert rec.problems == []
    assert rec.requests[-1].target == b"/after"
    del rec.requests[-1]
    return answered, rec
