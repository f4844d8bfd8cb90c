"""The server side of one HTTP/2 connection: its streams and its bounds, over `engine`.

Where it sits: `negotiate` hands a client connection here once it speaks HTTP/2. Each request
stream becomes a `h2stream.H2Stream` and a `h2stream.StreamCycle` started through
`http.dispatch`, exactly as `http.http11` starts its cycles; the frames the streams produce
gather in the engine and go out in one write per event-loop batch (`flush_soon`, through the
worker's `Outbox`): a client read, and every upstream response that reached the connection's
streams in the batch. To the runtime it is a `runtime.Sweepable`: swept every second (stalled
windows, slow bodies, idle), shut down with GOAWAY and a drain.

The bounds (`limits`), each quoted where it is enforced: concurrent streams, rapid reset,
control-frame floods, stalled windows; header list size and CONTINUATION floods are bounded
as the engine decodes (`engine.MAX_CONTINUATIONS`, `compression.Decoder`).
"""

from __future__ import annotations

import asyncio
from typing import cast

from coxswain_proxy.dataplane import stats
from coxswain_proxy.dataplane.http import dispatch, flow, heads
from coxswain_proxy.dataplane.http2 import limits, validate
from coxswain_proxy.dataplane.http2.engine import ConnectionFailure, Engine, StreamGone
from coxswain_proxy.dataplane.http2.h2stream import H2Stream, StreamCycle
from coxswain_proxy.dataplane.peercert import ClientPeer
from coxswain_proxy.dataplane.runtime import Runtime

# The connection-level receive window (RFC 9113 §6.9.2: only WINDOW_UPDATE changes it, from
# 65,535): room for several streams' bodies at once, each bounded by its own window.
CONNECTION_WINDOW = 4 * 1024 * 1024


