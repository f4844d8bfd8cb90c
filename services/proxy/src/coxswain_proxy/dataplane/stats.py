"""Request-path counters kept as plain numbers, turned into Prometheus metrics only when scraped.

Where it sits: the request path calls `Stats.request()` and `Stats.upstream_latency()` (a dict
increment and a bisect: no locks, no label lookups); `collector.Collector` reads them at scrape
time, and in multi-worker mode each worker ships `snapshot()` to the parent, which `merge()`s.
Label sets are bounded: a route label is the route's kind/namespace/name (only routes in the
snapshot exist), a status is its class, a client timeout's kind one of `TIMEOUT_KINDS`.
"""

from __future__ import annotations

from bisect import bisect_left
from typing import Any

# Upper bounds of the upstream latency histogram, in seconds.
LATENCY_BOUNDS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)
NO_ROUTE = "none"

# Why a client connection was ended for being too slow or idle (`client_timeout`).
HEAD = "head"  # its request head did not arrive in time: 408
BODY = "body"  # its request body stalled: 408
IDLE = "idle"  # no request came on a connection between requests: closed
HANDSHAKE = "handshake"  # its TLS handshake did not finish in time: closed
TIMEOUT_KINDS = (HEAD, BODY, IDLE, HANDSHAKE)

# A stream route's counters (`Stats.streams[route]`, a list indexed so): connections accepted
# for it, open now, bytes from clients, bytes to clients, connections (or sessions) refused.
STREAM_TOTAL, STREAM_ACTIVE, STREAM_RECEIVED, STREAM_SENT, STREAM_REFUSED = range(5)


class Stats:
    __slots__ = (
        "requests", "buckets", "latency_sum", "latency_count", "connections", "client_timeouts",
        "streams", "per_worker", "handed_over",
    )  # fmt: skip

    def __init__(self) -> None:
        self.requests: dict[tuple[str, int], int] = {}  # (route, status // 100) -> count
        self.buckets = [0] * (len(LATENCY_BOUNDS) + 1)  # the last one is +Inf
        self.latency_sum = 0.0
        self.latency_count = 0
        self.connections = 0  # client connections open now
        self.client_timeouts = dict.fromkeys(TIMEOUT_KINDS, 0)  # kind -> connections ended
        self.streams: dict[str, list[int]] = {}  # stream route -> counters (STREAM_*)
        # Merged from workers: each one's client connections open now, by worker index (how
        # evenly they share the load, `balance`); empty in process.
        self.per_worker: list[int] = []
        self.handed_over = 0  # connections this worker accepted and handed to another

    def stream(self, route: str) -> list[int]:
        """The counters of one stream route, which its connections update in place."""
        counts = self.streams.get(route)
        if counts is None:
            counts = self.streams[route] = [0, 0, 0, 0, 0]
        return counts

    def request(self, route: str, status: int) -> None:
        key = (route, status // 100)
        self.requests[key] = self.requests.get(key, 0) + 1

    def client_timeout(self, kind: str) -> None:
        self.client_timeouts[kind] += 1

    def upstream_latency(self, seconds: float) -> None:
        self.buckets[bisect_left(LATENCY_BOUNDS, seconds)] += 1
        self.latency_sum += seconds
        self.latency_count += 1

    def snapshot(self) -> dict[str, Any]:
        return {
            "requests": [[r, c, n] for (r, c), n in self.requests.items()],
            "buckets": list(self.buckets),
            "latency_sum": self.latency_sum,
            "latency_count": self.latency_count,
            "connections": self.connections,
            "client_timeouts": dict(self.client_timeouts),
            "streams": {route: list(counts) for route, counts in self.streams.items()},
            "handed_over": self.handed_over,
        }

    @classmethod
    def merged(cls, snapshots: list[dict[str, Any]]) -> Stats:
        total = cls()
        total.per_worker = [snap["connections"] for snap in snapshots]
        for snap in snapshots:
            for route, cls_, count in snap["requests"]:
                key = (route, cls_)
                total.requests[key] = total.requests.get(key, 0) + count
            for i, count in enumerate(snap["buckets"]):
                total.buckets[i] += count
            total.latency_sum += snap["latency_sum"]
            total.latency_count += snap["latency_count"]
            total.connections += snap["connections"]
            total.handed_over += snap["handed_over"]
            for kind, count in snap["client_timeouts"].items():
                total.client_timeouts[kind] += count
            for route, counts in snap.get("streams", {}).items():
                mine = total.stream(route)
                for i, count in enumerate(counts):
                    mine[i] += count
        return total
