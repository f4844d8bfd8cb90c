"""Weighted choice apportioned exactly by integer weight, and exact mirror sampling.

Covers `WeightedRoundRobin` (exact shares per cycle, smooth interleaving, zero weights, the
incremental path for long cycles) and `MirrorSampler`. Leaves out endpoint choice inside a
backend, which is the proxy's.
"""

from __future__ import annotations

from collections import Counter

import pytest

from coxswain_routing import MirrorSampler, WeightedRoundRobin


@pytest.mark.parametrize(
    "weights",
    [
        pytest.param([1, 1], id="even"),
        pytest.param([90, 10], id="ninety-ten"),
        pytest.param([3, 2, 1], id="three-ways"),
        pytest.param([7, 0, 3], id="zero-weight-slot"),
        pytest.param([5000, 3001], id="long-cycle-computed-incrementally"),
    ],
)
def test_each_cycle_apportions_exactly_by_weight(weights: list[int]) -> None:
    # Spec 003: "Several references become a weighted round-robin pool, apportioned exactly by
    # integer weight."
    wrr = WeightedRoundRobin(list(range(len(weights))), weights)
    cycle = sum(weights)
    for _ in range(3):
        counts = Counter(wrr.pick() for _ in range(cycle))
        assert [counts[i] for i in range(len(weights))] == weights


def test_picks_are_interleaved_not_bursts() -> None:
    wrr = WeightedRoundRobin(["a", "b"], [1, 1])
    assert [wrr.pick() for _ in range(4)] == ["a", "b", "a", "b"]
    heavy = WeightedRoundRobin(["a", "b"], [3, 1])
    assert [heavy.pick() for _ in range(4)].count("b") == 1
    assert max(len(run) for run in "".join(heavy.pick() for _ in range(40)).split("b")) <= 3


def test_all_zero_weights_pick_nothing() -> None:
    wrr = WeightedRoundRobin(["a"], [0])
    assert not wrr
    with pytest.raises(IndexError):
        wrr.pick()


@pytest.mark.parametrize(
    ("numerator", "denominator"),
    [
        pytest.param(1, 100, id="one-percent"),
        pytest.param(50, 100, id="half"),
        pytest.param(1, 3, id="fraction"),
    ],
)
def test_mirror_sampler_copies_exactly_n_of_every_d(numerator: int, denominator: int) -> None:
    sampler = MirrorSampler(numerator, denominator)
    for _ in range(3):
        assert sum(sampler.sample() for _ in range(denominator)) == numerator
