"""External auth: the request's head sent to an auth service, its answer deciding the request.

Where it sits: `gate.admit` starts an `AuthCall` for a rule with an `ExternalAuth` and waits
(the request stays `WAITING`; its body, if any, is held as for a request waiting for an
upstream connection). The call borrows a connection from the proxy's own pool
(`contracts.Connector`) to an endpoint of the auth Service, as a request cycle does, and is
driven by the same callbacks (`contracts.Waiter`, `contracts.UpstreamCallbacks`): no task, no
await, nothing blocking.

What it sends (ingress-nginx's auth_request location): the client's method (or the policy's),
the auth URL's path, the client's header fields without its body's framing, and
X-Original-URL, X-Original-Method, X-Auth-Request-Redirect and X-Forwarded-For beside them.
What it does with the answer:
- 2xx: the request goes on, with each of `response_headers` the answer carries set on it;
- 401 and 403: the client gets that status, the answer's WWW-Authenticate with a 401 (a
  `signin` URL turns the 401 into a 302 there, with `rd=` the original URL);
- anything else, a failure or the time running out: 500, as nginx answers an auth_request
  that fails.
The Gateway API's ExternalAuth filter (style `EXT_AUTHZ`) asks and reads otherwise, in
`extauthz`; the exchange, its failures (500: the filter fails closed) and its bound are the
same.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING
from urllib.parse import quote

from coxswain_proxy.dataplane import errors
from coxswain_proxy.dataplane.http import heads
from coxswain_proxy.dataplane.http.phases import WAITING
from coxswain_proxy.dataplane.http.policies import answers, extauthz
from coxswain_proxy.dataplane.http.policies.access import client_address
from coxswain_routing import ExternalAuth

if TYPE_CHECKING:
    from coxswain_proxy.dataplane.contracts import Upstream
    from coxswain_proxy.dataplane.http.policies.compiled_policy import ExternalCheck
    from coxswain_proxy.dataplane.http.policies.policed import PolicedCycle
    from coxswain_proxy.dataplane.tables import Tables
    from coxswain_proxy.dataplane.upstream.picker import Origin

__all__ = ["AuthCall"]

# The client's fields the auth request does not carry: its body stays with the client.
_DROPPED = frozenset({b"content-length", b"transfer-encoding", b"expect", b"host"})
_WWW_AUTHENTICATE = b"www-authenticate"


def original_url(cycle: PolicedCycle) -> str:
    host = heads.header(cycle.headers, b"host") or (cycle.host or b"")
    return f"{cycle.conn.scheme}://{host.decode('latin-1')}{cycle.url.decode('latin-1')}"


def signin_location(cycle: PolicedCycle, auth: ExternalAuth) -> str:
    """The sign-in URL with its nginx variables filled in, and `rd=` added unless it has one."""
    url = original_url(cycle)
    host = (cycle.host or b"").decode("latin-1")
    uri = cycle.url.decode("latin-1")
    filled = (
        auth.signin.replace("$escaped_request_uri", quote(uri, safe=""))
        .replace("$request_uri", uri)
        .replace("$http_host", host)
        .replace("$host", host.rsplit(":", 1)[0] if not host.endswith("]") else host)
        .replace("$scheme", cycle.conn.scheme)
    )
    param = auth.signin_redirect_param
    query = filled.partition("?")[2]
    if any(part.split("=", 1)[0] == param for part in query.split("&")):
        return filled
    return f"{filled}{'&' if '?' in filled else '?'}{param}={quote(url, safe='')}"


class AuthCall:
    """One auth exchange for one request; `done(ok)` is called once, on the event loop."""

    __slots__ = ("cycle", "check", "done", "upstream", "status", "found", "timer", "over",
                 "origin", "challenge", "waiting", "body", "kept")  # fmt: skip

    def __init__(
        self, cycle: PolicedCycle, check: ExternalCheck, done: Callable[[bool], None]
    ) -> None:
        self.cycle = cycle
        self.check = check
        self.done = done
        self.upstream: Upstream | None = None
        self.status = 0
        self.found: list[tuple[bytes, bytes]] = []  # the answer's fields to copy
        self.challenge = b""  # the answer's WWW-Authenticate, for a 401
        self.timer: asyncio.TimerHandle | None = None
        self.over = False
        self.origin: Origin | None = None
        self.waiting = False  # in the pool's queue for a connection
        self.body: list[bytes] = []  # ext_authz: a denial's body, for the client
        self.kept = 0  # its bytes; past `extauthz.MAX_DENIAL_BODY`, -1 (too long)

    def start(self, tables: Tables) -> None:
        picker = tables.endpoints.get(self.check.endpoints)
        origin = picker.pick() if picker is not None else None
        if origin is None:
            self._end(500, "no ready endpoint for the external auth service")
            return
        self.origin = origin
        rt = self.cycle.rt
        self.timer = rt.loop.call_later(self.check.timeout, self._timed_out)
        connection = rt.connector.acquire(origin, self)
        if connection is not None:
            self.connected(connection)
        else:
            self.waiting = True

    def _head(self) -> bytes:
        cycle = self.cycle
        if self.check.ext_authz:
            return extauthz.head(cycle, self.check)
        fields = [(n, v) for n, v in cycle.headers if n.lower() not in _DROPPED]
        fields += (
            (b"x-original-url", original_url(cycle).encode("latin-1")),
            (b"x-original-method", cycle.method),
            (b"x-auth-request-redirect", cycle.url),
            (b"x-real-ip", client_address(cycle.conn.forwarded)),
        )
        head, _ = heads.upstream_request(
            self.check.method, self.check.target, fields, host=self.check.host,
            forwarded=cycle.conn.forwarded, plan=(),
        )  # fmt: skip
        return head

    # ------------------------------------------------------------------ Waiter

    def connected(self, connection: Upstream) -> None:
        self.waiting = False
        if self.over:
            self.cycle.rt.connector.release(connection)
            return
        self.upstream = connection
        method = self.cycle.method if self.check.ext_authz else self.check.method
        connection.bind(self, method == b"HEAD")
        connection.write(self._head())

    def connect_failed(self, exc: Exception) -> None:
        self.waiting = False
        self._end(500, f"the external auth service could not be reached: {exc}")

    # ------------------------------------------------------------------ UpstreamCallbacks

    def response_head(self, status: int, fields: heads.ResponseFields) -> None:
        if status < 200:
            return
        self.status = status
        pairs = fields.pairs()
        if self.check.ext_authz:
            self.found = extauthz.answer_fields(self.check, status, pairs)
            return
        copied = self.check.copied
        self.found = [(n, v) for n, v in pairs if n.lower() in copied]
        self.challenge = heads.header(pairs, _WWW_AUTHENTICATE) if status == 401 else b""

    def response_body(self, body: bytes) -> None:
        # The answer's body is not the client's, but for an ext_authz denial's.
        if self.check.ext_authz and self.status != 200 and self.kept >= 0:
            self.kept += len(body)
            if self.kept > extauthz.MAX_DENIAL_BODY:
                self.kept, self.body = -1, []
            else:
                self.body.append(body)

    def response_trailers(self, fields: list[tuple[bytes, bytes]]) -> None:
        pass

    def response_complete(self, keep_alive: bool) -> None:
        upstream, self.upstream = self.upstream, None
        if upstream is not None:
            if keep_alive:
                self.cycle.rt.connector.release(upstream)
            else:
                upstream.cycle = None
                upstream.close()
        self._decide()

    def upstream_failed(self, exc: errors.DataplaneError) -> None:
        self.upstream = None
        self._end(500, f"the external auth service failed: {exc}")

    def upstream_upgraded(self, rest: bytes) -> None:
        self._end(500, "the external auth service switched protocols")

    def flush(self) -> None:
        pass

    def upstream_writable(self, writable: bool) -> None:
        pass

    # ------------------------------------------------------------------ the verdict

    def _timed_out(self) -> None:
        self.timer = None
        self._end(500, "the external auth service did not answer in time")

    def _decide(self) -> None:
        status = self.status
        if self.check.ext_authz:
            self._ext_authz_verdict(status)
        elif 200 <= status < 300:
            if self._finish():
                _set_fields(self.cycle, self.found)
                self.done(True)
        elif status == 401 and self.check.auth.signin:
            if self._finish():
                location = signin_location(self.cycle, self.check.auth)
                answers.refuse(self.cycle, 302, "sign in first", [("location", location)])
                self.done(False)
        elif status in (401, 403):
            extra = (
                [("www-authenticate", self.challenge.decode("latin-1"))] if self.challenge else []
            )
            self._end(status, "the external auth service refused the request", extra)
        else:
            self._end(500, f"the external auth service answered {status}")

    def _ext_authz_verdict(self, status: int) -> None:
        if status == 200:
            if self._finish():
                _set_fields(self.cycle, self.found)
                self.done(True)
        elif self.kept < 0:
            limit = extauthz.MAX_DENIAL_BODY
            self._end(500, f"the external auth service's denial is over {limit} bytes")
        elif self._finish():
            extauthz.pass_on(self.cycle, status, self.found, b"".join(self.body))
            self.done(False)

    def _finish(self) -> bool:
        """End the exchange; whether the request still waits for its verdict."""
        if self.over:
            return False
        self.over = True
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        upstream, self.upstream = self.upstream, None
        if upstream is not None:
            upstream.cycle = None
            upstream.close()
        if self.waiting and self.origin is not None:
            self.waiting = False
            self.cycle.rt.connector.cancel(self.origin, self)
        return self.cycle.phase == WAITING

    def _end(self, status: int, reason: str, headers: list[tuple[str, str]] | None = None) -> None:
        if self._finish():
            answers.refuse(self.cycle, status, reason, headers)
            self.done(False)


def _set_fields(cycle: PolicedCycle, found: list[tuple[bytes, bytes]]) -> None:
    """The auth answer's fields replace the request's fields of the same names."""
    if not found:
        return
    names = {n.lower() for n, _ in found}
    cycle.headers = [(n, v) for n, v in cycle.headers if n.lower() not in names] + found
