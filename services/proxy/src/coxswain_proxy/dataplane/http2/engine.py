"""The server side of the HTTP/2 protocol (RFC 9113): frames, stream states, flow control.

Where it sits: `server.H2ServerConnection` owns one `Engine` and implements `EngineEvents` for
it. `receive` parses what the client sent and calls the sink once per thing that happened (a
request, DATA, an end, a reset, a window opening), with the engine's own state already updated;
the `send_*` calls append frames to `out`, which the connection writes. What to do with a
request, and every bound on what a client may make the proxy do (`limits`), is the connection's;
what the protocol itself requires of a frame is here, each rule quoted where it is enforced.

It replaced the `h2` library on this side (the upstream h2c client still uses it): the library
made an object per frame and per event, walked a state machine of several calls per frame and
coded HPACK per field in Python, over half of a proxied HTTP/2 request (docs/performance.md).

Errors: a connection error raises `ConnectionFailure` out of `receive` (the connection sends
GOAWAY with its code and closes); a stream error sends RST_STREAM at once and tells the sink
the stream is gone (`on_reset`), as if the client had reset it.
"""

from __future__ import annotations

import struct
from typing import Protocol

from coxswain_proxy.dataplane.http2 import compression, limits

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

# Frame types (RFC 9113 §6) and flags.
DATA, HEADERS, PRIORITY, RST_STREAM, SETTINGS, PUSH_PROMISE, PING, GOAWAY, WINDOW_UPDATE = range(9)
CONTINUATION = 0x9
END_STREAM, ACK, END_HEADERS, PADDED, PRIORITY_FLAG = 0x1, 0x1, 0x4, 0x8, 0x20

# SETTINGS identifiers (RFC 9113 §6.5.2).
HEADER_TABLE_SIZE, ENABLE_PUSH, MAX_CONCURRENT_STREAMS = 0x1, 0x2, 0x3
INITIAL_WINDOW_SIZE, MAX_FRAME_SIZE, MAX_HEADER_LIST_SIZE = 0x4, 0x5, 0x6

DEFAULT_WINDOW = 65_535
MAX_WINDOW = (1 << 31) - 1
DEFAULT_FRAME_SIZE = 16_384
MAX_FRAME_LIMIT = (1 << 24) - 1
# A header block may span this many CONTINUATION frames (a CONTINUATION flood, CVE-2024-27316,
# otherwise buffers without end), and at most this many bytes per byte of the header list bound.
MAX_CONTINUATIONS = 64
BLOCK_PER_LIST_BYTE = 4

# Why a stream id that is no longer open is closed, for what a late frame on it means.
_RESET_BY_US, _RESET_BY_PEER, _ENDED = 1, 2, 3
# Closed streams remembered (between this and twice this); older ones count as reset by us.
_CLOSED_KEPT = 256  # a dict of 512 ids is 18 KB per connection at most

_FRAME = struct.Struct(">BHBBL")  # length (24 bits, as 8 + 16), type, flags, stream id
_pack_frame = _FRAME.pack
_unpack_frame = _FRAME.unpack_from
_U32 = struct.Struct(">L")
_SETTING = struct.Struct(">HL")


class ConnectionFailure(Exception):
    """A connection error (RFC 9113 §5.4.1): GOAWAY with `code`, then close."""

    def __init__(self, code: int, reason: str) -> None:
        super().__init__(reason)
        self.code = code


class StreamGone(Exception):
    """The stream cannot take this frame any more (it ended or was reset)."""


class EngineEvents(Protocol):
    """What the engine tells its connection, one call per thing that happened."""

    closed: bool

    def on_request(
        self, stream_id: int, fields: list[tuple[bytes, bytes]], ended: bool
    ) -> None: ...

    def on_data(self, stream_id: int, data: bytes, flow_size: int) -> None: ...

    def on_end(self, stream_id: int) -> None: ...

    def on_trailers(self, stream_id: int, fields: list[tuple[bytes, bytes]]) -> None: ...

    def on_window(self, stream_id: int) -> None:
        """A window opened: the stream's, or with 0 the connection's (and so every stream's)."""

    def on_reset(self, stream_id: int) -> None:
        """The stream is gone: the client reset it, or broke the protocol on it."""

    def on_control(self) -> None:
        """A SETTINGS, PING or PRIORITY frame arrived (each costs work; the sink counts them)."""

    def on_goaway(self) -> None: ...


