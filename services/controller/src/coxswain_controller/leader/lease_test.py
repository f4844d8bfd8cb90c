"""The Lease rules alone: expiry, acquisition, renewal and release as record changes."""

from __future__ import annotations

import pytest

from coxswain_controller.leader import lease

NOW = 1_800_000_000.0


def held(holder: str, renewed: float, duration: int = 15) -> lease.LeaseSpec:
    return {
        "holderIdentity": holder,
        "leaseDurationSeconds": duration,
        "acquireTime": lease.format_time(renewed - 100),
        "renewTime": lease.format_time(renewed),
        "leaseTransitions": 3,
    }


@pytest.mark.parametrize(
    ("spec", "expired"),
    [
        pytest.param(held("a", NOW - 14), False, id="renewed-within-duration"),
        pytest.param(held("a", NOW - 16), True, id="renew-time-plus-duration-passed"),
        pytest.param({**held("a", NOW), "holderIdentity": ""}, True, id="released"),
        pytest.param(lease.LeaseSpec(), True, id="never-held"),
    ],
)
def test_expiry(spec: lease.LeaseSpec, expired: bool) -> None:
    assert lease.expired(spec, NOW) is expired


def test_renewal_keeps_acquire_time_and_transitions() -> None:
    before = held("a", NOW - 5)
    after = lease.claimed(before, "a", NOW, duration=15)
    assert after["acquireTime"] == before["acquireTime"]
    assert after["leaseTransitions"] == 3
    assert lease.parse_time(after["renewTime"]) == NOW


def test_takeover_counts_a_transition_and_a_new_lease_none() -> None:
    assert lease.claimed(held("a", NOW - 20), "b", NOW, duration=15)["leaseTransitions"] == 4
    assert lease.claimed(lease.LeaseSpec(), "b", NOW, duration=0.4)["leaseTransitions"] == 0
    assert lease.claimed(lease.LeaseSpec(), "b", NOW, duration=0.4)["leaseDurationSeconds"] == 1


def test_a_released_lease_is_free_at_once() -> None:
    assert lease.expired(lease.released(held("a", NOW), NOW), NOW)
