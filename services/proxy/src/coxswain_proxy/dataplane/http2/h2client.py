"""A raw HTTP/2 client for tests (the `h2` library over an asyncio stream): frames as sent.

Kept out of the tests so each reads as the rule it checks; only tests import this. It sends what
a test says, however wrong, and collects the events the proxy's frames decode to.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import h2.config
import h2.connection
import h2.events

PREFACE_ONLY = h2.config.H2Configuration(client_side=True, header_encoding=None)
RAW = h2.config.H2Configuration(
    client_side=True, header_encoding=None, validate_outbound_headers=False,
    normalize_outbound_headers=False, validate_inbound_headers=False,
)  # fmt: skip


@dataclass
class Answer:
    status: int = 0
    headers: list[tuple[bytes, bytes]] = field(default_factory=list)
    body: bytes = b""
    trailers: list[tuple[bytes, bytes]] = field(default_factory=list)
    informational: list[list[tuple[bytes, bytes]]] = field(default_factory=list)  # 1xx heads
    reset: int | None = None
    ended: bool = False

    def header(self, name: bytes) -> bytes | None:
        return next((v for n, v in self.headers if n == name), None)


class H2Client:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer
        self.h2 = h2.connection.H2Connection(RAW)
        self.answers: dict[int, Answer] = {}
        self.goaway: h2.events.ConnectionTerminated | None = None
        self.closed = False
        self.auto_window = True  # acknowledge response DATA as it comes
        self.outgoing: dict[int, bytearray] = {}  # request bodies waiting for window

    def flush(self) -> None:
        data = self.h2.data_to_send()
        if data:
            self.writer.write(data)

    def request(
        self,
        path: str = "/",
        authority: str = "example.com",
        method: str = "GET",
        extra: list[tuple[bytes, bytes]] | None = None,
        body: bytes | None = None,
        block: list[tuple[bytes, bytes]] | None = None,
        end: bool = True,
    ) -> int:
        """Open a stream; `end` False: neither the body's END_STREAM nor the body yet when
        `body` is None (the test sends them: `send_body`)."""
        stream = self.h2.get_next_available_stream_id()
        if block is None:
            block = [(b":method", method.encode()), (b":scheme", b"http"),
                     (b":authority", authority.encode()), (b":path", path.encode())]  # fmt: skip
            block += extra or []
        self.answers[stream] = Answer()
        self.h2.send_headers(stream, block, end_stream=body is None and end)
        if body is not None:
            self.send_body(stream, body)
        self.flush()
        return stream

    def send_body(self, stream: int, body: bytes) -> None:
        """`body` then END_STREAM on `stream`, within the windows."""
        self.outgoing[stream] = bytearray(body)
        self.pump()
        self.flush()

    def send_trailers(self, stream: int, block: list[tuple[bytes, bytes]]) -> None:
        """A trailing HEADERS frame ending `stream` (after its body, sent without END_STREAM)."""
        self.h2.send_headers(stream, block, end_stream=True)
        self.flush()

    def pump(self) -> None:
        """Send what the windows allow of each stream's body; END_STREAM after the last."""
        for stream, rest in list(self.outgoing.items()):
            while rest:
                size = min(len(rest), self.h2.local_flow_control_window(stream),
                           self.h2.max_outbound_frame_size)  # fmt: skip
                if size <= 0:
                    break
                self.h2.send_data(stream, bytes(rest[:size]))
                del rest[:size]
            if not rest:
                del self.outgoing[stream]
                self.h2.end_stream(stream)

    async def read(self) -> None:
        data = await self.reader.read(65536)
        if not data:
            self.closed = True
            return
        for event in self.h2.receive_data(data):
            self._event(event)
        self.flush()

    def _event(self, event: h2.events.Event) -> None:
        sid = getattr(event, "stream_id", 0)
        answer = self.answers.get(sid)
        if isinstance(event, h2.events.ConnectionTerminated):
            self.goaway = event
        elif isinstance(event, (h2.events.WindowUpdated, h2.events.RemoteSettingsChanged)):
            self.pump()
        elif answer is None:
            return
        elif isinstance(event, h2.events.InformationalResponseReceived):
            answer.informational.append(list(event.headers or []))
        elif isinstance(event, h2.events.ResponseReceived):
            answer.headers = list(event.headers or [])
            answer.status = int(dict(answer.headers)[b":status"])
        elif isinstance(event, h2.events.DataReceived):
            answer.body += event.data or b""
            if self.auto_window:
                self.h2.acknowledge_received_data(event.flow_controlled_length or 0, sid)
        elif isinstance(event, h2.events.TrailersReceived):
            answer.trailers = list(event.headers or [])
        elif isinstance(event, h2.events.StreamEnded):
            answer.ended = True
        elif isinstance(event, h2.events.StreamReset):
            answer.reset = event.error_code

    async def until(self, done: object, within: float = 10.0) -> None:
        """Read until `done()` is true (or the connection closes)."""
        check = done if callable(done) else None
        assert check is not None
        async with asyncio.timeout(within):
            while not check() and not self.closed:
                await self.read()

    async def answer(self, stream: int) -> Answer:
        got = self.answers[stream]
        await self.until(lambda: got.ended or got.reset is not None)
        return got

    async def get(self, path: str = "/", authority: str = "example.com") -> Answer:
        return await self.answer(self.request(path, authority))


@contextlib.asynccontextmanager
async def connected(
    port: int, context: ssl.SSLContext | None = None, sni: str = ""
) -> AsyncIterator[H2Client]:
    reader, writer = await asyncio.open_connection(
        "127.0.0.1", port, ssl=context, server_hostname=(sni or None) if context else None
    )
    client = H2Client(reader, writer)
    client.h2.initiate_connection()
    client.flush()
    try:
        yield client
    finally:
        writer.close()
        with contextlib.suppress(OSError, ssl.SSLError):
            await writer.wait_closed()
