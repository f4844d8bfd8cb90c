"""Weighted backend choice and mirror sampling, apportioned exactly.

Spec 003 "Backend references": "Several references become a weighted round-robin pool,
apportioned exactly by integer weight." Smooth weighted round robin (nginx's algorithm) gives
each slot exactly its weight's share of every `sum(weights)` consecutive picks, interleaved
rather than in bursts. The sequence is precomputed (after dividing by the weights' gcd) when it
is short, so a pick on the request path is an index step; long sequences run the algorithm
incrementally.

Mirroring numerator/denominator of the requests uses the same exactness: request k is mirrored
when floor(k*n/d) steps up, so every d consecutive requests mirror exactly n.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Generic, TypeVar

__all__ = ["WeightedRoundRobin", "MirrorSampler", "smooth_weighted_sequence"]

T = TypeVar("T")

# Longest cycle precomputed as a table; beyond it picks run the algorithm step by step.
_MAX_TABLE = 4096


def smooth_weighted_sequence(weights: Sequence[int]) -> list[int]:
    """Indices of one full smooth-WRR cycle over `weights` (after dividing by their gcd)."""
    divisor = math.gcd(*weights) or 1
    reduced = [w // divisor for w in weights]
    current = [0] * len(reduced)
    total = sum(reduced)
    order = []
    for _ in range(total):
        order.append(_step(reduced, current, total))
    return order


def _step(weights: Sequence[int], current: list[int], total: int) -> int:
    best = 0
    for i, weight in enumerate(weights):
        current[i] += weight
        if current[i] > current[best]:
            best = i
    current[best] -= total
    return best


class WeightedRoundRobin(Generic[T]):
    """Picks items by integer weight; zero-weight items are never picked."""

    __slots__ = ("_items", "_weights", "_table", "_current", "_total", "_next")

    def __init__(self, items: Sequence[T], weights: Sequence[int]) -> None:
        pairs = [(item, w) for item, w in zip(items, weights, strict=True) if w > 0]
        self._items = [item for item, _ in pairs]
        self._weights = [w for _, w in pairs]
        self._total = sum(self._weights)
        self._current = [0] * len(self._weights)
        self._next = 0
        divisor = math.gcd(*self._weights) if self._weights else 1
        self._table: list[int] | None = None
        if self._total // divisor <= _MAX_TABLE:
            self._table = smooth_weighted_sequence(self._weights)

    def __bool__(self) -> bool:
        return bool(self._items)

    def pick(self) -> T:
        """The next item; raises IndexError when every weight is zero."""
        table = self._table
        if table is not None:
            index = table[self._next]
            self._next = (self._next + 1) % len(table)
            return self._items[index]
        return self._items[_step(self._weights, self._current, self._total)]


class MirrorSampler:
    """Says, request by request, whether this one is mirrored: exactly n of every d."""

    __slots__ = ("_numerator", "_denominator", "_count")

    def __init__(self, numerator: int, denominator: int) -> None:
        self._numerator = numerator
        self._denominator = denominator
        self._count = 0

    def sample(self) -> bool:
        count = self._count = (self._count % self._denominator) + 1
        n, d = self._numerator, self._denominator
        return (count * n) // d != ((count - 1) * n) // d
