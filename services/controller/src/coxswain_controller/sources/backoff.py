"""Jittered exponential backoff: how long a reflector waits after a failed request.

Full doubling up to a ceiling, each delay drawn from its upper half, so a fleet of controllers
that lost the API server together does not come back in lockstep. Pure: the caller sleeps.
"""

from __future__ import annotations

import random
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Policy:
    initial: float = 0.5  # seconds before the first retry (before jitter)
    ceiling: float = 30.0  # no wait is longer than this


class Backoff:
    def __init__(self, policy: Policy, *, rng: random.Random | None = None) -> None:
        self._policy = policy
        self._rng = rng or random.Random()  # noqa: S311 - jitter, not secrets
        self._failures = 0

    @property
    def failures(self) -> int:
        return self._failures

    def next(self) -> float:
        """The wait before the next attempt; each call counts one more failure."""
        base = min(self._policy.ceiling, self._policy.initial * 2 ** min(self._failures, 32))
        self._failures += 1
        return base * self._rng.uniform(0.5, 1.0)

    def reset(self) -> None:
        self._failures = 0
