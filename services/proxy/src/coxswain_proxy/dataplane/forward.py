"""One request's journey: route, filters, pick, forward (with retry and timeouts), respond.

Where it sits: `http11.HttpConnection` creates an `Exchange` per request and calls `start()`
when its turn comes; the exchange binds to an `upstream.UpstreamConnection` and is called back
with the response. It is the one object a request allocates beyond its bytes (conventions,
item 4), and it is driven entirely by callbacks: no task, no await, no lock on the hot path.

The response is collected in `out` while the upstream's bytes are parsed and written to the
client in one `write()` per read (`flush`), so a small response costs one system call
(toolchain.md: two writes per message cost a fifth of the throughput).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING

from coxswain_proxy.dataplane import errors, flow, heads, mirror, responses
from coxswain_proxy.dataplane.stats import NO_ROUTE
from coxswain_proxy.dataplane.tables import BackendPlan, RulePlan, apply_plan
from coxswain_proxy.dataplane.upstream import UpstreamConnection
from coxswain_routing import (
    RequestTarget,
    is_preflight,
    normalize_host,
    preflight_headers,
    redirect_location,
    response_headers,
    rewrite_path,
)

if TYPE_CHECKING:
    from coxswain_proxy.dataplane.endpoints import EndpointPicker, Origin
    from coxswain_proxy.dataplane.http11 import HttpConnection
    from coxswain_routing import Candidate, Rule

# RFC 9110 §9.2.2: methods whose repetition has the same effect: the only ones retried.
IDEMPOTENT = frozenset({b"GET", b"HEAD", b"OPTIONS", b"PUT", b"DELETE", b"TRACE"})
NO_BODY_STATUS = frozenset({204, 304})
HEAD = b"HEAD"
HTTP10 = "1.0"
KEEP_ALIVE_10 = b"connection: keep-alive\r\n\r\n"
CHUNKED_END = responses.CHUNKED + b"\r\n"
END = b"\r\n"
CLOSE_END = responses.CLOSE + b"\r\n"


class LazyHeaders(Mapping[str, str]):
    """Request headers by lower-cased name, decoded only if a route or filter asks."""

    __slots__ = ("_raw", "_map")

    def __init__(self, raw: list[tuple[bytes, bytes]]) -> None:
        self._raw = raw
        self._map: dict[str, str] | None = None

    def _built(self) -> dict[str, str]:
        if self._map is None:
            built: dict[str, str] = {}
            for name, value in self._raw:
                key = name.decode("latin-1").lower()
                text = value.decode("latin-1")
                built[key] = f"{built[key]},{text}" if key in built else text
            self._map = built
        return self._map

    def __getitem__(self, key: str) -> str:
        return self._built()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._built())

    def __len__(self) -> int:
        return len(self._built())


class Exchange:
    __slots__ = (
        "conn", "method", "url", "headers", "version", "keep_alive", "upgrade", "rule", "plan",
        "bplan", "picker", "origin", "upstream", "head", "framing", "body", "pending", "replay",
        "request_done", "response_started", "response_done", "finished", "attempts", "out",
        "rechunk", "status", "cors", "started_at", "attempt_timer", "request_timer",
        "discarding", "mirrors", "route",
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
    ) -> None:
        self.conn = conn
        self.method = method
        self.url = url
        self.headers = headers
        self.version = version
        self.keep_alive = keep_alive and not upgrade
        self.upgrade = upgrade
        self.rule: Rule | None = None
        self.plan: RulePlan | None = None
        self.bplan: BackendPlan | None = None
        self.picker: EndpointPicker | None = None
        self.origin: Origin | None = None
        self.upstream: UpstreamConnection | None = None
        self.head = b""
        self.framing: heads.RequestFraming | None = None
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

    # ------------------------------------------------------------------ routing

    def start(self) -> None:
        try:
            self._route()
        except errors.DataplaneError as exc:
            self.local(exc.status, str(exc))

    def _route(self) -> None:
        conn = self.conn
        tables = conn.rt.tables
        if tables is None:
            raise errors.UpstreamUnavailable("no routing snapshot received yet")
        # RFC 9112 §3.2: "A server MUST respond with a 400 (Bad Request) status code to any
        # HTTP/1.1 request message that lacks a Host header field and to any request message
        # that contains more than one Host header field line".
        if conn.hosts > 1 or (conn.host is None and self.version != HTTP10):
            raise errors.BadRequest("exactly one Host header is required")
        raw_host = conn.host or b""
        host = raw_host.decode("latin-1")
        if conn.sni is not None:
            self._check_misdirected(host)
        path, _, query = self.url.partition(b"?")
        path_s, query_s = path.decode("latin-1"), query.decode("latin-1")
        method = self.method.decode("latin-1")
        lazy = LazyHeaders(self.headers)
        outcome = tables.router.match(conn.port, host, method, path_s, lazy, query_s)
        if outcome.rule is None:
            self.local(outcome.status, outcome.reason)
            return
        self._serve(outcome, raw_host, path_s, query_s, lazy)

    def _check_misdirected(self, host: str) -> None:
        """Issue 7, item 4: 421 when the Host falls outside the SNI-selected listener's names."""
        assert self.conn.sni is not None
        allowed = _allowed_names(self.conn, self.conn.sni)
        if allowed and not any(_covers(p, normalize_host(host)) for p in allowed):
            self.status = 421
            raise _Misdirected("the Host is not served by the certificate's listener")

    def _serve(
        self, cand: Candidate, host: bytes, path: str, query: str, lazy: LazyHeaders
    ) -> None:
        tables = self.conn.rt.tables
        assert tables is not None
        plan = self.plan = tables.plans[id(cand.rule)]
        self.route = plan.route
        self.rule = cand.rule
        if plan.cors is not None:
            if is_preflight(self.method.decode(), lazy):
                self.local_headers(204, preflight_headers(plan.cors, lazy), plan)
                return
            self.cors = _encode(response_headers(plan.cors, lazy))
        if plan.redirect is not None:
            self._redirect(cand, plan, host, path, query)
            return
        if cand.status != 200:
            self.local(cand.status, cand.reason)
            return
        backend = cand.backends.pick()
        if not backend.resolved:
            # Spec 003: an unresolved reference "keeps its slot and its weight, and its share
            # of the traffic answers with a fixed 500".
            self.local(500, backend.unresolved_reason or "backend reference not resolved")
            return
        picker = tables.endpoints.get(backend.endpoints)
        if picker is None or not picker.origins:
            self.local(503, f"no ready endpoints for {backend.endpoints}")
            return
        bplan = self.bplan = plan.backends[id(backend)]
        self.picker = picker
        self._build_head(cand, bplan, host, path, query)
        self._plan_mirrors(tables.endpoints, plan, bplan, host)
        self._arm_request_timer()
        self._attempt(picker.pick())

    def _build_head(
        self, cand: Candidate, bplan: BackendPlan, host: bytes, path: str, query: str
    ) -> None:
        target = self.url
        rewrite = bplan.rewrite
        if rewrite is not None:
            if rewrite.hostname:
                host = rewrite.hostname.encode("latin-1")
            if rewrite.path is not None:
                new = rewrite_path(path, rewrite.path, cand.match.path.value)
                target = (new + ("?" + query if query else "")).encode("latin-1")
        upgrade = _header(self.headers, b"upgrade") if self.upgrade else b""
        self.head, self.framing = heads.upstream_request(
            self.method,
            target,
            self.headers,
            host=host,
            client=self.conn.client,
            scheme=self.conn.scheme.encode(),
            plan=bplan.request,
            upgrade=upgrade,
        )
        retry = cand.rule.retry
        if (retry.attempts and self.method in IDEMPOTENT) or bplan.mirrors:
            self.replay = []

    def _plan_mirrors(
        self,
        endpoints: Mapping[str, EndpointPicker],
        plan: RulePlan,
        bplan: BackendPlan,
        host: bytes,
    ) -> None:
        for entry in (*plan.mirrors, *bplan.mirrors):
            if not entry.sampler.sample():
                continue
            picker = endpoints.get(entry.filter.backend.endpoints)
            origin = picker.pick() if picker is not None else None
            if origin is not None:
                self.mirrors.append((origin, host))
        if self.mirrors and self.replay is None:
            self.replay = []

    def _redirect(
        self, cand: Candidate, plan: RulePlan, host: bytes, path: str, query: str
    ) -> None:
        assert plan.redirect is not None
        if plan.redirect_request:
            for name, value in apply_plan(plan.redirect_request, [(b"host", host)]):
                if name.lower() == b"host":
                    host = value
        target = RequestTarget(
            self.conn.scheme, normalize_host(host.decode("latin-1")), path, query
        )
        location = redirect_location(
            plan.redirect,
            target,
            listener_port=cand.listener_port,
            matched_prefix=cand.match.path.value,
        )
        self.local_headers(plan.redirect.status_code, [("location", location)], plan)

    # ------------------------------------------------------------------ local answers

    def local(self, status: int, reason: str = "") -> None:
        self._write_local(status, responses.simple(status, reason, close=self._must_close()))

    def local_headers(self, status: int, headers: list[tuple[str, str]], plan: RulePlan) -> None:
        raw = apply_plan(plan.response, _encode(headers)) + self.cors
        text = [(n.decode("latin-1"), v.decode("latin-1")) for n, v in raw]
        self._write_local(status, responses.with_headers(status, text, close=self._must_close()))

    def _must_close(self) -> bool:
        # A body not read yet would have to be drained first (and an Expect: 100-continue
        # client may never send it): closing is simpler and always correct.
        if not self.request_done and _has_body(self.headers):
            self.keep_alive = False
        return not self.keep_alive

    def _write_local(self, status: int, data: bytes) -> None:
        self.status = status
        self.response_started = self.response_done = True
        self.discarding = True
        transport = self.conn.transport
        if transport is not None and not self.conn.closed:
            transport.write(data)
        self.conn.rt.stats.request(self.route, status)
        if self.request_done or not self.keep_alive:
            self._finish()

    # ------------------------------------------------------------------ request body

    def request_body(self, chunk: bytes) -> None:
        if self.discarding and self.response_done:
            return
        if self.replay is not None:
            self.replay.append(chunk)
            if sum(map(len, self.replay)) > self.conn.rt.config.replay_limit:
                self.replay = None
                self.mirrors.clear()
        upstream = self.upstream
        framed = self._frame(chunk)
        if upstream is not None:
            upstream.write(framed)
            return
        self.body.append(framed)
        self.pending += len(framed)
        if self.pending > flow.HIGH_WATER:
            self.conn.gate.pause(flow.BODY_WAIT)

    def _frame(self, chunk: bytes) -> bytes:
        if self.framing is not None and self.framing.chunked:
            return b"%x\r\n%b\r\n" % (len(chunk), chunk)
        return chunk

    def request_complete(self) -> None:
        self.request_done = True
        if self.framing is not None and self.framing.chunked:
            if self.upstream is not None:
                self.upstream.write(responses.LAST_CHUNK)
            else:
                self.body.append(responses.LAST_CHUNK)
        self._send_mirrors()
        if self.response_done:
            self._finish()

    def upgrade_data(self, rest: bytes) -> None:
        if rest:
            self.request_body(rest)

    # ------------------------------------------------------------------ attempts

    def _attempt(self, origin: Origin | None) -> None:
        if origin is None:
            self.local(503, "no ready endpoints")
            return
        self.origin = origin
        self.attempts += 1
        loop = self.conn.rt.loop
        self.started_at = loop.time()
        assert self.rule is not None
        per_attempt = self.rule.timeouts.backend_request_ms
        if per_attempt:
            self.attempt_timer = loop.call_later(per_attempt / 1000, self._timed_out)
        connection = self.conn.rt.connector.acquire(origin, self)
        if connection is not None:
            self.connected(connection)

    def connected(self, connection: UpstreamConnection) -> None:
        if self.finished or self.upstream is not None:
            self.conn.rt.connector.release(connection)
            return
        self.upstream = connection
        connection.bind(self, head_only=self.method == HEAD)
        body, self.body, self.pending = self.body, [], 0
        connection.write(self.head + b"".join(body) if body else self.head)
        self.conn.gate.resume(flow.BODY_WAIT)
        if self.conn.write_paused:
            connection.gate.pause(flow.PEER_FULL)

    def connect_failed(self, exc: Exception) -> None:
        if not self.finished:
            self._attempt_failed(errors.UpstreamUnavailable(f"connect to {self.origin}: {exc}"))

    def upstream_failed(self, exc: errors.DataplaneError) -> None:
        self.upstream = None
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
        rule = self.rule
        return (
            rule is not None
            and self.attempts <= rule.retry.attempts
            and self.method in IDEMPOTENT
            and self.replay is not None
        )

    def _retry(self) -> None:
        assert self.rule is not None and self.picker is not None and self.origin is not None
        self.discarding = False
        if self.upstream is not None:
            self.upstream.exchange = None
            self.upstream.close()
            self.upstream = None
        assert self.replay is not None
        self.body = [self._frame(c) for c in self.replay]
        if self.request_done and self.framing is not None and self.framing.chunked:
            self.body.append(responses.LAST_CHUNK)
        self.pending = 0
        origin = self.picker.others(self.origin)
        backoff = self.rule.retry.backoff_ms
        if backoff:
            self.attempt_timer = self.conn.rt.loop.call_later(backoff / 1000, self._attempt, origin)
        else:
            self._attempt(origin)

    def _arm_request_timer(self) -> None:
        assert self.rule is not None
        whole = self.rule.timeouts.request_ms
        if whole:
            self.request_timer = self.conn.rt.loop.call_later(whole / 1000, self._timed_out)

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
            self.upstream.exchange = None
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

    def response_head(self, status: int, raw: list[tuple[bytes, bytes]]) -> None:
        if status < 200 and status != 101:
            # Interim responses (100 Continue for an Expect: 100-continue request) pass on.
            self.out.append(heads.serialize(status, [], END))
            return
        self.conn.rt.stats.upstream_latency(self.conn.rt.loop.time() - self.started_at)
        rule = self.rule
        if rule is not None and status in rule.retry.codes and self._may_retry():
            self.discarding = True
            return
        self._cancel(attempt_only=True)
        self.status = status
        self.response_started = True
        assert self.bplan is not None
        kept, framing = heads.client_response(
            status, raw, plan=self.bplan.response, extra=self.cors, keep_upgrade=status == 101
        )
        self.out.append(heads.serialize(status, kept, self._framing_tail(status, framing)))

    def _framing_tail(self, status: int, framing: heads.ResponseFraming) -> bytes:
        if status == 101:
            return END
        if self.upgrade:
            self.keep_alive = False
        no_body = self.method == HEAD or status in NO_BODY_STATUS
        if not no_body and not framing.length:
            if framing.chunked_in or self.version != HTTP10:
                self.rechunk = True
                return CHUNKED_END if self.keep_alive else responses.CHUNKED + CLOSE_END
            self.keep_alive = False  # HTTP/1.0 client, body delimited by the close
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
        if upstream is not None:
            if keep_alive and self.request_done:
                self.conn.rt.connector.release(upstream)
            else:
                upstream.exchange = None
                upstream.close()
        if self.discarding:
            self._retry()
            return
        if self.rechunk:
            self.out.append(responses.LAST_CHUNK)
        self.response_done = True
        self._cancel()
        self.conn.rt.stats.request(self.route, self.status)
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
        self._cancel()
        self.finished = True
        upstream.exchange = None
        transport = self.conn.transport
        assert transport is not None
        upstream.tunnel = transport
        self.conn.become_tunnel(upstream.transport)
        upstream.gate.resume(flow.PEER_FULL)

    def flush(self) -> None:
        out = self.out
        if out:
            data = out[0] if len(out) == 1 else b"".join(out)
            out.clear()
            transport = self.conn.transport
            if transport is not None and not self.conn.closed:
                transport.write(data)

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

    # ------------------------------------------------------------------ the end

    def _finish(self) -> None:
        if self.finished:
            return
        self.finished = True
        self.flush()
        self._cancel()
        self.conn.finished(self, self.keep_alive)

    def abandon(self) -> None:
        """The client went away: stop everything this request holds."""
        self._cancel()
        self.finished = True
        if self.upstream is not None:
            self.upstream.exchange = None
            self.upstream.close()
            self.upstream = None
        elif self.origin is not None:
            self.conn.rt.connector.cancel(self.origin, self)

    def _send_mirrors(self) -> None:
        if not self.mirrors or self.replay is None:
            return
        body = b"".join(self.replay)
        for origin, host in self.mirrors:
            head, _ = heads.upstream_request(
                self.method,
                self.url,
                [(n, v) for n, v in self.headers if n.lower() not in _MIRROR_DROP],
                host=host,
                client=self.conn.client,
                scheme=self.conn.scheme.encode(),
                plan=(),
                close=True,
            )
            length = b"content-length: %d\r\n\r\n" % len(body)
            mirror.send(origin, head[:-2] + length, body)
        self.mirrors.clear()


