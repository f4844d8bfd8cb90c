"""One request's cycle through the proxy: its state, its upstream attempts, its answer.

Where it sits: `http11.HttpConnection` makes a `RequestCycle` per request it parses and hands
it to `dispatch.start` when its turn comes. `dispatch` routes it and applies the rule's filters,
then either answers it here (`local`, `local_headers`, `answer`) or writes the routing decision
into its slots (plans, picker, the head to send) and makes the first attempt (`attempt`). From
there the cycle runs on callbacks: the pool (`contracts.Connector`) hands it a connection
(`connected`) or says none could be opened, the connection bound calls back with the response
(`contracts.UpstreamCallbacks`), the client connection feeds the request body
(`request_body`, `request_complete`), and timers fire. No task, no await, no lock.

Why one object, and routing apart from it: a request allocates one object beyond its bytes
(conventions, item 4: state grouped by lifetime, connection and request cycle), so what happens
to a request is split by responsibility, not into objects: deciding (`dispatch`: routing,
filters, the head sent upstream; once, at the start) and carrying out (here: attempts, retries,
timeouts, the response, the end). The decision is written into this object's slots, which
costs no allocation and no indirection, and `dispatch` only ever calls in here, never the other
way. Both connections it talks to are Protocols (`contracts.Downstream`, `contracts.Upstream`):
this module imports neither. Where a cycle is in its life is `phase` (`phases`, the table).

The response is collected in `out` while the upstream's bytes are parsed, and written to the
client in one `write()` per read (`flush`, through the worker's `outbox`, which makes it once
the loop's batch of events is handled), so a small response costs one system call
(toolchain.md: two writes per message cost a fifth of the throughput). The head goes into `out`
as pieces (`heads.client_response_fields`, from the fields the upstream connection sorted as
they arrived), so that write's join is the only copy of it.
"""

from __future__ import annotations

import asyncio

from coxswain_proxy.dataplane import errors
from coxswain_proxy.dataplane.contracts import Downstream, Upstream
from coxswain_proxy.dataplane.http import flow, heads, responses, retries
from coxswain_proxy.dataplane.http.heads import (
    CHUNKED_CLOSE_END,
    CHUNKED_END,
    CLOSE_END,
    END,
    HTTP10,
    KEEP_ALIVE_10_END,
)
from coxswain_proxy.dataplane.http.phases import (
    ANSWERED,
    BACKOFF,
    CLOSED,
    CONNECTING,
    DISCARDING,
    DONE,
    RESPONDING,
    SENT,
    TUNNEL,
    WAITING,
)
from coxswain_proxy.dataplane.http.policies.guard import Guard
from coxswain_proxy.dataplane.http.retries import IDEMPOTENT as IDEMPOTENT  # for `dispatch`
from coxswain_proxy.dataplane.runtime import Runtime
from coxswain_proxy.dataplane.stats import NO_ROUTE
from coxswain_proxy.dataplane.tables import BackendPlan, RulePlan, apply_plan
from coxswain_proxy.dataplane.upstream import mirror
from coxswain_proxy.dataplane.upstream.picker import EndpointPicker, Origin

NO_BODY_STATUS = frozenset({204, 304})
HEAD = b"HEAD"


