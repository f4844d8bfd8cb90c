"""What becomes of a request: route it, apply its rule's filters, answer it here or send it on.

Where it sits: `http11.HttpConnection` calls `start(cycle)` when a request's turn comes. It
checks the Host and target, asks the router (`coxswain_routing`), then applies what the rule
says: CORS, redirect, header plans, rewrite, mirrors, the weighted backend pick, and what the
picked slot's own filters say (its redirect answers in place of its backend). It ends in one
of two ways: an answer made here (`RequestCycle.local`, `local_headers`, `answer`), or the
routing decision written into the cycle (plans, picker, the head to send upstream, mirrors) and
its first attempt made (`RequestCycle.attempt`), after which the cycle runs on its own
(`request_cycle`). Runs once per request, on the event loop, before any upstream I/O.

Why functions over the cycle, not a class: the request path allocates one object per request
(conventions, item 4); deciding is a step in that object's life, not a second object, and its
result lives in that object's slots. The dependency points one way: this module calls the cycle,
the cycle never calls this.

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

from coxswain_proxy.dataplane import errors
from coxswain_proxy.dataplane.http import corsfields, heads, responses, targets
from coxswain_proxy.dataplane.http.heads import HTTP10
from coxswain_proxy.dataplane.http.policies import affinity, client_cert, gate, guard
from coxswain_proxy.dataplane.http.request_cycle import IDEMPOTENT, RequestCycle
from coxswain_proxy.dataplane.tables import BackendPlan, BytesPlan, RulePlan, Tables, apply_plan
from coxswain_routing import (
    Candidate,
    Cors,
    Outcome,
    RequestRedirect,
    RequestTarget,
    exposes_response_fields,
    host_pattern_covers,
    is_preflight,
    normalize_host,
    preflight_headers,
    redirect_location,
    response_headers,
    rewrite_path,
)

# What a request's `host` holds when it carried more than one Host field (answered 400 in its
# turn); the parser compares by identity.
MANY_HOSTS = b"\0"

# What routing a request came to: the outcome, and the path and query it was routed by.
Matched = tuple[Outcome, str, str]

__all__ = ["MANY_HOSTS", "LazyHeaders", "start"]

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


# ---------------------------------------------------------------------- routing


def start(cycle: RequestCycle) -> None:
    """Route the request, then send it on or answer it here (its turn has come)."""
    try:
        conn = cycle.conn
        tables = cycle.rt.tables
        if tables is None:
            raise errors.UpstreamUnavailable("no routing snapshot received yet")
        # RFC 9112 §3.2: "A server MUST respond with a 400 (Bad Request) status code to any
        # HTTP/1.1 request message that lacks a Host header field and to any request
        # message that contains more than one Host header field line".
        raw_host = cycle.host
        if raw_host is None or raw_host is MANY_HOSTS:
            if raw_host is MANY_HOSTS or cycle.version != HTTP10:
                raise errors.BadRequest("exactly one Host header is required")
            raw_host = b""
        if cycle.url[:1] != b"/":
            raw_host, cycle.url = targets.other_form(cycle.method, cycle.url, raw_host)
            if cycle.url == targets.ASTERISK:
                _answer_options(cycle)
                return
        key = (conn.port, raw_host, cycle.method, cycle.url)
        matched = tables.memo.get(key)
        if matched is None:
            matched = _match(tables, key, cycle.headers)
        sni = conn.sni
        if sni is not None:
            outside = tables.misdirected.get((conn.port, sni[0], raw_host))
            if outside is None:
                outside = _misdirected(tables, conn.port, sni[0], raw_host)
            if outside:
                raise _Misdirected("the Host is not served by the certificate's listener")
        outcome, path, query = matched
        if outcome.rule is None:
            cycle.local(outcome.status, outcome.reason)
        else:
            _serve(cycle, tables, outcome, raw_host, path, query)
    except errors.DataplaneError as exc:
        if exc.status == 400:
            cycle.keep_alive = False  # a client this confused may be out of step: stop here
        cycle.local(exc.status, str(exc))


def _match(
    tables: Tables, key: tuple[int, bytes, bytes, bytes], headers: list[tuple[bytes, bytes]]
) -> Matched:
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
    outcome = tables.router.match(port, host, method, path, LazyHeaders(headers), query)
    matched = (outcome, path, query)
    if port not in tables.no_memo and len(url) + len(raw_host) <= MEMO_KEY_BYTES:
        memo = tables.memo
        if len(memo) >= MEMO_ENTRIES:
            memo.clear()  # a crude bound, but O(1) per request: hot targets come back
        memo[key] = matched
    return matched


def _answer_options(cycle: RequestCycle) -> None:
    """OPTIONS answered as the final recipient: what the proxy forwards (RFC 9110 §9.3.7)."""
    allow = [("allow", responses.METHODS.decode())]
    cycle.answer(200, responses.with_headers(200, allow, close=cycle.must_close()))


def _misdirected(tables: Tables, port: int, server_name: str, raw_host: bytes) -> bool:
    """Issue 7, item 4: whether the Host falls outside the SNI-selected listener's names (a
    421), remembered for the next request with the same three."""
    info = tables.ports.get(port)
    allowed = targets.sni_names(info.hostnames if info is not None else (), server_name)
    host = normalize_host(raw_host.decode("latin-1"))
    outside = bool(allowed) and not any(host_pattern_covers(p, host) for p in allowed)
    if len(raw_host) + len(server_name) <= MEMO_KEY_BYTES:
        memo = tables.misdirected
        if len(memo) >= MEMO_ENTRIES:
            memo.clear()
        memo[(port, server_name, raw_host)] = outside
    return outside


# ---------------------------------------------------------------------- the rule's filters


def _serve(
    cycle: RequestCycle, tables: Tables, cand: Candidate, host: bytes, path: str, query: str
) -> None:
    """The rule's CORS, OPTIONS, redirect and policies; then `_send`."""
    plan = cycle.plan = tables.plans[id(cand.rule)]
    cycle.route = plan.route
    policy = plan.policy
    if policy is not None:
        if policy.access_log:
            guard.log(cycle)  # the rule keeps an access log: a line once the request is over
        # The client certificate, before anything else the rule does (421, 400, 403).
        if policy.client is not None and not client_cert.admit(cycle, policy.client):
            return
    if plan.cors is not None and _cors(cycle, plan, plan.cors):
        return
    if cycle.method == OPTIONS:
        forwarded = targets.forwards(cycle.headers)
        if forwarded is None:
            _answer_options(cycle)
            return
        cycle.headers = forwarded
    redirect = plan.redirect
    if redirect is not None:
        target = _redirect_target(cycle, plan.redirect_request, host, path, query)
        _redirect(cycle, cand, redirect, target, plan.response)
        return
    if cand.status != 200:
        cycle.local(cand.status, cand.reason)
        return
    if policy is not None:
        # The rule's policies (access lists, limits, auth): the one hook they have here.
        verdict = gate.admit(cycle, tables, policy)
        if verdict is not True:
            if verdict is not False:
                verdict.then(_resume, cycle, tables, cand, plan, host, path, query)
            return
    _send(cycle, tables, cand, plan, host, path, query)


