"""What a policy watches over one request after dispatch: its chunked body, and its end.

Where it sits: `gate` gives a request a `Guard` in `RequestCycle.guard` when its rule has a
body size limit and the body has no declared length, or when the rule keeps an access log; the
cycle asks it of each piece of body it takes and tells it when the request is over (done or
abandoned), the hooks the policies have in the cycle. Past the limit the cycle ends the request
with 413: answered, if no response has begun, and the upstream attempt cut off (the backend
never sees the chunked body's end, so it never reads a whole request). At the end the access
log gets its line (`accesslog`).
"""

from __future__ import annotations

from typing import Protocol

from coxswain_proxy.dataplane.http.policies import accesslog
from coxswain_proxy.dataplane.http.policies.policed import PolicedCycle

__all__ = ["Guard", "Guarded", "log", "watch"]

UNLIMITED = -1


class Guard:
    __slots__ = ("left", "started")

    def __init__(self) -> None:
        self.left = UNLIMITED  # bytes the body may still carry
        self.started = 0.0  # when the request's turn came, for its access log line; 0: none

    def over(self, size: int) -> bool:
        """Count `size` more bytes of body; whether the body is now past the limit."""
        left = self.left
        if left == UNLIMITED:
            return False
        left = self.left = left - size
        return left < 0

    def done(self, cycle: PolicedCycle) -> None:
        """The request is over (answered, or abandoned)."""
        if self.started:
            accesslog.record(cycle, self.started)


class Guarded(PolicedCycle, Protocol):
    """A request cycle with the slot its guard is kept in (`RequestCycle.guard`)."""

    guard: Guard | None


def _guard(cycle: Guarded) -> Guard:
    guard = cycle.guard
    if guard is None:
        guard = cycle.guard = Guard()
    return guard


def watch(cycle: Guarded, limit: int) -> None:
    _guard(cycle).left = limit


def log(cycle: Guarded) -> None:
    _guard(cycle).started = cycle.rt.loop.time()