class RequestCycle:
    __slots__ = (
        "conn", "rt", "method", "url", "headers", "version", "keep_alive", "upgrade", "host",
        "phase", "request_done", "plan", "bplan", "picker", "route", "cors", "head", "chunked",
        "replay", "kept", "mirrors", "origin", "upstream", "attempts", "body", "pending", "held",
        "started_at", "attempt_timer", "request_timer", "out", "status", "rechunk",
        "until_close", "guard", "last",
    )  # fmt: skip

    def __init__(
        self,
        conn: Downstream,
        rt: Runtime,
        method: bytes,
        url: bytes,
        headers: list[tuple[bytes, bytes]],
        version: str,
        keep_alive: bool,
        upgrade: bool,
        host: bytes | None,
    ) -> None:
        # The request, as the client connection parsed it.
        self.conn = conn
        self.rt = rt
        self.method = method
        self.url = url
        self.headers = headers
        self.version = version
        self.keep_alive = keep_alive and not upgrade
        self.upgrade = upgrade
        self.host = host  # its Host field (dispatch.MANY_HOSTS: more than one), None: none
        self.phase = WAITING
        self.request_done = False  # the request was read whole (its body may lag the answer)
        # The routing decision, filled in by `dispatch`.
        self.plan: RulePlan | None = None
        self.bplan: BackendPlan | None = None
        self.picker: EndpointPicker | None = None
        self.route = NO_ROUTE
        self.cors: list[tuple[bytes, bytes]] = []
        self.head = b""  # the request head to send upstream
        self.chunked = False  # the client sent its body chunked: it goes upstream chunked
        self.replay: list[bytes] | None = None  # the whole body so far, for retries and mirrors
        self.last = responses.LAST_CHUNK  # a chunked body's last chunk, trailers and all
        self.kept = 0  # its bytes (beyond `Config.replay_limit`, nothing is kept)
        self.mirrors: list[tuple[Origin, bytes]] = []  # (origin, Host) of each copy to send
        self.guard: Guard | None = None  # a policy's watch: a chunked body, the end (`policies`)
        # The attempts.
        self.origin: Origin | None = None
        self.upstream: Upstream | None = None
        self.attempts = 0
        self.body: list[bytes] = []  # request body not yet written upstream
        self.pending = 0
        self.held = b""  # after an Upgrade request: the client's bytes, until the upstream's 101
        self.started_at = 0.0
        self.attempt_timer: asyncio.TimerHandle | None = None
        self.request_timer: asyncio.TimerHandle | None = None
        # The response.
        self.out: list[bytes] = []
        self.status = 0
        self.rechunk = False
        self.until_close = False  # the response body is delimited by the upstream's close

    # ------------------------------------------------------------------ attempts

    def attempt(self, origin: Origin | None) -> None:
        self.attempt_timer = None  # after a backoff: the timer that called this
        if origin is None:
            self.local(503, "no ready endpoints")
            return
        self.phase = CONNECTING
        self.origin = origin
        self.attempts += 1
        rt = self.rt
        now = self.started_at = rt.loop.time()
        plan = self.plan
        assert plan is not None
        if plan.attempt_timeout:
            self.attempt_timer = rt.loop.call_later(plan.attempt_timeout, self._attempt_timed_out)
        connection = rt.connector.acquire(origin, self, now)
        if connection is not None:
            self.connected(connection)

    def connected(self, connection: Upstream) -> None:
        if self.phase != CONNECTING:  # answered, or gone, before the pool came back
            self.rt.connector.release(connection)
            return
        self.phase = SENT
        self.upstream = connection
        connection.bind(self, self.method == HEAD)
        body = self.body
        if body:
            self.body, self.pending = [], 0
            connection.write(self.head + b"".join(body))
        else:
            connection.write(self.head)
        conn = self.conn
        if conn.gate.held:
            conn.gate.resume(flow.BODY_WAIT)
        if conn.write_paused:
            connection.gate.pause(flow.PEER_FULL)

    def connect_failed(self, exc: Exception) -> None:
        if self.phase == CONNECTING:
            self._attempt_failed(errors.UpstreamUnavailable(f"connect to {self.origin}: {exc}"))

    def upstream_failed(self, exc: errors.DataplaneError) -> None:
        self.upstream = None
        if self.until_close and isinstance(exc, errors.UpstreamClosed):
            # RFC 9112 §8: a response with neither chunked nor Content-Length "is terminated
            # by closure of the connection and ... is considered complete unless an error was
            # indicated by the underlying connection".
            self.response_complete(False)
            return
        if self.phase < DONE:
            self._attempt_failed(exc)

    def _attempt_timed_out(self) -> None:
        # Gateway API, HTTPRouteRetry.backoff: "any retry attempts which reach the configured
        # BackendRequest timeout duration without a response SHOULD be canceled if possible and
        # the Gateway should wait for at least the specified backoff duration before
        # attempting to retry": a failed attempt like a lost connection, and 504 as the last.
        self.attempt_timer = None
        if self.phase < DONE:
            self._attempt_failed(errors.GatewayTimeout("upstream timed out (backendRequest)"))

    def _attempt_failed(self, exc: errors.DataplaneError) -> None:
        """The attempt is over: another follows if the retry policy allows, else `exc` answers
        (`errors`: 503 for a connection failure, 504 for a timeout, 502 for a broken response)."""
        self._end_attempt()
        if self.phase < RESPONDING and self._may_retry():
            self._retry()
            return
        self._fail(exc.status, str(exc))

    def _may_retry(self) -> bool:
        plan = self.plan
        return plan is not None and retries.may_retry(plan, self.method, self.attempts, self.replay)

    def _retry(self) -> None:
        plan, picker, origin, replay = self.plan, self.picker, self.origin, self.replay
        assert plan is not None and picker is not None and origin is not None
        assert replay is not None
        self._end_attempt()
        self.body = retries.replayed(
            replay, chunked=self.chunked, complete=self.request_done, last=self.last
        )
        self.pending = 0
        following = picker.others(origin)
        if plan.backoff:
            # Gateway API: "unsuccessful backend requests are not retried before the
            # configured minimum duration"; timeouts.request runs on meanwhile.
            self.phase = BACKOFF
            self.attempt_timer = self.rt.loop.call_later(plan.backoff, self.attempt, following)
        else:
            self.attempt(following)

    def _end_attempt(self) -> None:
        """Let go of the attempt: its timer, its place in the pool's queue, or the connection
        bound (closed, without hearing from it again)."""
        if self.attempt_timer is not None:
            self.attempt_timer.cancel()
            self.attempt_timer = None
        upstream = self.upstream
        if upstream is not None:
            upstream.cycle = None
            upstream.close()
            self.upstream = None
        elif self.phase == CONNECTING and self.origin is not None:
            self.rt.connector.cancel(self.origin, self)

    def arm_request_timer(self, seconds: float) -> None:
        self.request_timer = self.rt.loop.call_later(seconds, self._request_timed_out)

    def _request_timed_out(self) -> None:
        # Spec 003: "A request that runs out of either with no attempt answered is answered
        # 504"; the Gateway API: attempts "still in progress when the Request timeout duration
        # has been reached ... SHOULD be canceled if possible and the Gateway MUST immediately
        # return a timeout error" (a backoff running included).
        self.request_timer = None
        if self.phase < DONE:
            self._fail(504, "upstream request timeout")

    def _fail(self, status: int, reason: str) -> None:
        self._end_attempt()
        self._cancel()
        if self.phase >= RESPONDING:
            # Part of a response is out: the client learns of the failure by the connection
            # closing before the message ends.
            self.flush()
            self.rt.stats.request(self.route, status)
            self.phase = CLOSED
            self.conn.close()
            return
        self.local(status, reason)

    def _cancel(self) -> None:
        if self.attempt_timer is not None:
            self.attempt_timer.cancel()
            self.attempt_timer = None
        if self.request_timer is not None:
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
                self.send_interim(status, fields)
            return
        rt = self.rt
        rt.stats.upstream_latency(rt.loop.time() - self.started_at)
        plan, bplan = self.plan, self.bplan
        assert plan is not None and bplan is not None
        self.status = status
        if plan.retries and status in plan.retry_codes and self._may_retry():
            self.phase = DISCARDING
            return
        # The attempt's timer runs on: timeouts.backendRequest "covers the time from when the
        # request first starts being sent from the gateway to when the full response has been
        # received from the backend" (Gateway API, HTTPRouteTimeouts).
        self.phase = RESPONDING
        self.send_head(status, fields, bplan)

    # The response's form on the client's protocol: these write HTTP/1.1 into `out`;
    # `http2.h2stream.StreamCycle` sends HTTP/2 frames instead, from the same fields.

    def send_interim(self, status: int, fields: heads.ResponseFields) -> None:
        # Its fields pass as a final response's do (103 Early Hints carries Link fields).
        self.out += (responses.status_line(status), *fields.lines, END)

    def send_head(self, status: int, fields: heads.ResponseFields, bplan: BackendPlan) -> None:
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
        return KEEP_ALIVE_10_END if self.version == HTTP10 else END

    def response_body(self, body: bytes) -> None:
        if self.phase == DISCARDING:
            return
        if self.rechunk:
            self.out.append(b"%x\r\n%b\r\n" % (len(body), body))
        else:
            self.out.append(body)

    def response_complete(self, keep_alive: bool) -> None:
        upstream, self.upstream = self.upstream, None
        rt = self.rt
        if upstream is not None:
            if keep_alive and self.request_done:
                rt.connector.release(upstream)
            else:
                upstream.cycle = None
                upstream.close()
        if self.phase == DISCARDING:
            if self._may_retry():
                self._retry()
            else:  # the body outgrew what is kept to send again while this response came
                self.local(self.status, "retried status; the request body is too long to resend")
            return
        if self.rechunk:
            self.out.append(responses.LAST_CHUNK)
        self.phase = ANSWERED
        rt.stats.request(self.route, self.status)
        if not self.request_done:
            self.keep_alive = False  # answered before the body ended: do not read the rest
        self._finish()

    def response_trailers(self, fields: list[tuple[bytes, bytes]]) -> None:
        """An HTTP/2 upstream's trailer fields. An HTTP/1.1 client does not get them: RFC 9112
        §7.1.2 lets a recipient that re-frames a message "selectively retain or discard the
        received trailer fields" (an HTTP/2 client's cycle, `http2.stream`, relays them)."""
        del fields

    def upstream_upgraded(self, rest: bytes) -> None:
        upstream, self.upstream = self.upstream, None
        if upstream is None or self.status != 101 or upstream.transport is None:
            self._fail(502, "upstream switched protocols without being asked")
            return
        self.out.append(rest)
        self.flush()
        if self.held:
            upstream.write(self.held)
        self._cancel()
        self.phase = TUNNEL
        upstream.cycle = None
        self.conn.become_tunnel(upstream)  # what is held for the client goes out first
        upstream.gate.resume(flow.PEER_FULL)

    def flush(self) -> None:
        out = self.out
        if out:
            data = out[0] if len(out) == 1 else b"".join(out)
            out.clear()
            self.conn.write(data)

    def pause_upstream(self) -> None:
        if self.upstream is not None:
            self.upstream.gate.pause(flow.PEER_FULL)

    def resume_upstream(self) -> None:
        if self.upstream is not None:
            self.upstream.gate.resume(flow.PEER_FULL)

    def upstream_writable(self, writable: bool) -> None:
        if writable:
            self.conn.gate.resume(flow.PEER_FULL)
        else:
            self.conn.gate.pause(flow.PEER_FULL)

    # ------------------------------------------------------------------ answers of its own

    def local(self, status: int, reason: str = "") -> None:
        self.answer(status, responses.simple(status, reason, close=self.must_close()))

    def local_headers(self, status: int, headers: list[tuple[str, str]], plan: RulePlan) -> None:
        raw = apply_plan(plan.response, heads.encoded(headers)) + self.cors
        text = [(n.decode("latin-1"), v.decode("latin-1")) for n, v in raw]
        self.answer(status, responses.with_headers(status, text, close=self.must_close()))

    def must_close(self) -> bool:
        # A body not read yet would have to be drained first (and an Expect: 100-continue
        # client may never send it): closing is simpler and always correct.
        if not self.request_done and heads.has_body(self.headers):
            self.keep_alive = False
        return not self.keep_alive

    def answer(self, status: int, data: bytes) -> None:
        """The proxy's own answer, `data` (its `close` made with `must_close()`), goes out."""
        self.status = status
        self.phase = ANSWERED
        self.conn.write(data)
        self.rt.stats.request(self.route, status)
        if self.request_done or not self.keep_alive:
            self._finish()

    # ------------------------------------------------------------------ the request body

    def request_body(self, chunk: bytes) -> None:
        if self.phase >= ANSWERED:
            return  # answered already: what is left of the body goes nowhere
        if self.guard is not None and self.guard.over(len(chunk)):
            self._fail(413, "the request body is larger than the route allows")
            return
        if self.replay is not None:
            self.replay.append(chunk)
            self.kept += len(chunk)
            if self.kept > self.rt.config.replay_limit:
                self.replay = None
                self.mirrors.clear()
        upstream = self.upstream
        framed = b"%x\r\n%b\r\n" % (len(chunk), chunk) if self.chunked else chunk
        if upstream is not None:
            upstream.write(framed)
            return
        self.body.append(framed)
        self.pending += len(framed)
        if self.pending > flow.HIGH_WATER:
            self.conn.gate.pause(flow.BODY_WAIT)

    def request_complete(self, last: bytes = responses.LAST_CHUNK) -> None:
        """The request was read whole; `last`: a chunked body's last chunk, with the client's
        trailer fields in it when it sent some (`trailers.last_chunk`)."""
        self.request_done = True
        self.last = last  # kept for another attempt: the trailers go with the body again
        if self.chunked:
            if self.upstream is not None:
                self.upstream.write(last)
            else:
                self.body.append(last)
        if self.mirrors and self.replay is not None:
            mirror.send_copies(
                self.mirrors,
                self.method,
                self.url,
                self.headers,
                forwarded=self.conn.forwarded,
                http10=self.version == HTTP10,
                body=b"".join(self.replay),
            )
            self.mirrors.clear()
        if self.phase >= ANSWERED:
            self._finish()

    def upgrade_data(self, rest: bytes) -> None:
        # What follows an Upgrade request belongs to the new protocol, if the upstream agrees:
        # held until its 101. Sent on before, an upstream that declines would read it as a
        # request of its own, one the proxy never routed (reading pauses meanwhile).
        self.held = rest

    # ------------------------------------------------------------------ the end

    def _finish(self) -> None:
        if self.phase >= DONE:
            return
        self.phase = DONE
        if self.guard is not None:
            self.guard.done(self)
        out = self.out
        if out:  # flush(), inlined: every response ends here
            data = out[0] if len(out) == 1 else b"".join(out)
            out.clear()
            self.conn.write(data)
        if self.attempt_timer is not None or self.request_timer is not None:
            self._cancel()
        self.conn.finished(self, self.keep_alive)

    def answered(self) -> bool:
        """Some of an answer has gone to the client (its head, at least)."""
        return self.phase >= RESPONDING

    def abandon(self) -> None:
        """The client went away: stop everything this request holds."""
        if self.phase >= DONE:
            return
        self._end_attempt()
        self._cancel()
        self.phase = CLOSED
        if self.guard is not None:
            self.guard.done(self)