_MIRROR_DROP = frozenset({b"content-length", b"transfer-encoding"})


class _Misdirected(errors.DataplaneError):
    status = 421


def _allowed_names(conn: HttpConnection, sni: tuple[str, tuple[str, ...]]) -> tuple[str, ...]:
    """The hostnames of the listener SNI selected; () when any Host is fine."""
    tables = conn.rt.tables
    info = tables.ports.get(conn.port) if tables is not None else None
    server_name = normalize_host(sni[0])
    if info is None or not info.hostnames:
        return ()  # an Ingress port, or only hostless listeners: nothing narrows the Host
    best = ""
    for pattern in info.hostnames:
        if _covers(pattern, server_name) and (not best or best.startswith("*.")):
            best = pattern
    if not best:
        return ()
    return (best,)


def _covers(pattern: str, host: str) -> bool:
    if pattern.startswith("*."):
        return host.endswith(pattern[1:]) and len(host) > len(pattern) - 1
    return pattern == host


def _header(headers: list[tuple[bytes, bytes]], wanted: bytes) -> bytes:
    for name, value in headers:
        if name.lower() == wanted:
            return value
    return b""


def _has_body(headers: list[tuple[bytes, bytes]]) -> bool:
    length = _header(headers, b"content-length").strip()
    return bool(length and length != b"0") or bool(_header(headers, b"transfer-encoding"))


def _encode(headers: list[tuple[str, str]]) -> list[tuple[bytes, bytes]]:
    return [(n.encode("latin-1"), v.encode("latin-1")) for n, v in headers]
