"""The discovery client's Prometheus metrics, registered once on import.

Where it sits: `client` and `stream` set them as streams open, deliver and end; the admin
server exports them with the rest of the process's registry. Declared (and documented) here, in
one place; the data plane's own metrics are built at scrape time (`dataplane.collector`).
"""

from __future__ import annotations

from prometheus_client import Counter, Gauge

DISCOVERY_CONNECTED = Gauge(
    "coxswain_proxy_discovery_connected",
    "1 while a discovery stream to the controller is delivering snapshots, else 0.",
)
SNAPSHOTS = Counter(
    "coxswain_proxy_snapshots",
    "Snapshots received from the controller, by whether they were applied or rejected.",
    ["result"],
)
SNAPSHOT_PUBLISH_SEQ = Gauge(
    "coxswain_proxy_snapshot_publish_seq",
    "The controller's publish sequence of the routing snapshot currently served.",
)
SNAPSHOT_VERSION = Gauge(
    "coxswain_proxy_snapshot_version_info",
    "1, labelled with the version of the routing snapshot currently served.",
    ["version"],
)
SVID_EXPIRY = Gauge(
    "coxswain_proxy_svid_expiry_timestamp_seconds",
    "When the SVID the proxy authenticates with expires, in seconds since the epoch.",
)
DISCOVERY_STOPPED = Gauge(
    "coxswain_proxy_discovery_stopped",
    "1 once the proxy has stopped dialling the controller (a wire-version mismatch).",
)

for _result in ("applied", "rejected"):
    SNAPSHOTS.labels(result=_result)


def applied(version: str, publish_seq: int) -> None:
    SNAPSHOTS.labels(result="applied").inc()
    SNAPSHOT_VERSION.clear()
    SNAPSHOT_VERSION.labels(version=version).set(1)
    SNAPSHOT_PUBLISH_SEQ.set(publish_seq)