class H2ServerConnection(asyncio.Protocol):
    __slots__ = (
        "rt", "port", "scheme", "sni", "verified", "forwarded", "transport", "h2", "streams",
        "closed", "write_paused", "flush_due", "going_away", "drain", "last_active", "resets",
        "control", "limits",
    )  # fmt: skip

    def __init__(
        self,
        rt: Runtime,
        port: int,
        scheme: str,
        sni: tuple[str, tuple[str, ...]] | None,
        verified: ClientPeer | None = None,
    ) -> None:
        self.rt = rt
        self.port = port
        self.scheme = scheme
        self.sni = sni
        self.verified = verified  # the store its handshake verified its client under
        self.forwarded = b""
        self.transport: asyncio.Transport | None = None
        config, bounds = rt.config, rt.config.h2
        self.h2 = Engine(
            self,
            max_concurrent=bounds.max_concurrent_streams,
            initial_window=bounds.initial_window,
            # HPACK bombs: the decoded header list is bounded, not only its encoding.
            max_header_list=config.max_header_bytes,
        )
        self.streams: dict[int, H2Stream] = {}
        self.closed = False
        self.write_paused = False
        self.flush_due = False  # the outbox will call `flush` at the batch's end
        self.going_away = False  # GOAWAY sent: no new streams, close when the last one ends
        self.drain = False  # its listener was removed (`listeners`)
        self.last_active = rt.loop.time()
        self.limits = bounds
        self.resets = limits.Flood(bounds.max_resets, bounds.window_seconds)
        self.control = limits.Flood(bounds.max_control_frames, bounds.window_seconds)

    # ------------------------------------------------------------------ connection lifetime

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)
        flow.limit_writes(self.transport)
        peer = transport.get_extra_info("peername")
        self.forwarded = heads.forwarded_tail(peer[0] if peer else "", self.scheme)
        self.h2.open_connection_window(CONNECTION_WINDOW - 65535)
        self.rt.connections.add(self)
        self.rt.stats.connections += 1
        self.flush()

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        rt = self.rt
        if self in rt.connections:
            rt.connections.discard(self)
            rt.stats.connections -= 1
        if rt.draining and not rt.connections:
            rt.idle.set()
        streams, self.streams = self.streams, {}
        for stream in streams.values():
            stream.ended = True
            if stream.cycle is not None:
                stream.cycle.abandon()

    def pause_writing(self) -> None:
        self.write_paused = True
        for stream in self.streams.values():
            if stream.cycle is not None:
                stream.cycle.pause_upstream()

    def resume_writing(self) -> None:
        self.write_paused = False
        for stream in list(self.streams.values()):
            if stream.cycle is not None and not stream.paused_upstream:
                stream.cycle.resume_upstream()

    def eof_received(self) -> bool:
        """The client sends nothing more. Over cleartext the streams it opened finish (their
        answers still go out), then the connection closes. A TLS transport closes at once
        whatever this answers, so nothing more is written to it: the streams are abandoned."""
        transport = self.transport
        if transport is None or not transport.can_write_eof():
            self.closed = True  # `connection_lost` follows and abandons the streams
            return False
        self.going_away = True
        if not self.streams:
            self.close()
        return True

    def data_received(self, data: bytes) -> None:
        if self.closed:
            return
        self.last_active = self.rt.loop.time()
        try:
            self.h2.receive(data)
        except ConnectionFailure as exc:
            # Among them an HPACK bomb (ENHANCE_YOUR_CALM: the header list decoded past
            # SETTINGS_MAX_HEADER_LIST_SIZE) and a CONTINUATION flood.
            self.abort(exc.code)
            return
        self.flush_soon()

    # ------------------------------------------------------------------ what the engine tells

    def on_window(self, stream_id: int) -> None:
        if stream_id:
            stream = self.streams.get(stream_id)
            if stream is not None:
                stream.send()
        else:
            self._send_all()

    def on_control(self) -> None:
        # CVE-2019-9512 (ping flood), -9515 (settings flood), -9516 (priority): each frame is
        # free to send and costs an answer or work; past the bound the client is cut off.
        if self.control.hit(self.last_active):
            self.abort(limits.ENHANCE_YOUR_CALM)

    def on_goaway(self) -> None:
        self.going_away = True
        if not self.streams:
            self.close()

    def on_request(self, stream_id: int, block: list[tuple[bytes, bytes]], ended: bool) -> None:
        if self.going_away or len(self.streams) >= self.limits.max_concurrent_streams:
            # RFC 9113 §5.1.2: "An endpoint that receives a HEADERS frame that causes its
            # advertised concurrent stream limit to be exceeded MUST treat this as a stream
            # error ... of type PROTOCOL_ERROR or REFUSED_STREAM"; §6.8: after GOAWAY, streams
            # above its last id are not processed (REFUSED_STREAM says: safe to retry). Each
            # costs a header block's decoding, so refusals count as resets do (rapid reset).
            self._reset_id(stream_id, limits.REFUSED_STREAM)
            if self.resets.hit(self.last_active):
                self.abort(limits.ENHANCE_YOUR_CALM)
            return
        try:
            request = validate.request(block)
        except validate.MalformedRequest:
            self.rt.stats.request(stats.NO_ROUTE, 400)
            self._reset_id(stream_id, limits.PROTOCOL_ERROR)
            return
        stream = H2Stream(self, stream_id, request.method == b"HEAD")
        stream.length = request.length
        stream.read_at = self.last_active
        fields = request.fields
        if not ended and request.length < 0:
            fields.append(validate.CHUNKED)  # a body of unknown length goes upstream chunked
        cycle = StreamCycle(
            stream, self.rt, request.method, request.target, fields, heads.HTTP11, True, False,
            request.authority,
        )  # fmt: skip
        cycle.setup(stream, request.grpc, request.deadline)
        stream.cycle = cycle
        self.streams[stream_id] = stream
        dispatch.start(cycle)
        if ended:
            self.on_end(stream_id)

    def on_data(self, stream_id: int, data: bytes, size: int) -> None:
        stream = self.streams.get(stream_id)
        if stream is None or stream.request_done:
            self.acknowledge(stream_id, size)  # nobody wants it: the window reopens
            return
        stream.received += len(data)
        stream.read_at = self.last_active
        if 0 <= stream.length < stream.received:
            self._malformed_length(stream)
            return
        cycle = stream.cycle
        if cycle is not None and data:
            cycle.request_body(data)
        stream.taken(size)

    def on_trailers(self, stream_id: int, block: list[tuple[bytes, bytes]]) -> None:
        stream = self.streams.get(stream_id)
        if stream is None or stream.request_done or stream.cycle is None:
            return
        try:
            fields = validate.trailers(block)
        except validate.MalformedRequest:
            stream.reset(limits.PROTOCOL_ERROR)
            return
        if fields:
            stream.cycle.request_trailers(fields)

    def on_end(self, stream_id: int) -> None:
        stream = self.streams.get(stream_id)
        if stream is None or stream.request_done:
            return
        if stream.length >= 0 and stream.received != stream.length:
            self._malformed_length(stream)
            return
        stream.request_done = True
        if stream.cycle is not None:
            stream.cycle.request_complete()

    def _malformed_length(self, stream: H2Stream) -> None:
        # RFC 9113 §8.1.1: "A request or response is also malformed if the value of a
        # content-length header field does not equal the sum of the DATA frame payload lengths".
        stream.reset(limits.PROTOCOL_ERROR)

    def on_reset(self, stream_id: int) -> None:
        stream = self.streams.pop(stream_id, None)
        if stream is not None:
            stream.ended = True
            if stream.cycle is not None:
                stream.cycle.abandon()
                stream.cycle = None
        # CVE-2023-44487 (HTTP/2 rapid reset): a client that opens and cancels streams at once
        # costs the server a request's work each, without ever counting against
        # SETTINGS_MAX_CONCURRENT_STREAMS: resets are bounded per window.
        if self.resets.hit(self.last_active):
            self.abort(limits.ENHANCE_YOUR_CALM)
        elif self.going_away and not self.streams:
            self.close()

    # ------------------------------------------------------------------ what streams send

    def now(self) -> float:
        return self.rt.loop.time()

    def send_headers(self, stream_id: int, block: list[tuple[bytes, bytes]], end: bool) -> None:
        try:
            self.h2.send_headers(stream_id, block, end)
        except StreamGone:
            return  # the client reset the stream meanwhile

    def send_data(self, stream_id: int, data: bytearray) -> int:
        """Send what the windows allow of `data`: how much."""
        conn = self.h2
        try:
            window = min(len(data), conn.window(stream_id))
        except StreamGone:
            return 0
        frame, sent = conn.frame_size, 0
        while sent < window:
            size = min(frame, window - sent)
            conn.send_data(stream_id, bytes(data[sent : sent + size]))
            sent += size
        return sent

    def end_stream(self, stream_id: int) -> None:
        try:
            self.h2.end_stream(stream_id)
        except StreamGone:
            return

    def reset(self, stream: H2Stream, code: int) -> None:
        stream.ended = True
        self._reset_id(stream.id, code)
        self.streams.pop(stream.id, None)
        cycle, stream.cycle = stream.cycle, None
        if cycle is not None:
            cycle.abandon()
        self._maybe_close()

    def _reset_id(self, stream_id: int, code: int) -> None:
        try:
            self.h2.reset_stream(stream_id, code)
        except StreamGone:
            return
        self.flush_soon()

    def acknowledge(self, stream_id: int, size: int) -> None:
        if size:
            self.h2.acknowledge(stream_id, size)
            self.flush_soon()

    def stream_done(self, stream: H2Stream) -> None:
        if stream.ended and stream.cycle is None:
            self.streams.pop(stream.id, None)
            self._maybe_close()
        self.flush_soon()

    def _maybe_close(self) -> None:
        if not self.streams and (self.going_away or self.rt.draining or self.drain):
            self.shutdown()

    def _send_all(self) -> None:
        for stream in list(self.streams.values()):
            if stream.pending:
                stream.send()

    def flush_soon(self) -> None:
        if not self.flush_due:
            self.flush_due = True
            self.rt.outbox.later(self)

    def flush(self) -> None:
        self.flush_due = False
        data = self.h2.data_to_send()
        if data and self.transport is not None and not self.closed:
            self.transport.write(data)

    # ------------------------------------------------------------------ ends and sweeps

    def abort(self, code: int) -> None:
        """A connection error (RFC 9113 §5.4.1): GOAWAY with `code`, then close."""
        if self.closed:
            return
        self.h2.goaway(code)
        self.flush()
        self.close()

    def shutdown(self) -> None:
        """GOAWAY (RFC 9113 §6.8): streams up to the last one received finish, then close."""
        if self.closed:
            return
        if not self.going_away:
            self.going_away = True
            self.h2.goaway(limits.NO_ERROR)
            self.flush()
        if not self.streams:
            self.close()

    def close(self) -> None:
        transport = self.transport
        if transport is None:
            return
        if not self.closed:
            self.closed = True
            transport.close()
        elif self in self.rt.connections:
            # Closed once and still not gone (a TLS peer that never answers close_notify):
            # the shutdown's grace is over, so the socket goes now.
            transport.abort()

    def sweep(self, now: float) -> None:
        """Every second: a window stalled or a body paused past `body_timeout` resets its
        stream; a connection with no stream for `keepalive_timeout` goes away."""
        if self.closed:
            return
        config = self.rt.config
        for stream in list(self.streams.values()):
            if stream.stalled_at and now - stream.stalled_at > config.body_timeout:
                # A client that never opens its window (a zero-window stall) would hold the
                # response, its upstream and its buffers for ever.
                self.rt.stats.client_timeout(stats.BODY)
                stream.reset(limits.CANCEL)
            elif stream.held or stream.request_done or stream.cycle is None:
                stream.read_at = now  # the proxy holds the body, or none is coming
            elif now - stream.read_at > config.body_timeout:
                self.rt.stats.client_timeout(stats.BODY)
                stream.cycle.local(408, "request body timeout")
        if not self.streams and now - self.last_active > config.keepalive_timeout:
            self.rt.stats.client_timeout(stats.IDLE)
            self.shutdown()
        self.flush()
