"""RFC 9113's rules for frames, as a client breaking each one sees them: raw frames written to a
real data plane over a socket, the proxy's frames read back (hyperframe parses them).

Covers: connection errors (GOAWAY with the code the RFC names) for a preface without SETTINGS,
DATA on an idle stream, an even or reused stream id, a frame past the maximum size, a zero or
overflowing connection WINDOW_UPDATE, an undecodable header block, a CONTINUATION out of place,
PUSH_PROMISE from a client; stream errors (RST_STREAM, the connection still serving) for DATA
after END_STREAM, a stream window overrun and a stream depending on itself; PING answered with
its payload; padded and prioritised frames served; a lowered SETTINGS_HEADER_TABLE_SIZE
acknowledged in the next response's header block; a response header block larger than the
client's frame size split into CONTINUATION frames.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Callable

import hpack
import hyperframe.frame as hf
import pytest

from coxswain_devkit.echo import EchoServer
from coxswain_proxy.dataplane import testing as t
from coxswain_proxy.dataplane.http2 import engine, limits
from coxswain_proxy.dataplane.runtime import Config

GET = [(b":method", b"GET"), (b":scheme", b"http"), (b":path", b"/"), (b":authority", b"a.test")]


class Raw:
    """One client connection speaking frames as the test writes them."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer
        self.encoder = hpack.Encoder()
        self.decoder = hpack.Decoder()
        self.buffer = b""
        self.frames: list[hf.Frame] = []

    def send(self, *frames: hf.Frame | bytes) -> None:
        self.writer.write(b"".join(f if isinstance(f, bytes) else f.serialize() for f in frames))

    def headers(self, stream_id: int, fields: list[tuple[bytes, bytes]], *flags: str) -> hf.Frame:
        return hf.HeadersFrame(
            stream_id, self.encoder.encode(fields), flags={"END_HEADERS", *flags}
        )

    async def until(self, kind: type[hf.Frame], stream_id: int | None = None) -> hf.Frame | None:
        """The first frame of `kind` (on `stream_id`) from here on; None if the connection ends."""
        async with asyncio.timeout(10):
            while True:
                for i, frame in enumerate(self.frames):
                    if isinstance(frame, kind) and stream_id in (None, frame.stream_id):
                        del self.frames[: i + 1]
                        return frame
                self.frames.clear()
                data = await self.reader.read(65536)
                if not data:
                    return None
                self._parse(data)

    def _parse(self, data: bytes) -> None:
        self.buffer += data
        while len(self.buffer) >= 9:
            frame, length = hf.Frame.parse_frame_header(memoryview(self.buffer[:9]))
            if len(self.buffer) < 9 + length:
                return
            frame.parse_body(memoryview(self.buffer[9 : 9 + length]))
            self.buffer = self.buffer[9 + length :]
            if isinstance(frame, hf.SettingsFrame) and "ACK" not in frame.flags:
                self.send(hf.SettingsFrame(0, flags={"ACK"}))
            self.frames.append(frame)

    async def goaway(self) -> int:
        frame = await self.until(hf.GoAwayFrame)
        assert isinstance(frame, hf.GoAwayFrame), "the connection ended without GOAWAY"
        return int(frame.error_code)

    async def reset(self, stream_id: int) -> int:
        frame = await self.until(hf.RstStreamFrame, stream_id)
        assert isinstance(frame, hf.RstStreamFrame)
        return int(frame.error_code)

    async def answer(self, stream_id: int) -> tuple[list[tuple[bytes, bytes]], bytes]:
        """The response's head (HEADERS and any CONTINUATION) and its body."""
        block, body = b"", b""
        async with asyncio.timeout(10):
            while True:
                frame = await self.until(hf.Frame, stream_id)
                assert frame is not None, "the connection ended mid-response"
                if isinstance(frame, (hf.HeadersFrame, hf.ContinuationFrame)):
                    block += frame.data
                elif isinstance(frame, hf.DataFrame):
                    body += frame.data
                elif isinstance(frame, hf.RstStreamFrame):
                    raise AssertionError(f"stream reset: {frame.error_code}")
                if "END_STREAM" in frame.flags:
                    return list(self.decoder.decode(block, raw=True)), body


