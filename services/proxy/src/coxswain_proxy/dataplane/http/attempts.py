"""The upstream half of one request: attempts (connect, retry, timeouts) and the response.

Where it sits: `forward.Exchange` (the client half: routing, filters, local answers, the request
body) subclasses `Attempts`; the split is by concern, not by object, so a request still
allocates one object beyond its bytes (conventions, item 4). An attempt binds the exchange to
an `upstream.UpstreamConnection`, which calls `response_head`/`response_body`/
`response_complete` back; everything is callbacks: no task, no await, no lock on the hot path.

The response is collected in `out` while the upstream's bytes are parsed and written to the
client in one `write()` per read (`flush`, through the worker's `outbox`, which makes it once
the loop's batch of events is handled), so a small response costs one system call
(toolchain.md: two writes per message cost a fifth of the throughput). The head goes into `out`
as pieces (`heads.client_response_fields`, from the fields the upstream connection sorted as
they arrived), so that write's join is the only copy of it.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from coxswain_proxy.dataplane import errors
from coxswain_proxy.dataplane.contracts import Upstream
from coxswain_proxy.dataplane.http import flow, heads, responses
from coxswain_proxy.dataplane.stats import NO_ROUTE
from coxswain_proxy.dataplane.tables import BackendPlan, RulePlan
from coxswain_proxy.dataplane.upstream.picker import EndpointPicker, Origin

if TYPE_CHECKING:
    from coxswain_proxy.dataplane.http.http11 import HttpConnection

# RFC 9110 §9.2.2: methods whose repetition has the same effect: the only ones retried.
IDEMPOTENT = frozenset({b"GET", b"HEAD", b"OPTIONS", b"PUT", b"DELETE", b"TRACE"})
NO_BODY_STATUS = frozenset({204, 304})
HEAD = b"HEAD"
HTTP10 = "1.0"
HTTP11 = "1.1"
# How a forwarded response head ends, by framing and connection; each starts with its Via
# (heads: RFC 9110 §7.6.3), so the line costs nothing of its own.
_VIA = heads.VIA_11
KEEP_ALIVE_10 = _VIA + b"connection: keep-alive\r\n\r\n"
CHUNKED_END = _VIA + responses.CHUNKED + b"\r\n"
CHUNKED_CLOSE_END = _VIA + responses.CHUNKED + responses.CLOSE + b"\r\n"
END = _VIA + b"\r\n"
CLOSE_END = _VIA + responses.CLOSE + b"\r\n"


class Attempts:
    __slots__ = (
        "conn", "method", "url", "headers", "version", "keep_alive", "upgrade", "host", "plan",
        "bplan", "picker", "origin", "upstream", "head", "chunked", "body", "pending", "replay",
        "request_done", "response_started", "response_done", "finished", "attempts", "out",
        "rechunk", "status", "cors", "started_at", "attempt_timer", "request_timer",
        "discarding", "mirrors", "route", "until_close", "held",
    )  # fmt: skip

    def __init__(
        self,
        conn: HttpConnection,
        method: bytes,
        url: bytes,
        headers: list[tuple[bytes, bytes]],
        version: str,
        keep_alive: bool,
        upgrade: bool,
        host: bytes | None,
    ) -> None:
        self.conn = conn
        self.method = method
        self.url = url
        self.headers = headers
        self.version = version
        self.keep_alive = keep_alive and not upgrade
        self.upgrade = upgrade
        self.host = host  # its Host field (forward.MANY_HOSTS: more than one), None: none
        self.plan: RulePlan | None = None
        self.bplan: BackendPlan | None = None
        self.picker: EndpointPicker | None = None
        self.origin: Origin | None = None
        self.upstream: Upstream | None = None
        self.head = b""
        self.chunked = False  # the client sent its body chunked: it goes upstream chunked
        self.body: list[bytes] = []  # request body not yet written upstream
        self.pending = 0
        self.replay: list[bytes] | None = None  # the whole body so far, for retries and mirrors
        self.request_done = False
        self.response_started = False
        self.response_done = False
        self.finished = False
        self.attempts = 0
        self.out: list[bytes] = []
        self.rechunk = False
        self.status = 0
        self.cors: list[tuple[bytes, bytes]] = []
        self.started_at = 0.0
        self.attempt_timer: asyncio.TimerHandle | None = None
        self.request_timer: asyncio.TimerHandle | None = None
        self.discarding = False
        self.mirrors: list[tuple[Origin, bytes]] = []
        self.route = NO_ROUTE
        self.until_close = False  # the response body is delimited by the upstream's close
        self.held = b""  # after an Upgrade request: the client's bytes, until the upstream's 101

    # What the client half provides.

    def local(self, status: int, reason: str = "") -> None:
        raise NotImplementedError

    def _frame(self, chunk: bytes) -> bytes:
        raise NotImplementedError

    # ------------------------------------------------------------------ attempts

    def _attempt(self, origin: Origin | None) -> None:
        if origin is None:
            self.local(503, "no ready endpoints")
            return
        self.origin = origin
        self.attempts += 1
        rt = self.conn.rt
        now = self.started_at = rt.loop.time()
        plan = self.plan
        assert plan is not None
        if plan.attempt_timeout:
            self.attempt_timer = rt.loop.call_later(plan.attempt_timeout, self._timed_out)
        connection = rt.connector.acquire(origin, self, now)
        if connection is not None:
            self.connected(connection)

    def connected(self, connection: Upstream) -> None:
        conn = self.conn
        if self.finished or self.upstream is not None:
            conn.rt.connector.release(connection)
            return
        self.upstream = connection
        connection.bind(self, self.method == HEAD)
        body = self.body
        if body:
            self.body, self.pending = [], 0
            connection.write(self.head + b"".join(body))
        else:
            connection.write(self.head)
        if conn.gate.held:
            conn.gate.resume(flow.BODY_WAIT)
        if conn.write_paused:
            connection.pause_reading(flow.PEER_FULL)

    def connect_failed(self, exc: Exception) -> None:
        if not self.finished:
            self._attempt_failed(errors.UpstreamUnavailable(f"connect to {self.origin}: {exc}"))

    def upstream_failed(self, exc: errors.DataplaneError) -> None:
        self.upstream = None
        if self.until_close and isinstance(exc, errors.UpstreamClosed):
            # RFC 9112 §8: a response with neither chunked nor Content-Length "is terminated
            # by closure of the connection and ... is considered complete unless an error was
            # indicated by the underlying connection".
            self.response_complete(False)
            return
        if not self.finished:
            self._attempt_failed(exc)

    def _attempt_failed(self, exc: errors.DataplaneError) -> None:
        self._cancel(attempt_only=True)
        if not self.response_started and self._may_retry():
            self._retry()
            return
        self._fail(exc.status, str(exc))

    def _may_retry(self) -> bool:
        # Spec 003 "Timeouts and retry": "retry repeats an idempotent request after a
        # connection failure and after a response whose status is in codes, attempts times".
        plan = self.plan
        return (
            plan is not None
            and self.attempts <= plan.retries
            and self.method in IDEMPOTENT
            and self.replay is not None
        )

    def _retry(self) -> None:
        assert self.plan is not None and self.picker is not None and self.origin is not None
        self.discarding = False
        if self.upstream is not None:
            self.upstream.cycle = None
            self.upstream.close()
            self.upstream = None
        assert self.replay is not None
        self.body = [self._frame(c) for c in self.replay]
        if self.request_done and self.chunked:
            self.body.append(responses.LAST_CHUNK)
        self.pending = 0
        origin = self.picker.others(self.origin)
        backoff = self.plan.backoff
        if backoff:
            self.attempt_timer = self.conn.rt.loop.call_later(backoff, self._attempt, origin)
        else:
            self._attempt(origin)

    def _arm_request_timer(self, seconds: float) -> None:
        self.request_timer = self.conn.rt.loop.call_later(seconds, self._timed_out)

    def _timed_out(self) -> None:
        # Spec 003: "A request that runs out of either with no attempt answered is answered 504."
        if self.finished:
            return
        if self.upstream is None and self.origin is not None:
            self.conn.rt.connector.cancel(self.origin, self)
        self._fail(504, "upstream request timeout")

    def _fail(self, status: int, reason: str) -> None:
        self._cancel()
        if self.upstream is not None:
            self.upstream.cycle = None
            self.upstream.close()
            self.upstream = None
        if self.response_started:
            # Part of a response is out: the client learns of the failure by the connection
            # closing before the message ends.
            self.flush()
            self.conn.rt.stats.request(self.route, status)
            self.finished = True
            self.conn.close()
            return
        self.local(status, reason)

    def _cancel(self, *, attempt_only: bool = False) -> None:
        if self.attempt_timer is not None:
            self.attempt_timer.cancel()
            self.attempt_timer = None
        if not attempt_only and self.request_timer is not None:
            self.request_timer.cancel()
            self.request_timer = None

    # ------------------------------------------------------------------ the response

    def response_head(self, status: int, fields: heads.ResponseFields) -> None:
        if status < 200 and status != 101:
            # Interim responses (100 Continue for an Expect: 100-continue request) pass on,
            # but not to HTTP/1.0. RFC 9110 §15.2: "A server MUST NOT send a 1xx response to
            # an HTTP/1.0 client", and "A proxy MUST forward 1xx responses unless the proxy
            # itself requested the generation of the 1xx response."
            if self.version != HTTP10:
                self.out.append(heads.serialize(status, [], END))
            return
        rt = self.conn.rt
        rt.stats.upstream_latency(rt.loop.time() - self.started_at)
        plan, bplan = self.plan, self.bplan
        assert plan is not None and bplan is not None
        if plan.retries and status in plan.retry_codes and self._may_retry():
            self.discarding = True
            return
        if self.attempt_timer is not None:
            self._cancel(attempt_only=True)
        self.status = status
        self.response_started = True
        out = self.out
        mark = len(out) + 1  # where the fields start, after the status line
        framing = heads.client_response_fields(
            out, status, fields, plan=bplan.response, extra=self.cors, keep_upgrade=status == 101
        )
        if status == 204 and framing & heads.HAS_LENGTH:
            heads.drop_length(out, mark)
        if not framing & heads.HAS_DATE:
            out.append(responses.date_line())  # RFC 9110 §6.6.1 (quoted in `responses`)
        out.append(self._framing_tail(status, framing))

    def _framing_tail(self, status: int, framing: int) -> bytes:
        if status == 101:
            return END
        if self.upgrade:
            self.keep_alive = False
        has_body = not (self.method == HEAD or status in NO_BODY_STATUS)
        if not framing & heads.HAS_LENGTH and has_body:
            self.until_close = not framing & heads.CHUNKED_IN
            # RFC 9112 §6.1: "A server MUST NOT send a response containing Transfer-Encoding
            # unless the corresponding request indicates HTTP/1.1 (or later minor revisions)."
            if self.version != HTTP10:
                self.rechunk = True
                return CHUNKED_END if self.keep_alive else CHUNKED_CLOSE_END
            self.keep_alive = False  # HTTP/1.0 client: the body is delimited by the close
        if not self.keep_alive:
            return CLOSE_END
        return KEEP_ALIVE_10 if self.version == HTTP10 else END

    def response_body(self, body: bytes) -> None:
        if self.discarding:
            return
        if self.rechunk:
            self.out.append(b"%x\r\n%b\r\n" % (len(body), body))
        else:
            self.out.append(body)

    def response_complete(self, keep_alive: bool) -> None:
        upstream, self.upstream = self.upstream, None
        rt = self.conn.rt
        if upstream is not None:
            if keep_alive and self.request_done:
                rt.connector.release(upstream)
            else:
                upstream.cycle = None
                upstream.close()
        if self.discarding:
            self._retry()
            return
        if self.rechunk:
            self.out.append(responses.LAST_CHUNK)
        self.response_done = True
        rt.stats.request(self.route, self.status)
        if not self.request_done:
            self.keep_alive = False  # answered before the body ended: do not read the rest
        self._finish()

    def upstream_upgraded(self, rest: bytes) -> None:
        upstream, self.upstream = self.upstream, None
        if upstream is None or self.status != 101 or upstream.transport is None:
            self._fail(502, "upstream switched protocols without being asked")
            return
        self.out.append(rest)
        self.flush()
        if self.held:
            upstream.write(self.held)
        self.conn.outbox.flush()  # from here the tunnel writes directly: what is held goes first
        self._cancel()
        self.finished = True
        upstream.cycle = None
        transport = self.conn.transport
        assert transport is not None
        upstream.tunnel = transport
        self.conn.become_tunnel(upstream.transport)
        upstream.resume_reading(flow.PEER_FULL)

    def flush(self) -> None:
        out = self.out
        if out:
            data = out[0] if len(out) == 1 else b"".join(out)
            out.clear()
            conn = self.conn
            transport = conn.transport
            if transport is not None and not conn.closed:
                conn.outbox.write(transport, data)

    def pause_upstream(self) -> None:
        if self.upstream is not None:
            self.upstream.pause_reading(flow.PEER_FULL)

    def resume_upstream(self) -> None:
        if self.upstream is not None:
            self.upstream.resume_reading(flow.PEER_FULL)

    def upstream_writable(self, writable: bool) -> None:
        if writable:
            self.conn.gate.resume(flow.PEER_FULL)
        else:
            self.conn.gate.pause(flow.PEER_FULL)

    # ------------------------------------------------------------------ the end

    def _finish(self) -> None:
        if self.finished:
            return
        self.finished = True
        conn = self.conn
        out = self.out
        if out:  # flush(), inlined: every response ends here
            data = out[0] if len(out) == 1 else b"".join(out)
            out.clear()
            if conn.transport is not None and not conn.closed:
                conn.outbox.write(conn.transport, data)
        if self.attempt_timer is not None or self.request_timer is not None:
            self._cancel()
        conn.finished(self, self.keep_alive)

    def abandon(self) -> None:
        """The client went away: stop everything this request holds."""
        self._cancel()
        self.finished = True
        if self.upstream is not None:
            self.upstream.cycle = None
            self.upstream.close()
            self.upstream = None
        elif self.origin is not None:
            self.conn.rt.connector.cancel(self.origin, self)
