"""The data plane's Prometheus metrics, built from `stats.Stats` at scrape time.

Where it sits: `wiring` registers one `Collector` per process; it reads the in-process stats,
or the workers' merged stats refreshed in the background. Nothing here runs per request.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector as _Base

from coxswain_proxy.dataplane import stats as counters
from coxswain_proxy.dataplane.stats import LATENCY_BOUNDS, TIMEOUT_KINDS, Stats

# The stream route families: (name, help, kind, index in a route's counters).
_STREAM_FAMILIES = (
    ("connections", "Connections (UDP: sessions) accepted", CounterMetricFamily,
     counters.STREAM_TOTAL),
    ("active", "Connections (UDP: sessions) open now", GaugeMetricFamily, counters.STREAM_ACTIVE),
    ("received_bytes", "Bytes from clients", CounterMetricFamily, counters.STREAM_RECEIVED),
    ("sent_bytes", "Bytes to clients", CounterMetricFamily, counters.STREAM_SENT),
    ("refused", "Connections (UDP: sessions) refused: no route, an unresolved share, a "
     "member that could not be dialled", CounterMetricFamily, counters.STREAM_REFUSED),
)  # fmt: skip


class Collector(_Base):
    def __init__(self, stats: Callable[[], Stats], applied_at: Callable[[], float]) -> None:
        self._stats = stats
        self._applied_at = applied_at

    def collect(self) -> Iterator[Metric]:
        stats = self._stats()
        requests = CounterMetricFamily(
            "coxswain_proxy_requests",
            "HTTP requests answered, by route (kind/namespace/name) and status class.",
            labels=["route", "status"],
        )
        for (route, cls), count in sorted(stats.requests.items()):
            requests.add_metric([route, f"{cls}xx"], count)
        yield requests
        histogram = HistogramMetricFamily(
            "coxswain_proxy_upstream_latency_seconds",
            "Time from sending a request upstream to its response head.",
        )
        cumulative, buckets = 0, []
        for bound, count in zip((*LATENCY_BOUNDS, float("inf")), stats.buckets, strict=True):
            cumulative += count
            buckets.append((str(bound) if bound != float("inf") else "+Inf", cumulative))
        histogram.add_metric([], buckets, stats.latency_sum)
        yield histogram
        yield GaugeMetricFamily(
            "coxswain_proxy_connections", "Client connections open now.", value=stats.connections
        )
        if stats.per_worker:
            per_worker = GaugeMetricFamily(
                "coxswain_proxy_worker_connections",
                "Client connections open now, by worker process (--workers N > 1).",
                labels=["worker"],
            )
            for index, count in enumerate(stats.per_worker):
                per_worker.add_metric([str(index)], count)
            yield per_worker
            yield CounterMetricFamily(
                "coxswain_proxy_worker_handovers",
                "Client connections a worker accepted and handed to a less loaded one.",
                value=stats.handed_over,
            )
        timeouts = CounterMetricFamily(
            "coxswain_proxy_client_timeouts",
            "Client connections ended for being too slow or idle, by kind: head (request head "
            "late, 408), body (request body stalled, 408), idle (no request between requests), "
            "handshake (TLS handshake late).",
            labels=["kind"],
        )
        for kind in TIMEOUT_KINDS:
            timeouts.add_metric([kind], stats.client_timeouts[kind])
        yield timeouts
        yield from _streams(stats)
        applied = self._applied_at()
        age = time.time() - applied if applied else 0.0
        yield GaugeMetricFamily(
            "coxswain_proxy_snapshot_age_seconds",
            "Seconds since the data plane swapped in its current snapshot (0: none yet).",
            value=age,
        )


def _streams(stats: Stats) -> Iterator[Metric]:
    """Per TCPRoute, TLSRoute and UDPRoute (route: kind/namespace/name, or "none")."""
    for name, text, family, index in _STREAM_FAMILIES:
        metric = family(f"coxswain_proxy_stream_{name}", f"{text}, by route.", labels=["route"])
        for route, counts in sorted(stats.streams.items()):
            metric.add_metric([route], counts[index])
        yield metric
