"""One HTTP/2 stream as the client connection of one request cycle (`contracts.Downstream`).

Where it sits: `server.H2ServerConnection` makes an `H2Stream` and a `StreamCycle` per
request stream. The cycle is the HTTP/1.1 path's `request_cycle.RequestCycle` (routing, filters,
retries, timeouts, mirrors, metrics all its own). A forwarded response goes to the stream as
frames: `StreamCycle` overrides the cycle's response-writing methods (`send_interim`,
`send_head`, `response_body`, `response_complete`), building the HEADERS block from the same
`heads` code an HTTP/1.1 head is made with (filters, CORS, hop-by-hop fields), so no HTTP/1.1
bytes are made and none re-parsed; the HTTP/1.1 path pays one method call per response for it.
The proxy's own answers (`local`, redirects, CORS preflights: rare, and each one complete
message) still come as HTTP/1.1 bytes through `write`, re-parsed here (httptools).

Flow control both ways (RFC 9113 §5.2): response DATA goes out only within the client's window,
the rest waits here, and past `flow.HIGH_WATER` waiting the upstream's reading is paused (the
stream reads as `write_paused`); request DATA is acknowledged (WINDOW_UPDATE) as the cycle
takes it, except while its `gate` is held (an upstream that is not taking the body yet), so a
client cannot send more than the proxy has room for.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol
from urllib.parse import quote

import httptools

from coxswain_proxy.dataplane.http import flow, heads, responses
from coxswain_proxy.dataplane.http import trailers as trailer_fields
from coxswain_proxy.dataplane.http.phases import RESPONDING
from coxswain_proxy.dataplane.http.request_cycle import NO_BODY_STATUS, RequestCycle
from coxswain_proxy.dataplane.http2 import limits
from coxswain_proxy.dataplane.upstream.picker import Origin

if TYPE_CHECKING:
    from coxswain_proxy.dataplane.contracts import Upstream
    from coxswain_proxy.dataplane.peercert import ClientPeer
    from coxswain_proxy.dataplane.tables import BackendPlan

# RFC 9113 §8.2.2: what an HTTP/1.1 response carries that an HTTP/2 one must not.
_HOP = frozenset(
    {b"connection", b"keep-alive", b"proxy-connection", b"transfer-encoding", b"upgrade"}
)
_VIA = (b"via", heads.VIA_11[len(b"via: ") : -2])  # RFC 9110 §7.6.3: received-protocol, pseudonym
# gRPC's HTTP-to-status mapping, for the answers the proxy makes itself (docs/proxy.md).
UNKNOWN, DEADLINE_EXCEEDED, UNIMPLEMENTED, INTERNAL, UNAVAILABLE = 2, 4, 12, 13, 14
PERMISSION_DENIED, UNAUTHENTICATED, RESOURCE_EXHAUSTED = 7, 16, 8
GRPC_STATUS = {
    400: INTERNAL, 401: UNAUTHENTICATED, 403: PERMISSION_DENIED, 404: UNIMPLEMENTED,
    405: UNIMPLEMENTED, 408: DEADLINE_EXCEEDED, 429: UNAVAILABLE, 431: RESOURCE_EXHAUSTED,
    500: UNAVAILABLE, 502: UNAVAILABLE, 503: UNAVAILABLE, 504: DEADLINE_EXCEEDED,
}  # fmt: skip


class StreamHost(Protocol):
    """What a stream needs of its connection (`server.H2ServerConnection`)."""

    port: int
    scheme: str
    sni: tuple[str, tuple[str, ...]] | None
    verified: ClientPeer | None
    forwarded: bytes
    write_paused: bool
    closed: bool

    def now(self) -> float: ...

    def send_headers(self, stream_id: int, block: list[tuple[bytes, bytes]], end: bool) -> None: ...

    def send_data(self, stream_id: int, data: bytearray) -> int: ...

    def end_stream(self, stream_id: int) -> None: ...

    def reset(self, stream: H2Stream, code: int) -> None: ...

    def acknowledge(self, stream_id: int, size: int) -> None: ...

    def stream_done(self, stream: H2Stream) -> None: ...

    def flush_soon(self) -> None: ...


class StreamCycle(RequestCycle):
    """A request cycle whose own answers are gRPC statuses for gRPC requests."""

    __slots__ = ("stream", "grpc", "deadline", "last_chunk")

    def setup(self, stream: H2Stream, grpc: bool, deadline: float) -> None:
        self.stream = stream
        self.grpc = grpc
        self.deadline = deadline
        self.last_chunk = b""  # the chunked body's end with the request's trailers, if any

    def request_trailers(self, fields: list[tuple[bytes, bytes]]) -> None:
        """The client's trailers (checked by `validate.trailers`) go upstream in the chunked
        body's trailer section (RFC 9112 §7.1.2), which `upstream.h2c` turns back into a
        trailing HEADERS frame. A body with a Content-Length has no place for them: dropped."""
        self.last_chunk = trailer_fields.last_chunk(trailer_fields.relayable(fields))

    def request_complete(self, last: bytes = responses.LAST_CHUNK) -> None:
        super().request_complete(self.last_chunk or last)

    def local(self, status: int, reason: str = "") -> None:
        if not self.grpc:
            super().local(status, reason)
            return
        # gRPC over HTTP/2: a "Trailers-Only" response is HTTP-Status, Content-Type and the
        # trailers in one HEADERS frame; the status the client reads is grpc-status.
        code = GRPC_STATUS.get(status, UNKNOWN)
        message = quote(f"{status} {reason}".strip(), safe=" ")
        fields = [("content-type", "application/grpc"), ("grpc-status", str(code)),
                  ("grpc-message", message)]  # fmt: skip
        self.answer(status, responses.with_headers(200, fields, close=self.must_close()))

    def arm_request_timer(self, seconds: float) -> None:
        # gRPC's deadline bounds the route's timeout, never the other way.
        deadline = self.deadline
        super().arm_request_timer(min(seconds, deadline) if deadline else seconds)

    def attempt(self, origin: Origin | None) -> None:
        if self.deadline and self.request_timer is None and self.attempts == 0:
            self.arm_request_timer(self.deadline)
        super().attempt(origin)

    # ------------------------------------------------------------------ the response, as frames

    def send_interim(self, status: int, fields: heads.ResponseFields) -> None:
        if status != 101:  # never over HTTP/2 (RFC 9113 §8.6): `upstream_upgraded` fails it
            self.stream.send_interim(_block(status, fields.lines, 0))

    def send_head(self, status: int, fields: heads.ResponseFields, bplan: BackendPlan) -> None:
        """The response head as the HEADERS block the client gets: the fields an HTTP/1.1
        client's head would hold (the same `heads` code: filters, CORS, hop-by-hop), made
        into (name, value) pairs, lower-cased, with no framing fields."""
        if status == 101:
            return
        lines: list[bytes] = []
        framing = heads.client_response_fields(
            lines, status, fields, plan=bplan.response, extra=self.cors
        )
        block = _block(status, lines, 1)
        if status == 204 and framing & heads.HAS_LENGTH:
            block = [(n, v) for n, v in block if n != b"content-length"]
        if not framing & heads.HAS_DATE:
            block.append((b"date", responses.date_line()[6:-2]))  # RFC 9110 §6.6.1
        block.append(_VIA)  # as an HTTP/1.1 client's head has it (`heads.END`)
        # A body with neither length nor chunked coding ends with the upstream's close.
        has_body = not (self.method == b"HEAD" or status in NO_BODY_STATUS)
        self.until_close = has_body and not framing & (heads.HAS_LENGTH | heads.CHUNKED_IN)
        self.stream.start_response(status, block)

    def response_body(self, body: bytes) -> None:
        if self.phase == RESPONDING:
            self.stream.on_body(body)

    def response_trailers(self, fields: list[tuple[bytes, bytes]]) -> None:
        self.stream.trailers = fields

    def response_complete(self, keep_alive: bool) -> None:
        if self.phase == RESPONDING:
            self.stream.on_message_complete()
        super().response_complete(keep_alive)

    def flush(self) -> None:
        super().flush()  # the proxy's own answers still come as HTTP/1.1 bytes (`write`)
        self.stream.conn.flush_soon()


def _block(status: int, lines: list[bytes], start: int) -> list[tuple[bytes, bytes]]:
    """`:status` and the fields of `lines` (name, ": ", value, CRLF groups from `start`)."""
    block = [(b":status", b"%d" % status)]
    for i in range(start, len(lines), 4):
        name = lines[i].lower()
        if name not in _HOP:
            block.append((name, lines[i + 2]))
    return block


class H2Stream:
    """One request stream: the cycle's client, its response re-framed for HTTP/2."""

    __slots__ = (
        "conn", "id", "cycle", "held", "parser", "status", "fields", "head", "pending",
        "ending", "ended", "trailers", "unacked", "received", "length", "request_done",
        "paused_upstream", "stalled_at", "head_only", "read_at",
    )  # fmt: skip

    def __init__(self, conn: StreamHost, stream_id: int, head_only: bool) -> None:
        self.conn = conn
        self.id = stream_id
        self.cycle: StreamCycle | None = None
        self.held = 0  # `contracts.Gate`: while held, received DATA is not acknowledged
        self.parser: httptools.HttpResponseParser | None = None
        self.status = 0
        self.fields: list[tuple[bytes, bytes]] = []
        self.head: list[tuple[bytes, bytes]] | None = None  # the response head, not sent yet
        self.pending = bytearray()  # response DATA waiting for the client's window
        self.ending = False  # the response is whole: END_STREAM once `pending` is out
        self.ended = False  # END_STREAM (or RST_STREAM) sent
        self.trailers: list[tuple[bytes, bytes]] | None = None
        self.unacked = 0  # request DATA taken but not acknowledged (the gate was held)
        self.received = 0  # request DATA bytes, checked against Content-Length
        self.length = -1
        self.request_done = False
        self.paused_upstream = False
        self.stalled_at = 0.0  # when response DATA began waiting on a closed window
        self.head_only = head_only
        self.read_at = 0.0  # when request DATA last came (the body timeout's clock)

    # ------------------------------------------------------------------ Downstream

    @property
    def gate(self) -> H2Stream:
        # The stream is its own gate: a gate object pointing back at its stream made a
        # reference cycle per request, which only the garbage collector could free (8% of a
        # worker's CPU under h2load 50x10).
        return self

    def pause(self, reason: int) -> None:
        self.held |= reason

    def resume(self, reason: int) -> None:
        if self.held:
            self.held &= ~reason
            if not self.held:
                self.acknowledge()

    @property
    def port(self) -> int:
        return self.conn.port

    @property
    def scheme(self) -> str:
        return self.conn.scheme

    @property
    def sni(self) -> tuple[str, tuple[str, ...]] | None:
        return self.conn.sni

    @property
    def verified(self) -> ClientPeer | None:
        return self.conn.verified

    @property
    def forwarded(self) -> bytes:
        return self.conn.forwarded

    @property
    def write_paused(self) -> bool:
        return self.conn.write_paused or len(self.pending) > flow.HIGH_WATER

    def write(self, data: bytes) -> None:
        if self.ended:
            return
        parser = self.parser
        if parser is None:
            parser = self.parser = httptools.HttpResponseParser(self)
        try:
            parser.feed_data(data)
        except httptools.HttpParserError:
            self.reset(limits.INTERNAL_ERROR)  # our own cycle wrote these bytes
            return
        self.conn.flush_soon()

    def finished(self, cycle: object, keep_alive: bool) -> None:
        del keep_alive
        self.cycle = None
        if self.ending and not self.pending:
            self._end()
        if not self.request_done and self.ended and not self.conn.closed:
            # RFC 9113 §8.1: "A server can send a complete response prior to the client sending
            # an entire request ... the server MAY request that the client abort transmission
            # of a request without error by sending a RST_STREAM with an error code of
            # NO_ERROR after sending a complete response".
            self.conn.reset(self, limits.NO_ERROR)
        self.conn.stream_done(self)

    def become_tunnel(self, upstream: Upstream) -> None:
        # HTTP/2 carries no Upgrade (RFC 9113 §8.6): nothing asks for one, so none is made.
        upstream.close()
        self.reset(limits.INTERNAL_ERROR)

    def close(self) -> None:
        """The cycle gives up mid-response: the client learns it by the stream's reset, or,
        for gRPC, by a status in the trailers."""
        cycle = self.cycle
        if cycle is not None and cycle.grpc and self.status and not self.ended:
            # gRPC over HTTP/2: "Trailers → Status [Status-Message] *Custom-Metadata"; the
            # response head is out, so the failure (the upstream reset or went away) reaches
            # the client as UNAVAILABLE, the code of the proxy's own 502, not as a reset it
            # reads as INTERNAL.
            self.cycle = None
            self.trailers = [(b"grpc-status", b"%d" % UNAVAILABLE),
                             (b"grpc-message", b"upstream failed mid-response")]  # fmt: skip
            self.ending = True
            self._send_head(end=False)
            self.send()
            if self.ended and not self.request_done and not self.conn.closed:
                self.conn.reset(self, limits.NO_ERROR)  # as `finished`: the rest is unwanted
            self.conn.flush_soon()
            return
        self.reset(limits.INTERNAL_ERROR)

    # ------------------------------------------------------------------ request DATA

    def acknowledge(self) -> None:
        """Open the client's window by what the cycle has taken (the gate let go)."""
        if self.unacked and not self.ended:
            self.conn.acknowledge(self.id, self.unacked)
            self.unacked = 0

    def taken(self, size: int) -> None:
        if self.held:
            self.unacked += size
        elif size:
            self.conn.acknowledge(self.id, size)

    # ------------------------------------------------------------------ response parser

    def on_header(self, name: bytes, value: bytes) -> None:
        self.fields.append((name.lower(), value))

    def on_headers_complete(self) -> None:
        parser = self.parser
        assert parser is not None
        status = parser.get_status_code()
        fields, self.fields = self.fields, []
        block = [(b":status", b"%d" % status)]
        block += [(n, v) for n, v in fields if n not in _HOP]
        if status < 200:
            self.send_interim(block)
            return
        self.start_response(status, block)
        if self.head_only:
            self.on_message_complete()

    # ------------------------------------------------------------------ the response

    def send_interim(self, block: list[tuple[bytes, bytes]]) -> None:
        # RFC 9113 §8.1: "An HTTP message (request or response) consists of: one HEADERS
        # frame ... containing the control data and header section", preceded for a response
        # by "zero or more HEADERS frames ... containing the message headers of informational
        # (1xx) HTTP responses"; RFC 9110 §15.2: "A proxy MUST forward 1xx responses unless the
        # proxy itself requested the generation of the 1xx response".
        if not self.ended:
            self.conn.send_headers(self.id, block, False)

    def start_response(self, status: int, block: list[tuple[bytes, bytes]]) -> None:
        """The final head, held until the body's first DATA (or the end: one HEADERS frame
        with END_STREAM for a response without a body)."""
        self.status = status
        self.head = block

    def on_body(self, body: bytes) -> None:
        self._send_head(end=False)
        self.pending += body
        self.send()

    def on_message_complete(self) -> None:
        if not self.status:
            return  # an interim response ended: the parser goes on to the next one
        if self.ending:
            return
        self.ending = True
        if self.head is not None and self.trailers is None:
            self._send_head(end=True)
            self.ended = True
            return
        self._send_head(end=False)
        self.send()

    def _send_head(self, *, end: bool) -> None:
        head = self.head
        if head is not None and not self.ended:
            self.conn.send_headers(self.id, head, end)
            self.head = None

    # ------------------------------------------------------------------ sending

    def send(self) -> None:
        """What the client's window allows of `pending`; the end once all is out."""
        if self.ended:
            return
        pending = self.pending
        if pending:
            sent = self.conn.send_data(self.id, pending)
            if sent:
                del pending[:sent]
                self.stalled_at = 0.0
            elif not self.stalled_at:
                self.stalled_at = self.conn.now()
        if self.ending and not pending:
            self._end()
        cycle = self.cycle
        if cycle is None:
            return
        if len(pending) > flow.HIGH_WATER and not self.paused_upstream:
            self.paused_upstream = True
            cycle.pause_upstream()
        elif self.paused_upstream and len(pending) < flow.LOW_WATER and not self.conn.write_paused:
            self.paused_upstream = False
            cycle.resume_upstream()

    def _end(self) -> None:
        if self.ended:
            return
        self.ended = True
        trailers, self.trailers = self.trailers, None
        if trailers:
            block = [(n.lower(), v) for n, v in trailers if n.lower() not in _HOP]
            self.conn.send_headers(self.id, block, True)
        else:
            self.conn.end_stream(self.id)
        if self.cycle is None:
            self.conn.stream_done(self)

    def reset(self, code: int) -> None:
        if not self.ended:
            self.ended = True
            self.conn.reset(self, code)