@contextlib.asynccontextmanager
async def raw_client(
    *, settings: dict[int, int] | None = None, config: Config | None = None
) -> AsyncIterator[Raw]:
    async with EchoServer(pod="a-0") as echo:
        resources: list[t.Resource] = [
            t.HTTP_LISTENER,
            t.endpoints("a", echo.port),
            t.routes("", t.rule("r", t.backend("a"))),
        ]
        async with t.running(resources, config) as plane:
            reader, writer = await asyncio.open_connection("127.0.0.1", t.actual(plane))
            client = Raw(reader, writer)
            client.send(engine.PREFACE, hf.SettingsFrame(0, settings=settings or {}))
            try:
                yield client
            finally:
                writer.close()
                with contextlib.suppress(OSError):
                    await writer.wait_closed()


async def test_a_preface_not_followed_by_settings_is_a_protocol_error() -> None:
    async with (
        EchoServer() as echo,
        t.running([t.HTTP_LISTENER, t.endpoints("a", echo.port)]) as plane,
    ):
        reader, writer = await asyncio.open_connection("127.0.0.1", t.actual(plane))
        client = Raw(reader, writer)
        client.send(engine.PREFACE, hf.PingFrame(0, b"12345678"))
        assert await client.goaway() == limits.PROTOCOL_ERROR
        writer.close()


@pytest.mark.parametrize(
    ("frames", "code"),
    [
        pytest.param(lambda c: [hf.DataFrame(1, b"x")], limits.PROTOCOL_ERROR, id="data-idle"),
        pytest.param(
            lambda c: [c.headers(2, GET, "END_STREAM")], limits.PROTOCOL_ERROR, id="even-id"
        ),
        pytest.param(
            lambda c: [c.headers(5, GET, "END_STREAM"), c.headers(3, GET, "END_STREAM")],
            limits.PROTOCOL_ERROR,
            id="lower-id",
        ),
        pytest.param(
            lambda c: [hf.DataFrame(1, b"x" * 20_000)], limits.FRAME_SIZE_ERROR, id="frame-too-big"
        ),
        pytest.param(lambda c: [hf.WindowUpdateFrame(0, 0)], limits.PROTOCOL_ERROR, id="window-0"),
        pytest.param(
            lambda c: [hf.WindowUpdateFrame(0, (1 << 31) - 1)],
            limits.FLOW_CONTROL_ERROR,
            id="window-overflow",
        ),
        pytest.param(
            lambda c: [hf.HeadersFrame(1, b"\xbe", flags={"END_HEADERS", "END_STREAM"})],
            limits.COMPRESSION_ERROR,
            id="hpack-index-nowhere",
        ),
        pytest.param(
            lambda c: [hf.ContinuationFrame(1, b"\x82", flags={"END_HEADERS"})],
            limits.PROTOCOL_ERROR,
            id="continuation-alone",
        ),
        pytest.param(
            lambda c: [hf.HeadersFrame(1, b"\x82"), hf.PingFrame(0, b"12345678")],
            limits.PROTOCOL_ERROR,
            id="block-interrupted",
        ),
        pytest.param(
            lambda c: [
                hf.PushPromiseFrame(1, promised_stream_id=2, data=b"\x82", flags={"END_HEADERS"})
            ],
            limits.PROTOCOL_ERROR,
            id="push-promise",
        ),
    ],
)
async def test_connection_errors_end_with_goaway_naming_the_rfcs_code(
    frames: Callable[[Raw], list[hf.Frame]], code: int
) -> None:
    async with raw_client() as client:
        client.send(*frames(client))
        assert await client.goaway() == code


async def test_data_after_end_stream_resets_only_that_stream() -> None:
    async with raw_client() as client:
        client.send(client.headers(1, GET, "END_STREAM"), hf.DataFrame(1, b"late"))
        assert await client.reset(1) == limits.STREAM_CLOSED
        client.send(client.headers(3, GET, "END_STREAM"))
        head, _ = await client.answer(3)
    assert dict(head)[b":status"] == b"200"


