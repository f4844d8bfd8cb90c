"""Reconnect delays for the discovery client: jittered exponential backoff, pure.

Where it sits: the stream loop asks `next_delay()` after every failed attempt and calls
`reset()` once a stream has delivered a snapshot. It holds no clock and never sleeps, so tests
feed it a chosen random function and read the delays.

Why the shape: docs/discovery.md, "The proxy's side": "retry with jittered exponential backoff
from 250 ms to 30 s (capped at 4 s while it holds a snapshot)". A proxy holding routing is
serving traffic on stale data, so it retries sooner than one that has nothing yet. The jitter is
"equal jitter": each delay lies between half its ceiling and the ceiling, so a fleet of proxies
spreads out after a controller restart, yet no delay collapses to zero (no hot loop).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class BackoffPolicy:
    initial: float = 0.25  # seconds: the first ceiling
    maximum: float = 30.0  # seconds: the ceiling while no snapshot is held
    holding_maximum: float = 4.0  # seconds: the ceiling while a snapshot is held
    multiplier: float = 2.0  # each failure multiplies the ceiling by this


class Backoff:
    """Consecutive-failure counter that turns into the next delay."""

    def __init__(
        self, policy: BackoffPolicy = BackoffPolicy(), rand: Callable[[], float] = random.random
    ) -> None:
        self._policy = policy
        self._rand = rand  # uniform in [0, 1); injectable for tests
        self._failures = 0

    @property
    def failures(self) -> int:
        return self._failures

    def ceiling(self, *, holding: bool) -> float:
        """The largest delay the next failure may wait."""
        p = self._policy
        cap = min(p.holding_maximum, p.maximum) if holding else p.maximum
        # min() before the power would overflow: beyond ~60 doublings the float is inf anyway.
        exponent = min(self._failures, 64)
        return min(cap, p.initial * p.multiplier**exponent)

    def next_delay(self, *, holding: bool) -> float:
        """The delay before the next attempt; counts one more failure."""
        ceiling = self.ceiling(holding=holding)
        self._failures += 1
        return ceiling / 2 + ceiling / 2 * self._rand()

    def reset(self) -> None:
        self._failures = 0
