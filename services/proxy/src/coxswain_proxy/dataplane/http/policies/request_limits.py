"""Local rate limits (a token bucket per key) and a limit on requests in flight per client.

Where it sits: `gate.admit` takes a token from each of a rule's `Buckets` and counts the
request into its `InFlight` before any auth is asked. Both live in this worker process: a
proxy with N workers admits up to N times a rule's rate (as each nginx worker would without a
shared zone), which docs/routing.md says.

Why buckets survive snapshots: a rule's compiled plan is rebuilt whenever anything on its host
changes, and a limit that starts full again on every change is no limit. `state` keys them by
the rule's identity and the limit's value, bounded in number; a rule whose limit changes gets a
fresh bucket.

The cost per request is one dict lookup and a little arithmetic, with no allocation for a key
seen before. Keys are bounded (`MAX_KEYS`): past the bound the oldest key is forgotten, which
gives that client a full bucket again; memory stays bounded whatever the clients do.
"""

from __future__ import annotations

import math
from collections.abc import Hashable
from typing import Protocol, TypeVar

from coxswain_proxy.dataplane.http.phases import DONE
from coxswain_routing import RateLimit

__all__ = ["Buckets", "Counted", "InFlight", "state"]

MAX_KEYS = 65536  # keys per bucket table
MAX_CLIENTS = 4096  # client addresses per in-flight count (each holds at most `limit` cycles)
MAX_TABLES = 4096  # bucket tables and in-flight counts kept across snapshots

T = TypeVar("T")
_kept: dict[Hashable, object] = {}


def state(key: Hashable, make: type[T], *args: object) -> T:
    """The state kept for `key` across snapshots (made with `make(*args)` the first time)."""
    found = _kept.get(key)
    if not isinstance(found, make):
        if len(_kept) >= MAX_TABLES:
            del _kept[next(iter(_kept))]
        found = _kept[key] = make(*args)
    return found


class Buckets:
    """A token bucket per key: `capacity` tokens at most, `rate` more per second."""

    __slots__ = ("rate", "capacity", "entries")

    def __init__(self, limit: RateLimit) -> None:
        self.rate = limit.requests / limit.period_seconds
        self.capacity = float(limit.capacity)
        self.entries: dict[bytes, list[float]] = {}  # key -> [tokens, when counted]

    def take(self, key: bytes, now: float) -> int:
        """0 when a token was taken; else the whole seconds until one will be (Retry-After)."""
        entry = self.entries.get(key)
        if entry is None:
            entries = self.entries
            if len(entries) >= MAX_KEYS:
                del entries[next(iter(entries))]
            entries[key] = [self.capacity - 1.0, now]
            return 0
        tokens = entry[0] + (now - entry[1]) * self.rate
        if tokens > self.capacity:
            tokens = self.capacity
        entry[1] = now
        if tokens >= 1.0:
            entry[0] = tokens - 1.0
            return 0
        entry[0] = tokens
        return max(1, math.ceil((1.0 - tokens) / self.rate))


class Counted(Protocol):
    """A request in flight, as `InFlight` holds it (a `RequestCycle`; `tables` compiles this
    module, so it never imports the cycle's)."""

    @property
    def phase(self) -> int:
        """Where it is in its life (`http.phases`)."""


class InFlight:
    """The requests each client address has in flight on one rule.

    A request is in flight until its cycle is done (answered and read, or abandoned): the
    cycles themselves are held and those past `DONE` dropped when the address comes again, so
    no end-of-request callback is needed and a client that left cannot leak a count.
    """

    __slots__ = ("limit", "entries")

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.entries: dict[bytes, list[Counted]] = {}

    def admit(self, key: bytes, cycle: Counted) -> bool:
        cycles = self.entries.get(key)
        if cycles is None:
            entries = self.entries
            if len(entries) >= MAX_CLIENTS:
                del entries[next(iter(entries))]
            entries[key] = [cycle]
            return True
        # The ended ones go at each visit, so an address holds `limit` cycles at most.
        cycles[:] = [c for c in cycles if c.phase < DONE]
        if len(cycles) >= self.limit:
            return False
        cycles.append(cycle)
        return True