def _frame(kind: int, flags: int, stream_id: int, payload: bytes = b"") -> bytes:
    size = len(payload)
    return _pack_frame(size >> 16, size & 0xFFFF, kind, flags, stream_id) + payload


class _StreamState:
    __slots__ = ("remote_open", "local_open", "send_window", "recv_window", "processed")

    def __init__(self, send_window: int, recv_window: int, ended: bool) -> None:
        self.remote_open = not ended  # the client may still send DATA or trailers
        self.local_open = True  # the proxy may still send
        self.send_window = send_window  # what the client lets the proxy send on it
        self.recv_window = recv_window  # what the proxy lets the client send on it
        self.processed = 0  # request bytes taken but not yet given back by WINDOW_UPDATE


class Engine:
    __slots__ = (
        "sink", "out", "buffer", "preface", "settled", "streams", "closed", "highest",
        "decoder", "encoder", "block", "block_id", "block_end", "block_depends", "block_frames",
        "block_limit",
        "send_window", "recv_window", "processed", "stream_window", "local_window",
        "frame_size", "peer_initial", "advertised", "credits", "tail_stream", "tail_at",
    )  # fmt: skip

    def __init__(
        self, sink: EngineEvents, *, max_concurrent: int, initial_window: int, max_header_list: int
    ) -> None:
        self.sink = sink
        self.out = bytearray()  # frames not yet written
        self.buffer = b""  # the start of a frame not yet whole
        self.preface = False  # the client's connection preface has been read
        self.settled = False  # its first frame (which must be SETTINGS) has been read
        self.streams: dict[int, _StreamState] = {}
        self.closed: dict[int, int] = {}  # stream id -> why (_RESET_BY_US, ...), the newest
        self.highest = 0  # the highest stream id the client has opened
        self.decoder = compression.Decoder(max_header_list)
        self.encoder = compression.Encoder()
        self.block = bytearray()  # a header block whose CONTINUATIONs are still coming
        self.block_id = 0  # its stream (0: none coming)
        self.block_end = False  # its HEADERS frame had END_STREAM
        self.block_depends = 0  # the stream its HEADERS frame said it depends on
        self.block_frames = 0
        self.block_limit = max_header_list * BLOCK_PER_LIST_BYTE + DEFAULT_FRAME_SIZE
        self.send_window = DEFAULT_WINDOW  # the client's connection window for the proxy
        self.recv_window = DEFAULT_WINDOW  # the proxy's connection window for the client
        self.processed = 0
        # A stream's receive window: the default until the client acknowledges the proxy's
        # SETTINGS (§6.5.3: the values apply from the ACK), then SETTINGS_INITIAL_WINDOW_SIZE.
        self.stream_window = DEFAULT_WINDOW
        self.advertised: int | None = initial_window
        # Window given back but not yet written: the client cannot have used it, so a frame
        # that arrives before the WINDOW_UPDATE is flushed is still held to the old window.
        self.credits: list[tuple[_StreamState | None, int]] = []
        # The last DATA frame in `out` (its stream, and where its header starts): a stream that
        # ends before it is written ends on that frame, not on an empty DATA frame of its own.
        self.tail_stream = 0
        self.tail_at = 0
        self.local_window = DEFAULT_WINDOW  # the connection window the proxy keeps open
        self.frame_size = DEFAULT_FRAME_SIZE  # the client's SETTINGS_MAX_FRAME_SIZE
        self.peer_initial = DEFAULT_WINDOW  # the client's SETTINGS_INITIAL_WINDOW_SIZE
        settings = b"".join(
            _SETTING.pack(key, value)
            for key, value in (
                (MAX_CONCURRENT_STREAMS, max_concurrent),
                (INITIAL_WINDOW_SIZE, initial_window),
                (MAX_HEADER_LIST_SIZE, max_header_list),
                (ENABLE_PUSH, 0),
            )
        )
        self.out += _frame(SETTINGS, 0, 0, settings)

    # ------------------------------------------------------------------ what the proxy sends

    def open_connection_window(self, size: int) -> None:
        """RFC 9113 §6.9.2: only WINDOW_UPDATE changes the connection window, from 65,535."""
        self.recv_window += size
        self.local_window += size
        self.out += _frame(WINDOW_UPDATE, 0, 0, _U32.pack(size))

    def data_to_send(self) -> bytes:
        out = self.out
        if not out:
            return b""
        if self.credits:
            for stream, size in self.credits:
                if stream is None:
                    self.recv_window += size
                else:
                    stream.recv_window += size
            self.credits.clear()
        data = bytes(out)
        out.clear()
        self.tail_stream = 0
        return data

    def window(self, stream_id: int) -> int:
        """How much DATA the proxy may send on the stream now."""
        stream = self.streams.get(stream_id)
        if stream is None or not stream.local_open:
            raise StreamGone(stream_id)
        return min(stream.send_window, self.send_window)

    def send_headers(self, stream_id: int, fields: list[tuple[bytes, bytes]], end: bool) -> None:
        stream = self.streams.get(stream_id)
        if stream is None or not stream.local_open:
            raise StreamGone(stream_id)
        block = self.encoder.encode(fields)
        flags = END_STREAM if end else 0
        size, out = self.frame_size, self.out
        if len(block) <= size:
            out += _pack_frame(len(block) >> 16, len(block) & 0xFFFF, HEADERS,
                               flags | END_HEADERS, stream_id)  # fmt: skip
            out += block
        else:
            kind, pos = HEADERS, 0
            while pos < len(block):
                piece = block[pos : pos + size]
                pos += size
                last = END_HEADERS if pos >= len(block) else 0
                out += _frame(kind, flags | last, stream_id, piece)
                kind, flags = CONTINUATION, 0
        if end:
            self._local_end(stream_id, stream)

    def send_data(self, stream_id: int, data: bytes, end: bool = False) -> None:
        """DATA within the windows (the caller asked `window` first) and the frame size."""
        stream = self.streams.get(stream_id)
        if stream is None or not stream.local_open:
            raise StreamGone(stream_id)
        size = len(data)
        stream.send_window -= size
        self.send_window -= size
        out = self.out
        if end:
            self.tail_stream = 0
        else:
            self.tail_stream, self.tail_at = stream_id, len(out)
        out += _pack_frame(size >> 16, size & 0xFFFF, DATA, END_STREAM if end else 0, stream_id)
        out += data
        if end:
            self._local_end(stream_id, stream)

    def end_stream(self, stream_id: int) -> None:
        if stream_id == self.tail_stream:
            stream = self.streams.get(stream_id)
            if stream is not None and stream.local_open:
                # Its last DATA frame is still unwritten: END_STREAM goes on it (the flags
                # byte, after the 3-byte length and the type), one frame fewer per response.
                self.out[self.tail_at + 4] |= END_STREAM
                self.tail_stream = 0
                self._local_end(stream_id, stream)
                return
        self.send_data(stream_id, b"", True)

    def reset_stream(self, stream_id: int, code: int) -> None:
        if self.streams.pop(stream_id, None) is None:
            raise StreamGone(stream_id)
        self._closed(stream_id, _RESET_BY_US)
        self.out += _frame(RST_STREAM, 0, stream_id, _U32.pack(code))

    def acknowledge(self, stream_id: int, size: int) -> None:
        """The sink has taken `size` flow-controlled bytes: give them back to the client's windows,
        once half a window's worth has gathered (or the window is nearly shut), so that a body of
        small frames does not cost a WINDOW_UPDATE each."""
        self.processed += size
        update = _give_back(self.recv_window, self.processed, self.local_window)
        if update:
            self.processed = 0
            self.credits.append((None, update))
            self.out += _frame(WINDOW_UPDATE, 0, 0, _U32.pack(update))
        stream = self.streams.get(stream_id)
        if stream is None or not stream.remote_open:
            return  # no more DATA is coming on it: its window does not matter
        stream.processed += size
        update = _give_back(stream.recv_window, stream.processed, self.stream_window)
        if update:
            stream.processed = 0
            self.credits.append((stream, update))
            self.out += _frame(WINDOW_UPDATE, 0, stream_id, _U32.pack(update))

    def goaway(self, code: int) -> None:
        """GOAWAY naming the last stream the proxy will answer (RFC 9113 §6.8)."""
        self.out += _frame(GOAWAY, 0, 0, _U32.pack(self.highest) + _U32.pack(code))

    def _local_end(self, stream_id: int, stream: _StreamState) -> None:
        stream.local_open = False
        if not stream.remote_open:
            del self.streams[stream_id]
            self._closed(stream_id, _ENDED)

    def _closed(self, stream_id: int, why: int) -> None:
        closed = self.closed
        closed[stream_id] = why
        if len(closed) > 2 * _CLOSED_KEPT:
            # Cut back to the newest in one go: deleting the oldest one at a time made every
            # `next(iter(...))` step over the deleted slots at the front (6 µs per request).
            self.closed = dict(list(closed.items())[-_CLOSED_KEPT:])

    # ------------------------------------------------------------------ what the client sent

    def receive(self, data: bytes) -> None:
        """Every whole frame in what has arrived, in order; the rest waits for more."""
        if self.buffer:
            data = self.buffer + data
            self.buffer = b""
        pos = 0
        if not self.preface:
            if len(data) < len(PREFACE):
                if not PREFACE.startswith(data):
                    raise ConnectionFailure(limits.PROTOCOL_ERROR, "no connection preface")
                self.buffer = data
                return
            if not data.startswith(PREFACE):
                raise ConnectionFailure(limits.PROTOCOL_ERROR, "no connection preface")
            self.preface = True
            pos = len(PREFACE)
        end = len(data)
        sink = self.sink
        while end - pos >= 9:
            high, low, kind, flags, stream_id = _unpack_frame(data, pos)
            size = (high << 16) | low
            if size > DEFAULT_FRAME_SIZE:
                # §4.2: beyond SETTINGS_MAX_FRAME_SIZE (the proxy keeps the default).
                raise ConnectionFailure(limits.FRAME_SIZE_ERROR, f"frame of {size} bytes")
            start = pos + 9
            if end - start < size:
                break
            pos = start + size
            payload = data[start:pos]
            stream_id &= 0x7FFFFFFF
            if self.block_id and kind != CONTINUATION:
                raise ConnectionFailure(limits.PROTOCOL_ERROR, "a header block left unfinished")
            if not self.settled:
                if kind != SETTINGS or flags & ACK:
                    # §3.4: the client's preface "MUST be followed by a SETTINGS frame".
                    raise ConnectionFailure(limits.PROTOCOL_ERROR, "preface without SETTINGS")
                self.settled = True
            if kind == DATA:
                self._data(stream_id, flags, payload, size)
            elif kind == HEADERS:
                self._headers(stream_id, flags, payload)
            elif kind == CONTINUATION:
                self._continuation(stream_id, flags, payload)
            elif kind == WINDOW_UPDATE:
                self._window_update(stream_id, payload)
            elif kind == RST_STREAM:
                self._rst_stream(stream_id, payload)
            elif kind == SETTINGS:
                self._settings(stream_id, flags, payload)
            elif kind == PING:
                self._ping(stream_id, flags, payload)
            elif kind == PRIORITY:
                self._priority(stream_id, payload)
            elif kind == GOAWAY:
                if stream_id:
                    raise ConnectionFailure(limits.PROTOCOL_ERROR, "GOAWAY on a stream")
                if size < 8:
                    raise ConnectionFailure(limits.FRAME_SIZE_ERROR, "GOAWAY shorter than 8")
                sink.on_goaway()
            elif kind == PUSH_PROMISE:
                # §8.4: "A client cannot push"; ENABLE_PUSH 0 makes it a PROTOCOL_ERROR.
                raise ConnectionFailure(limits.PROTOCOL_ERROR, "PUSH_PROMISE from a client")
            # §5.5: "Implementations MUST ignore unknown or unsupported values ... frame types".
            if sink.closed:
                return
        if pos < end:
            self.buffer = data[pos:]

    def _stream_error(self, stream_id: int, code: int) -> None:
        """§5.4.2: RST_STREAM with `code`; the stream is gone for the sink as well."""
        known = self.streams.pop(stream_id, None) is not None
        self._closed(stream_id, _RESET_BY_US)
        self.out += _frame(RST_STREAM, 0, stream_id, _U32.pack(code))
        if known:
            self.sink.on_reset(stream_id)

    def _late(self, stream_id: int, what: str) -> None:
        """A frame on a stream that is not open. §5.1, "closed": after the proxy's RST_STREAM
        it "MUST ignore frames that it receives on closed streams"; after the client's, it is a
        stream error STREAM_CLOSED; after both ends, a connection error STREAM_CLOSED. An id
        above every one opened is idle: a connection error PROTOCOL_ERROR (§5.1, "idle")."""
        if stream_id > self.highest:
            raise ConnectionFailure(limits.PROTOCOL_ERROR, f"{what} on idle stream {stream_id}")
        why = self.closed.get(stream_id, _RESET_BY_US)
        if why == _ENDED:
            raise ConnectionFailure(limits.STREAM_CLOSED, f"{what} on closed stream {stream_id}")
        if why == _RESET_BY_PEER:
            self._stream_error(stream_id, limits.STREAM_CLOSED)

    def _data(self, stream_id: int, flags: int, payload: bytes, size: int) -> None:
        if not stream_id:
            raise ConnectionFailure(limits.PROTOCOL_ERROR, "DATA on stream 0")
        # §6.9: the whole payload, padding included, counts against both windows.
        self.recv_window -= size
        if self.recv_window < 0:
            raise ConnectionFailure(limits.FLOW_CONTROL_ERROR, "DATA past the connection window")
        if flags & PADDED:
            payload = _unpad(payload)
        stream = self.streams.get(stream_id)
        if stream is None or not stream.remote_open:
            self.acknowledge(stream_id, size)  # nobody will take it: the connection's window
            if stream is None:
                self._late(stream_id, "DATA")
            else:
                # §5.1, "half-closed (remote)": frames other than WINDOW_UPDATE, PRIORITY and
                # RST_STREAM are a stream error STREAM_CLOSED.
                self._stream_error(stream_id, limits.STREAM_CLOSED)
            return
        stream.recv_window -= size
        if stream.recv_window < 0:
            self._stream_error(stream_id, limits.FLOW_CONTROL_ERROR)
            self.acknowledge(stream_id, size)  # the connection's share only: the stream is gone
            return
        ended = flags & END_STREAM
        if ended:
            stream.remote_open = False
            if not stream.local_open:
                del self.streams[stream_id]
                self._closed(stream_id, _ENDED)
        sink = self.sink
        sink.on_data(stream_id, payload, size)
        if ended and not sink.closed:
            sink.on_end(stream_id)

    def _headers(self, stream_id: int, flags: int, payload: bytes) -> None:
        if not stream_id:
            raise ConnectionFailure(limits.PROTOCOL_ERROR, "HEADERS on stream 0")
        if flags & PADDED:
            payload = _unpad(payload)
        depends = 0
        if flags & PRIORITY_FLAG:
            if len(payload) < 5:
                raise ConnectionFailure(limits.FRAME_SIZE_ERROR, "HEADERS priority cut short")
            depends = _U32.unpack_from(payload)[0] & 0x7FFFFFFF
            payload = payload[5:]
        if flags & END_HEADERS:
            self._block(stream_id, payload, flags & END_STREAM != 0, depends)
            return
        self.block_id, self.block_end, self.block_frames = stream_id, flags & END_STREAM != 0, 0
        self.block_depends = depends
        self.block[:] = payload

    def _continuation(self, stream_id: int, flags: int, payload: bytes) -> None:
        if not self.block_id or stream_id != self.block_id:
            # §6.10: a CONTINUATION not following HEADERS or CONTINUATION on its own stream.
            raise ConnectionFailure(limits.PROTOCOL_ERROR, "CONTINUATION out of place")
        self.block_frames += 1
        self.block += payload
        if self.block_frames > MAX_CONTINUATIONS or len(self.block) > self.block_limit:
            raise ConnectionFailure(limits.ENHANCE_YOUR_CALM, "header block too long")
        if flags & END_HEADERS:
            block, self.block_id = bytes(self.block), 0
            self.block.clear()
            self._block(stream_id, block, self.block_end, self.block_depends)

    def _block(self, stream_id: int, block: bytes, ended: bool, depends: int) -> None:
        # Decoded before anything else is decided: the client's encoder has already changed
        # the dynamic table, and the proxy's must follow it even for a stream it refuses.
        try:
            fields = self.decoder.decode(block)
        except (compression.CompressionError, compression.HeaderListTooLarge) as exc:
            raise ConnectionFailure(exc.code, str(exc)) from exc
        stream = self.streams.get(stream_id)
        if stream is not None:
            if not stream.remote_open:
                self._stream_error(stream_id, limits.STREAM_CLOSED)
            elif not ended:
                # §8.1: trailers are the last HEADERS and "MUST" carry END_STREAM; a second
                # HEADERS without it is malformed (§8.1.1), a stream error PROTOCOL_ERROR.
                self._stream_error(stream_id, limits.PROTOCOL_ERROR)
            else:
                stream.remote_open = False
                if not stream.local_open:
                    del self.streams[stream_id]
                    self._closed(stream_id, _ENDED)
                sink = self.sink
                sink.on_trailers(stream_id, fields)
                if not sink.closed:
                    sink.on_end(stream_id)
            return
        if stream_id <= self.highest:
            if stream_id not in self.closed:
                # §5.1.1: a new stream's id "MUST be numerically greater than all streams that
                # the initiating endpoint has opened".
                raise ConnectionFailure(limits.PROTOCOL_ERROR, f"stream {stream_id} reused")
            self._late(stream_id, "HEADERS")
            return
        if not stream_id & 1:
            # §5.1.1: "Streams initiated by a client MUST use odd-numbered stream identifiers".
            raise ConnectionFailure(limits.PROTOCOL_ERROR, f"even stream id {stream_id}")
        self.highest = stream_id
        self.streams[stream_id] = _StreamState(self.peer_initial, self.stream_window, ended)
        if depends == stream_id:
            # §5.3.1: "A stream cannot depend on itself": a stream error PROTOCOL_ERROR.
            self._stream_error(stream_id, limits.PROTOCOL_ERROR)
            return
        self.sink.on_request(stream_id, fields, ended)

    def _window_update(self, stream_id: int, payload: bytes) -> None:
        if len(payload) != 4:
            raise ConnectionFailure(limits.FRAME_SIZE_ERROR, "WINDOW_UPDATE not 4 bytes")
        increment = _U32.unpack(payload)[0] & 0x7FFFFFFF
        if not stream_id:
            if not increment:
                raise ConnectionFailure(limits.PROTOCOL_ERROR, "WINDOW_UPDATE of 0")
            self.send_window += increment
            if self.send_window > MAX_WINDOW:
                # §6.9.1: a window past 2^31-1 is a FLOW_CONTROL_ERROR.
                raise ConnectionFailure(limits.FLOW_CONTROL_ERROR, "connection window overflow")
            self.sink.on_window(0)
            return
        stream = self.streams.get(stream_id)
        if stream is None:
            if stream_id > self.highest:
                raise ConnectionFailure(limits.PROTOCOL_ERROR, "WINDOW_UPDATE on an idle stream")
            return  # §5.1: WINDOW_UPDATE may arrive shortly after a stream closes
        if not increment:
            self._stream_error(stream_id, limits.PROTOCOL_ERROR)
            return
        stream.send_window += increment
        if stream.send_window > MAX_WINDOW:
            self._stream_error(stream_id, limits.FLOW_CONTROL_ERROR)
            return
        self.sink.on_window(stream_id)

    def _rst_stream(self, stream_id: int, payload: bytes) -> None:
        if len(payload) != 4:
            raise ConnectionFailure(limits.FRAME_SIZE_ERROR, "RST_STREAM not 4 bytes")
        if not stream_id or stream_id > self.highest:
            # §6.4: on stream 0, or on an idle stream, a connection error PROTOCOL_ERROR.
            raise ConnectionFailure(limits.PROTOCOL_ERROR, f"RST_STREAM on stream {stream_id}")
        if self.streams.pop(stream_id, None) is None:
            return
        self._closed(stream_id, _RESET_BY_PEER)
        self.sink.on_reset(stream_id)

    def _settings(self, stream_id: int, flags: int, payload: bytes) -> None:
        if stream_id:
            raise ConnectionFailure(limits.PROTOCOL_ERROR, "SETTINGS on a stream")
        if flags & ACK:
            if payload:
                raise ConnectionFailure(limits.FRAME_SIZE_ERROR, "SETTINGS ACK with a payload")
            if self.advertised is not None:
                # §6.9.2: a new initial window changes every open stream's by the difference.
                delta, self.stream_window = self.advertised - self.stream_window, self.advertised
                self.advertised = None
                for stream in self.streams.values():
                    stream.recv_window += delta
            return
        if len(payload) % 6:
            raise ConnectionFailure(limits.FRAME_SIZE_ERROR, "SETTINGS not a multiple of 6")
        for offset in range(0, len(payload), 6):
            key, value = _SETTING.unpack_from(payload, offset)
            if key == INITIAL_WINDOW_SIZE:
                if value > MAX_WINDOW:
                    raise ConnectionFailure(limits.FLOW_CONTROL_ERROR, "initial window too big")
                # §6.9.2: the change applies to every open stream's window, by the difference.
                delta, self.peer_initial = value - self.peer_initial, value
                for stream in self.streams.values():
                    stream.send_window += delta
                    if stream.send_window > MAX_WINDOW:
                        raise ConnectionFailure(limits.FLOW_CONTROL_ERROR, "window overflow")
            elif key == MAX_FRAME_SIZE:
                if not DEFAULT_FRAME_SIZE <= value <= MAX_FRAME_LIMIT:
                    raise ConnectionFailure(limits.PROTOCOL_ERROR, "bad SETTINGS_MAX_FRAME_SIZE")
                self.frame_size = value
            elif key == ENABLE_PUSH:
                if value > 1:
                    raise ConnectionFailure(limits.PROTOCOL_ERROR, "bad SETTINGS_ENABLE_PUSH")
            elif key == HEADER_TABLE_SIZE:
                self.encoder.peer_table_size(value)
            # MAX_CONCURRENT_STREAMS bounds pushes (the proxy makes none); MAX_HEADER_LIST_SIZE
            # is advisory; unknown settings "MUST" be ignored (§6.5.2).
        self.out += _frame(SETTINGS, ACK, 0)
        sink = self.sink
        sink.on_control()
        if not sink.closed:
            sink.on_window(0)  # a larger initial window may let waiting streams send

    def _ping(self, stream_id: int, flags: int, payload: bytes) -> None:
        if len(payload) != 8:
            raise ConnectionFailure(limits.FRAME_SIZE_ERROR, "PING not 8 bytes")
        if stream_id:
            raise ConnectionFailure(limits.PROTOCOL_ERROR, "PING on a stream")
        if not flags & ACK:  # an ACK answers a PING the proxy never sends: nothing to do
            self.out += _frame(PING, ACK, 0, payload)
            self.sink.on_control()

    def _priority(self, stream_id: int, payload: bytes) -> None:
        if not stream_id:
            raise ConnectionFailure(limits.PROTOCOL_ERROR, "PRIORITY on stream 0")
        if len(payload) != 5:
            self._stream_error(stream_id, limits.FRAME_SIZE_ERROR)  # §6.3: a stream error
            return
        if _U32.unpack_from(payload)[0] & 0x7FFFFFFF == stream_id:
            self._stream_error(stream_id, limits.PROTOCOL_ERROR)  # §5.3.1, open or idle alike
            return
        self.sink.on_control()


def _unpad(payload: bytes) -> bytes:
    """§6.1, §6.2: the payload less its Pad Length byte and padding; padding as long as the
    payload or longer is a connection error PROTOCOL_ERROR."""
    if not payload or payload[0] >= len(payload):
        raise ConnectionFailure(limits.PROTOCOL_ERROR, "padding exceeds the payload")
    return payload[1 : len(payload) - payload[0]]


def _give_back(window: int, processed: int, full: int) -> int:
    """The WINDOW_UPDATE to send, or 0: one once half the full window has been taken, or, when
    the window is shut, once 1 KiB (a quarter of a small window) has, so that a stream never
    stalls on bytes the proxy has already taken."""
    if processed >= full // 2 or (window <= 0 and processed >= min(1024, full // 4)):
        return processed
    return 0