def _resume(
    cycle: RequestCycle,
    tables: Tables,
    cand: Candidate,
    plan: RulePlan,
    host: bytes,
    path: str,
    query: str,
) -> None:
    """`_send` for a request a policy held (external auth, bcrypt) and has now let through."""
    try:
        _send(cycle, tables, cand, plan, host, path, query)
    except errors.DataplaneError as exc:
        cycle.local(exc.status, str(exc))


def _send(
    cycle: RequestCycle,
    tables: Tables,
    cand: Candidate,
    plan: RulePlan,
    host: bytes,
    path: str,
    query: str,
) -> None:
    """Pick the backend slot and its endpoint, build the head, make the first attempt."""
    policy = plan.policy
    only = plan.only
    pinned = None
    if only is not None and (policy is None or not policy.picks):
        backend, bplan = only
    else:
        if policy is not None and policy.affinity is not None:
            pinned = policy.affinity.pinned(cycle, tables, cand.rule.backends)
        if pinned is not None:
            backend = pinned[0]
        elif policy is not None and policy.split is not None:
            backend = affinity.split_pick(cycle, cand, policy.split)
        else:
            backend = cand.backends.pick()
        bplan = plan.backends[id(backend)]
        if not backend.resolved:
            # Spec 003: an unresolved reference "keeps its slot and its weight, and its
            # share of the traffic answers with a fixed 500".
            cycle.local(500, backend.unresolved_reason or "backend reference not resolved")
            return
    redirect = bplan.redirect
    if redirect is not None:
        # Spec 003 "Filters": a redirect "ends the request"; filters on a backendRef "apply
        # after" the rule's, to the requests that reference receives. The slot's redirect
        # answers them, with the rule's and the slot's response modifiers, and its backend is
        # never asked.
        target = _redirect_target(cycle, bplan.redirect_request, host, path, query)
        _redirect(cycle, cand, redirect, target, bplan.response)
        return
    # Tables.picker, inlined.
    if bplan.own_picker:
        picker = tables.own_pickers.get(id(backend))
    else:
        picker = tables.endpoints.get(backend.endpoints)
    if picker is None or not picker.origins:
        cycle.local(503, f"no ready endpoints for {backend.endpoints}")
        return
    cycle.bplan = bplan
    cycle.picker = picker
    _build_head(cycle, cand, plan, bplan, host, path, query)
    if plan.mirrors or bplan.mirrors:
        _plan_mirrors(cycle, tables, plan, bplan, host)
    if plan.request_timeout:
        cycle.arm_request_timer(plan.request_timeout)
    if policy is None or policy.affinity is None:
        cycle.attempt(picker.pick())
        return
    origin = pinned[1] if pinned is not None else picker.pick()
    if pinned is None and origin is not None:
        policy.affinity.remember(cycle, origin)
    cycle.attempt(origin)


