"""A request body without a declared length, counted against its rule's limit as it streams.

Where it sits: `gate` gives a chunked request on a rule with `max_body_bytes` a `BodyLimit` in
`RequestCycle.guard`; the cycle asks it of each piece of body it takes (the one hook the
policies have in the cycle), and ends the request with 413 when it says the body has grown
past the limit: answered, if no response has begun, and the upstream attempt cut off (the
backend never sees the chunked body's end, so it never reads a whole request).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from coxswain_proxy.dataplane.http.request_cycle import RequestCycle

__all__ = ["BodyLimit", "watch"]


class BodyLimit:
    __slots__ = ("left",)

    def __init__(self, limit: int) -> None:
        self.left = limit  # bytes the body may still carry

    def over(self, size: int) -> bool:
        """Count `size` more bytes of body; whether the body is now past the limit."""
        left = self.left = self.left - size
        return left < 0


def watch(cycle: RequestCycle, limit: int) -> None:
    cycle.guard = BodyLimit(limit)
