"""The identity service's own metrics: one counter per outcome and the time each call took."""

from __future__ import annotations

from prometheus_client import Counter, Histogram

RESULTS = (
    "issued",
    "unauthenticated",
    "permission_denied",
    "invalid_argument",
    "unavailable",
    "internal",  # a bug met while answering: the caller got INTERNAL, the log has the traceback
)

ISSUANCE = Counter(
    "coxswain_identity_svid_issuance",
    "IssueSvid calls by result.",
    ["result"],
)
LATENCY = Histogram(
    "coxswain_identity_svid_issuance_seconds",
    "How long IssueSvid took, from request to answer, whatever the result.",
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0),
)

# Every result shows as 0 from the start, so a rate() over a fresh process is defined.
for _result in RESULTS:
    ISSUANCE.labels(result=_result)