def _build_head(
    cycle: RequestCycle,
    cand: Candidate,
    plan: RulePlan,
    bplan: BackendPlan,
    host: bytes,
    path: str,
    query: str,
) -> None:
    target = cycle.url
    rewrite = bplan.rewrite
    if rewrite is not None:
        if rewrite.hostname:
            host = rewrite.hostname.encode("latin-1")
        if rewrite.path is not None:
            new = rewrite_path(path, rewrite.path, cand.match.path.value)
            target = (new + ("?" + query if query else "")).encode("latin-1")
    upgrade = heads.header(cycle.headers, b"upgrade") if cycle.upgrade else b""
    headers = cycle.headers
    http10 = cycle.version == HTTP10
    if http10:
        # RFC 9110 §10.1.1: "A server that receives a 100-continue expectation in an
        # HTTP/1.0 request MUST ignore that expectation": nor is it asked of the next hop.
        headers = [(n, v) for n, v in headers if n.lower() != b"expect"]
    cycle.head, cycle.chunked = heads.upstream_request(
        cycle.method,
        target,
        headers,
        host=host,
        forwarded=cycle.conn.forwarded,
        plan=bplan.request,
        upgrade=upgrade,
        http10=http10,
    )
    if (plan.retries and cycle.method in IDEMPOTENT) or bplan.mirrors:
        cycle.replay = []


def _plan_mirrors(
    cycle: RequestCycle, tables: Tables, plan: RulePlan, bplan: BackendPlan, host: bytes
) -> None:
    for entry in (*plan.mirrors, *bplan.mirrors):
        if not entry.sampler.sample():
            continue
        picker = tables.picker(entry.filter.backend)
        origin = picker.pick() if picker is not None else None
        if origin is not None:
            cycle.mirrors.append((origin, host))
    if cycle.mirrors and cycle.replay is None:
        cycle.replay = []


def _redirect_target(
    cycle: RequestCycle, request: BytesPlan, host: bytes, path: str, query: str
) -> RequestTarget:
    """The request a redirect answers: as the request modifiers before it left it (spec 003:
    "a Host it sets is the Location's hostname when the redirect names none")."""
    if request:
        for name, value in apply_plan(request, [(b"host", host)]):
            if name.lower() == b"host":
                host = value
    return RequestTarget(cycle.conn.scheme, normalize_host(host.decode("latin-1")), path, query)


def _redirect(
    cycle: RequestCycle,
    cand: Candidate,
    redirect: RequestRedirect,
    target: RequestTarget,
    response: BytesPlan,
) -> None:
    location = redirect_location(
        redirect,
        target,
        listener_port=cand.listener_port,
        matched_prefix=cand.match.path.value,
    )
    _answer_with(cycle, redirect.status_code, [("location", location)], response)


def _answer_with(
    cycle: RequestCycle, status: int, headers: list[tuple[str, str]], response: BytesPlan
) -> None:
    """`RequestCycle.local_headers` with the response modifiers given: a backend slot's
    answer gets the rule's and the slot's (`BackendPlan.response`)."""
    raw = apply_plan(response, heads.encoded(headers)) + cycle.cors
    text = [(n.decode("latin-1"), v.decode("latin-1")) for n, v in raw]
    cycle.answer(status, responses.with_headers(status, text, close=cycle.must_close()))


# ---------------------------------------------------------------------- CORS


def _cors(cycle: RequestCycle, plan: RulePlan, cors: Cors) -> bool:
    """Answer a preflight here (True), or keep the fields the response gets (`cycle.cors`).

    HTTPCORSFilter: "The status code of a successful response to a "preflight" request is
    always an OK status (i.e., 204 or 200)"; the Gateway API's HTTPRouteCORS conformance
    scenario takes 200 only for some of its cases, so 200 it is, with an empty body. A
    disallowed origin's preflight gets the same 200 without CORS fields, which the browser
    reads as no.
    """
    lazy = LazyHeaders(cycle.headers)
    if is_preflight(cycle.method.decode(), lazy):
        _answer_with(cycle, 200, preflight_headers(cors, lazy), plan.response)
        return True
    fields = heads.encoded(response_headers(cors, lazy))
    allowed = len(fields) > 1  # more than Vary: the origin is allowed
    if allowed and exposes_response_fields(cors):
        fields.append((corsfields.EXPOSE_HEADERS, corsfields.RESPONSE_FIELD_NAMES))
    cycle.cors = fields
    return False


class _Misdirected(errors.DataplaneError):
    status = 421
