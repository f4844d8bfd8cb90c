"""The gate every request of a rule with a policy passes before its pick.

Where it sits: `tables.rule_plan` compiles a rule's `Policy` into a `compiled_policy.Compiled`
(once per snapshot, off the request path); `dispatch` calls `admit` after routing, the rule's
CORS preflight and its redirect, and before a backend is picked. Most rules have no policy, and
pay one attribute test for it.

The stages, in order (each answers the request itself when it refuses it):
  source ranges (403) -> body size by Content-Length (413) -> requests in flight per client
  (429) -> rate limits (429 with Retry-After) -> basic auth (401) -> external auth
nginx's order is close: its size check comes first of all, and its limits before access; the
address lists come first here so a client refused by address costs nothing else. A rule's
client certificate (`client_cert`) is checked before all of them, and before the rule's CORS
and redirect too (`dispatch` calls it first): nginx checks it as the request is read.

`admit` answers True (go on now), False (answered here), or a `Waiting` whose `then` is called
with the rest of dispatch once an asynchronous stage (bcrypt, the auth service) lets the
request through; nothing is allocated for that unless such a stage runs.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from coxswain_proxy.dataplane.http import heads
from coxswain_proxy.dataplane.http.phases import WAITING
from coxswain_proxy.dataplane.http.policies import answers, basic, guard
from coxswain_proxy.dataplane.http.policies.access import client_address
from coxswain_proxy.dataplane.http.policies.extauth import AuthCall

if TYPE_CHECKING:
    from coxswain_proxy.dataplane.http.policies.compiled_policy import Compiled
    from coxswain_proxy.dataplane.http.policies.guard import Guarded
    from coxswain_proxy.dataplane.tables import Tables

__all__ = ["Waiting", "admit"]

_CONTENT_LENGTH = b"content-length"
_AUTHORIZATION = b"authorization"
_ROUTE_KEY = b""  # the one key of a per-route bucket
BASIC, EXTERNAL = 5, 6  # the asynchronous stages, by the order they run in


class Waiting:
    """A request held by an asynchronous stage; `then(go, *args)` says how it goes on."""

    __slots__ = ("cycle", "tables", "policy", "go", "args")

    def __init__(self, cycle: Guarded, tables: Tables, policy: Compiled) -> None:
        self.cycle = cycle
        self.tables = tables
        self.policy = policy
        self.go: Callable[..., None] | None = None
        self.args: tuple[Any, ...] = ()

    def then(self, go: Callable[..., None], *args: Any) -> None:
        self.go, self.args = go, args

    def resume(self, stage: int) -> None:
        """The stage before `stage` let the request through: the rest, then dispatch's."""
        cycle = self.cycle
        if cycle.phase != WAITING or self.go is None:
            return  # the client left meanwhile
        verdict = _stages(cycle, self.tables, self.policy, stage, self)
        if verdict is True:
            self.go(*self.args)


def admit(cycle: Guarded, tables: Tables, policy: Compiled) -> bool | Waiting:
    """Whether the request goes on now (True), was answered (False), or waits (`Waiting`)."""
    return _stages(cycle, tables, policy, 0, None)


def _stages(
    cycle: Guarded, tables: Tables, policy: Compiled, stage: int, waiting: Waiting | None
) -> bool | Waiting:
    if stage < BASIC and not _limits(cycle, policy):
        return False
    if stage <= BASIC and policy.basic is not None:
        verdict = _basic(cycle, tables, policy, policy.basic, waiting)
        if verdict is not True:
            return verdict
    if stage <= EXTERNAL and policy.external is not None:
        held = waiting or Waiting(cycle, tables, policy)

        def authorized(ok: bool) -> None:
            if ok:
                held.resume(EXTERNAL + 1)

        AuthCall(cycle, policy.external, authorized).start(tables)
        return held
    return True


def _limits(cycle: Guarded, policy: Compiled) -> bool:
    """The synchronous stages; False when one answered the request."""
    address = client_address(cycle.conn.forwarded)
    sources = policy.sources
    if sources is not None and not sources.allows(address):
        answers.refuse(cycle, 403, "the client address is not allowed here")
        return False
    if policy.max_body and not _body_fits(cycle, policy.max_body):
        return False
    in_flight = policy.in_flight
    if in_flight is not None and not in_flight.admit(address, cycle):
        answers.refuse(cycle, 429, "too many requests in flight from this address", _RETRY_1)
        return False
    if policy.rates:
        now = cycle.rt.loop.time()
        for rate in policy.rates:
            if rate.exempt is not None and address in rate.exempt:
                continue
            wait = rate.buckets.take(address if rate.per_client else _ROUTE_KEY, now)
            if wait:
                answers.refuse(cycle, 429, "rate limited", [("retry-after", str(wait))])
                return False
    return True


_RETRY_1 = [("retry-after", "1")]


def _body_fits(cycle: Guarded, limit: int) -> bool:
    """RFC 9110 §15.5.14: "The 413 (Content Too Large) status code indicates that the server
    is refusing to process a request because the request content is larger than the server is
    willing or able to process." A declared length is judged now; a body without one (chunked)
    is counted as it streams (`guard`)."""
    length = heads.header(cycle.headers, _CONTENT_LENGTH).strip()
    if length:
        if length.isdigit() and int(length) > limit:
            answers.refuse(cycle, 413, f"the request body is larger than {limit} bytes")
            return False
        return True
    if heads.header(cycle.headers, b"transfer-encoding"):
        guard.watch(cycle, limit)
    return True


def _basic(
    cycle: Guarded,
    tables: Tables,
    policy: Compiled,
    check: basic.BasicCheck,
    waiting: Waiting | None,
) -> bool | Waiting:
    verdict = check.check(heads.header(cycle.headers, _AUTHORIZATION))
    if verdict == basic.PASSED:
        return True
    if verdict == basic.BUSY:
        answers.refuse(cycle, 503, "too many credentials being verified", _RETRY_1)
        return False
    if verdict == basic.DENIED:
        answers.refuse(cycle, 401, "authentication required", check.challenge)
        return False
    assert isinstance(verdict, asyncio.Future)
    held = waiting or Waiting(cycle, tables, policy)

    def verified(future: asyncio.Future[bool]) -> None:
        if cycle.phase != WAITING:
            return
        if not future.cancelled() and future.exception() is None and future.result():
            held.resume(BASIC + 1)
        else:
            answers.refuse(cycle, 401, "authentication required", check.challenge)

    verdict.add_done_callback(verified)
    return held
