"""The Lease record and the rules for who may hold it: pure, so the rules are tested alone.

The record is client-go's (`holderIdentity`, `leaseDurationSeconds`, `acquireTime`,
`renewTime`, `leaseTransitions` on a coordination.k8s.io/v1 Lease), so `kubectl get lease`
reads the same way it does for any Kubernetes controller. Times are the Lease API's MicroTime
(RFC 3339, microseconds, UTC). Expiry is judged on the holder's `renewTime` against our clock,
so replicas' clocks must agree to well within the lease duration (NTP does).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TypedDict

from coxswain_controller.kube.api import JSON


class LeaseSpec(TypedDict, total=False):
    holderIdentity: str
    leaseDurationSeconds: int
    acquireTime: str
    renewTime: str
    leaseTransitions: int


def format_time(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_time(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def spec_of(lease: JSON) -> LeaseSpec:
    spec: LeaseSpec = lease.get("spec") or {}
    return spec


def expired(spec: LeaseSpec, now: float) -> bool:
    """True when nobody holds the lease any more: no holder, or no renewal within its duration."""
    if not spec.get("holderIdentity") or "renewTime" not in spec:
        return True
    try:
        renewed = parse_time(spec["renewTime"])
    except ValueError:
        return True  # a record nobody can read is one nobody holds
    return renewed + spec.get("leaseDurationSeconds", 0) < now


def held_by(spec: LeaseSpec, identity: str, now: float) -> bool:
    return spec.get("holderIdentity") == identity and not expired(spec, now)


def claimed(spec: LeaseSpec, identity: str, now: float, *, duration: float) -> LeaseSpec:
    """The record after `identity` acquires or renews: a new holder counts one transition."""
    renewing = spec.get("holderIdentity") == identity
    # client-go's count: the first holder of a new Lease is not a transition, every later one is.
    transitions = spec.get("leaseTransitions", 0) if spec else -1
    return {
        "holderIdentity": identity,
        # The API stores whole seconds; spec 003 asks for at least one.
        "leaseDurationSeconds": max(1, round(duration)),
        "acquireTime": spec.get("acquireTime", format_time(now)) if renewing else format_time(now),
        "renewTime": format_time(now),
        "leaseTransitions": transitions if renewing else transitions + 1,
    }


def released(spec: LeaseSpec, now: float) -> LeaseSpec:
    """The record a leader leaves on clean shutdown: no holder, so a standby takes it at once."""
    return {**spec, "holderIdentity": "", "leaseDurationSeconds": 1, "renewTime": format_time(now)}