async def test_a_stream_window_overrun_is_a_flow_control_error_on_that_stream() -> None:
    # A 16 KiB window, in force once the client has acknowledged it; two full frames in one
    # write, so the second arrives before any WINDOW_UPDATE for the first can have.
    post = [(b":method", b"POST"), *GET[1:]]
    async with raw_client(config=Config(h2=limits.H2Limits(initial_window=16_384))) as client:
        await client.until(hf.SettingsFrame)  # acknowledged as it is read
        client.send(client.headers(1, post), hf.DataFrame(1, b"x" * 16_384).serialize() * 2)
        assert await client.reset(1) == limits.FLOW_CONTROL_ERROR
        client.send(client.headers(3, GET, "END_STREAM"))
        head, _ = await client.answer(3)
    assert dict(head)[b":status"] == b"200"


async def test_a_stream_depending_on_itself_is_reset() -> None:
    async with raw_client() as client:
        client.send(client.headers(1, GET), hf.PriorityFrame(1, depends_on=1))
        assert await client.reset(1) == limits.PROTOCOL_ERROR
        client.send(hf.PriorityFrame(5, depends_on=5))  # an idle stream
        assert await client.reset(5) == limits.PROTOCOL_ERROR
        client.send(client.headers(7, GET, "END_STREAM"))  # and the connection goes on
        head, _ = await client.answer(7)
    assert dict(head)[b":status"] == b"200"


async def test_ping_is_answered_with_its_payload() -> None:
    async with raw_client() as client:
        client.send(hf.PingFrame(0, b"abcdefgh"))
        pong = await client.until(hf.PingFrame)
    assert (
        isinstance(pong, hf.PingFrame) and "ACK" in pong.flags and pong.opaque_data == b"abcdefgh"
    )


async def test_padded_and_prioritised_frames_are_served() -> None:
    # The padding is not body: were it counted, the body would not match its content-length.
    post = [(b":method", b"POST"), *GET[1:], (b"content-length", b"11")]
    async with raw_client() as client:
        block = client.encoder.encode(post)
        client.send(
            hf.HeadersFrame(
                1,
                block,
                pad_length=7,
                depends_on=0,
                stream_weight=200,
                flags={"END_HEADERS", "PADDED", "PRIORITY"},
            ),
            hf.DataFrame(1, b"hello ", pad_length=10, flags={"PADDED"}),
            hf.DataFrame(1, b"world", flags={"END_STREAM"}),
        )
        head, body = await client.answer(1)
    assert dict(head)[b":status"] == b"200"
    assert json.loads(body)["headers"]["Content-Length"] == ["11"]


async def test_a_lowered_header_table_size_is_acknowledged_in_the_next_block() -> None:
    async with raw_client(settings={hf.SettingsFrame.HEADER_TABLE_SIZE: 0}) as client:
        await client.until(hf.SettingsFrame)  # the proxy's own SETTINGS; its ACK of ours follows
        client.send(client.headers(1, GET, "END_STREAM"))
        frame = await client.until(hf.HeadersFrame, 1)
    assert isinstance(frame, hf.HeadersFrame) and frame.data[0] == 0x20  # size update to 0


async def test_a_response_head_past_the_frame_size_goes_on_in_continuation_frames() -> None:
    wanted = [(b"x-echo-set-header", b"X-Big-%d: %s" % (i, b"v" * 1000)) for i in range(20)]
    async with raw_client() as client:
        block = client.encoder.encode([*GET, *wanted])  # ~21 KB: HEADERS and a CONTINUATION
        client.send(
            hf.HeadersFrame(1, block[:10_000], flags={"END_STREAM"}),
            hf.ContinuationFrame(1, block[10_000:], flags={"END_HEADERS"}),
        )
        first = await client.until(hf.HeadersFrame, 1)
        assert isinstance(first, hf.HeadersFrame) and "END_HEADERS" not in first.flags
        block = first.data
        while True:
            more = await client.until(hf.ContinuationFrame, 1)
            assert isinstance(more, hf.ContinuationFrame)
            block += more.data
            if "END_HEADERS" in more.flags:
                break
    head = dict(client.decoder.decode(block, raw=True))
    assert head[b":status"] == b"200"
    assert head[b"x-big-19"] == b"v" * 1000
