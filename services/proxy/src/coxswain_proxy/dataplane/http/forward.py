"""One request's journey, the client half: route, filters, local answers, the request body.

Where it sits: `http11.HttpConnection` creates an `Exchange` per request and calls `start()`
when its turn comes. `Exchange` routes, applies the rule's filters (CORS, redirect, header
plans, rewrite, mirrors), picks a backend and hands over to the upstream half it inherits from
`attempts.Attempts` (connect, retry, timeouts, the response). One object per request beyond its
bytes (conventions, item 4), driven by callbacks: no task, no await, no lock on the hot path.

Why the hot path looks the way it does: everything that depends only on the snapshot is in the
rule and backend plans (`tables`), and the strings the router needs (host, method, path, query)
are the only decoding a plain request pays for; header values are decoded only if a route or
filter asks (`LazyHeaders`).

Routing answers are remembered per snapshot (`Tables.memo`, like Kong's router cache): a request
with the port, Host, method and target of one routed before gets its outcome without the
router, which was most of what routing a repeated target cost. Routing depends on nothing else
but headers, so ports where some match tests headers keep no memo; entries and key sizes are
bounded, and a new snapshot starts with an empty memo.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING

from coxswain_proxy.dataplane import errors
from coxswain_proxy.dataplane.http import flow, heads, responses, targets
from coxswain_proxy.dataplane.http.attempts import HTTP10, IDEMPOTENT, Attempts
from coxswain_proxy.dataplane.stats import NO_ROUTE
from coxswain_proxy.dataplane.tables import BackendPlan, RulePlan, Tables, apply_plan
from coxswain_proxy.dataplane.upstream import mirror
from coxswain_routing import (
    RequestTarget,
    is_preflight,
    normalize_host,
    preflight_headers,
    redirect_location,
    response_headers,
    rewrite_path,
)

# What a request's `host` holds when it carried more than one Host field (answered 400 in its
# turn): llhttp admits no NUL in a field value, so no client can send this one.
MANY_HOSTS = b"\0"

if TYPE_CHECKING:
    from coxswain_routing import Candidate, Outcome

# What routing a request came to: the outcome, and the path and query it was routed by.
Matched = tuple["Outcome", str, str]

__all__ = ["NO_ROUTE", "Exchange", "LazyHeaders"]

# The match memo's bounds (`Tables.memo`): entries, and bytes of Host and target per entry.
MEMO_ENTRIES = 4096
MEMO_KEY_BYTES = 512

OPTIONS = targets.OPTIONS

# The methods requests use, decoded once: the router wants str.
_METHODS = {m: m.decode() for m in (b"GET", b"HEAD", b"POST", b"PUT", b"DELETE", b"OPTIONS",
                                    b"PATCH", b"TRACE", b"CONNECT")}  # fmt: skip


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


class Exchange(Attempts):
    __slots__ = ()

    # ------------------------------------------------------------------ routing

    def start(self) -> None:
        """Route the request, then send it on or answer it here (its turn has come)."""
        try:
            conn = self.conn
            tables = conn.rt.tables
            if tables is None:
                raise errors.UpstreamUnavailable("no routing snapshot received yet")
            # RFC 9112 §3.2: "A server MUST respond with a 400 (Bad Request) status code to any
            # HTTP/1.1 request message that lacks a Host header field and to any request
            # message that contains more than one Host header field line".
            raw_host = self.host
            if raw_host is None or raw_host is MANY_HOSTS:
                if raw_host is MANY_HOSTS or self.version != HTTP10:
                    raise errors.BadRequest("exactly one Host header is required")
                raw_host = b""
            if self.url[:1] != b"/":
                raw_host, self.url = targets.other_form(self.method, self.url, raw_host)
                if self.url == targets.ASTERISK:
                    self._answer_options()
                    return
            key = (conn.port, raw_host, self.method, self.url)
            matched = tables.memo.get(key)
            if matched is None:
                matched = self._match(tables, key)
            if conn.sni is not None:
                self._check_misdirected(raw_host.decode("latin-1"))
            outcome, path, query = matched
            if outcome.rule is None:
                self.local(outcome.status, outcome.reason)
            else:
                self._serve(tables, outcome, raw_host, path, query)
        except errors.DataplaneError as exc:
            if exc.status == 400:
                self.keep_alive = False  # a client this confused may be out of step: stop here
            self.local(exc.status, str(exc))

    def _match(self, tables: Tables, key: tuple[int, bytes, bytes, bytes]) -> Matched:
        """Check the request, ask the router; remember the answer when nothing but `key`
        decided it (so a memo key holds a Host and target that passed the checks)."""
        port, raw_host, raw_method, url = key
        if raw_method in targets.REFUSED_METHODS:
            raise errors.MethodNotAllowed(f"{raw_method.decode()} is not served")
        if not targets.valid_host(raw_host):
            raise errors.BadRequest("the Host is not uri-host[:port]")
        if not targets.valid_target(url):
            raise errors.BadRequest("a fragment in the request-target")
        mark = url.find(b"?")
        if mark < 0:
            path, query = url.decode("latin-1"), ""
        else:
            path, query = url[:mark].decode("latin-1"), url[mark + 1 :].decode("latin-1")
        method = _METHODS.get(raw_method) or raw_method.decode("latin-1")
        host = raw_host.decode("latin-1")
        outcome = tables.router.match(port, host, method, path, LazyHeaders(self.headers), query)
        matched = (outcome, path, query)
        if port not in tables.no_memo and len(url) + len(raw_host) <= MEMO_KEY_BYTES:
            memo = tables.memo
            if len(memo) >= MEMO_ENTRIES:
                memo.clear()  # a crude bound, but O(1) per request: hot targets come back
            memo[key] = matched
        return matched

    def _answer_options(self) -> None:
        """OPTIONS answered as the final recipient: what the proxy forwards (RFC 9110 §9.3.7)."""
        allow = [("allow", responses.METHODS.decode())]
        self._write_local(200, responses.with_headers(200, allow, close=self._must_close()))

    def _check_misdirected(self, host: str) -> None:
        """Issue 7, item 4: 421 when the Host falls outside the SNI-selected listener's names."""
        conn = self.conn
        assert conn.sni is not None
        tables = conn.rt.tables
        info = tables.ports.get(conn.port) if tables is not None else None
        allowed = targets.sni_names(info.hostnames if info is not None else (), conn.sni[0])
        if allowed and not any(targets.covers(p, normalize_host(host)) for p in allowed):
            self.status = 421
            raise _Misdirected("the Host is not served by the certificate's listener")

    def _serve(self, tables: Tables, cand: Candidate, host: bytes, path: str, query: str) -> None:
        plan = self.plan = tables.plans[id(cand.rule)]
        self.route = plan.route
        if plan.cors is not None:
            lazy = LazyHeaders(self.headers)
            if is_preflight(self.method.decode(), lazy):
                self.local_headers(204, preflight_headers(plan.cors, lazy), plan)
                return
            self.cors = _encode(response_headers(plan.cors, lazy))
        if self.method == OPTIONS:
            forwarded = targets.forwards(self.headers)
            if forwarded is None:
                self._answer_options()
                return
            self.headers = forwarded
        if plan.redirect is not None:
            self._redirect(cand, plan, host, path, query)
            return
        if cand.status != 200:
            self.local(cand.status, cand.reason)
            return
        only = plan.only
        if only is not None:
            backend, bplan = only
        else:
            backend = cand.backends.pick()
            bplan = plan.backends[id(backend)]
            if not backend.resolved:
                # Spec 003: an unresolved reference "keeps its slot and its weight, and its
                # share of the traffic answers with a fixed 500".
                self.local(500, backend.unresolved_reason or "backend reference not resolved")
                return
        # Tables.picker, inlined.
        if bplan.own_picker:
            picker = tables.own_pickers.get(id(backend))
        else:
            picker = tables.endpoints.get(backend.endpoints)
        if picker is None or not picker.origins:
            self.local(503, f"no ready endpoints for {backend.endpoints}")
            return
        self.bplan = bplan
        self.picker = picker
        self._build_head(cand, plan, bplan, host, path, query)
        if plan.mirrors or bplan.mirrors:
            self._plan_mirrors(tables, plan, bplan, host)
        if plan.request_timeout:
            self._arm_request_timer(plan.request_timeout)
        self._attempt(picker.pick())

    def _build_head(
        self,
        cand: Candidate,
        plan: RulePlan,
        bplan: BackendPlan,
        host: bytes,
        path: str,
        query: str,
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
        headers = self.headers
        http10 = self.version == HTTP10
        if http10:
            # RFC 9110 §10.1.1: "A server that receives a 100-continue expectation in an
            # HTTP/1.0 request MUST ignore that expectation": nor is it asked of the next hop.
            headers = [(n, v) for n, v in headers if n.lower() != b"expect"]
        self.head, self.chunked = heads.upstream_request(
            self.method,
            target,
            headers,
            host=host,
            forwarded=self.conn.forwarded,
            plan=bplan.request,
            upgrade=upgrade,
            http10=http10,
        )
        if (plan.retries and self.method in IDEMPOTENT) or bplan.mirrors:
            self.replay = []

    def _plan_mirrors(
        self,
        tables: Tables,
        plan: RulePlan,
        bplan: BackendPlan,
        host: bytes,
    ) -> None:
        for entry in (*plan.mirrors, *bplan.mirrors):
            if not entry.sampler.sample():
                continue
            picker = tables.picker(entry.filter.backend)
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
        conn = self.conn
        if conn.transport is not None and not conn.closed:
            conn.outbox.write(conn.transport, data)
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
        framed = b"%x\r\n%b\r\n" % (len(chunk), chunk) if self.chunked else chunk
        if upstream is not None:
            upstream.write(framed)
            return
        self.body.append(framed)
        self.pending += len(framed)
        if self.pending > flow.HIGH_WATER:
            self.conn.gate.pause(flow.BODY_WAIT)

    def _frame(self, chunk: bytes) -> bytes:
        if self.chunked:
            return b"%x\r\n%b\r\n" % (len(chunk), chunk)
        return chunk

    def request_complete(self) -> None:
        self.request_done = True
        if self.chunked:
            if self.upstream is not None:
                self.upstream.write(responses.LAST_CHUNK)
            else:
                self.body.append(responses.LAST_CHUNK)
        if self.mirrors:
            self._send_mirrors()
        if self.response_done:
            self._finish()

    def upgrade_data(self, rest: bytes) -> None:
        # What follows an Upgrade request belongs to the new protocol, if the upstream agrees:
        # held until its 101. Sent on before, an upstream that declines would read it as a
        # request of its own, one the proxy never routed (reading pauses meanwhile).
        self.held = rest

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
                forwarded=self.conn.forwarded,
                plan=(),
                close=True,
                http10=self.version == HTTP10,
            )
            length = b"content-length: %d\r\n\r\n" % len(body)
            mirror.send(origin, head[:-2] + length, body)
        self.mirrors.clear()


_MIRROR_DROP = frozenset({b"content-length", b"transfer-encoding"})


class _Misdirected(errors.DataplaneError):
    status = 421


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
