"""The reconnect backoff, pure: delays read off with an injected random function.

Covers: the 250 ms start, doubling, the 30 s ceiling, the 4 s ceiling while a snapshot is held,
the jitter's range, reset. Leaves out where the client sleeps (client_test.py).
"""

from __future__ import annotations

import pytest

from coxswain_proxy.discovery.backoff import Backoff


def delays(rand: float, count: int, *, holding: bool = False) -> list[float]:
    backoff = Backoff(rand=lambda: rand)
    return [backoff.next_delay(holding=holding) for _ in range(count)]


def test_the_ceiling_doubles_from_250ms_to_30s() -> None:
    assert delays(1.0, 10) == [0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 30.0, 30.0, 30.0]


def test_the_ceiling_is_4s_while_a_snapshot_is_held() -> None:
    assert delays(1.0, 7, holding=True) == [0.25, 0.5, 1.0, 2.0, 4.0, 4.0, 4.0]


def test_jitter_never_goes_below_half_the_ceiling() -> None:
    assert delays(0.0, 9) == [0.125, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 15.0, 15.0]


@pytest.mark.parametrize("rand", [0.0, 0.3, 0.999], ids=["low", "middle", "high"])
def test_every_delay_lies_within_half_and_the_whole_ceiling(rand: float) -> None:
    backoff = Backoff(rand=lambda: rand)
    for _ in range(40):
        ceiling = backoff.ceiling(holding=False)
        assert ceiling / 2 <= backoff.next_delay(holding=False) <= ceiling


def test_holding_a_snapshot_later_caps_a_grown_backoff_at_once() -> None:
    backoff = Backoff(rand=lambda: 1.0)
    for _ in range(10):
        backoff.next_delay(holding=False)
    assert backoff.next_delay(holding=True) == 4.0


def test_reset_starts_again_from_250ms() -> None:
    backoff = Backoff(rand=lambda: 1.0)
    for _ in range(5):
        backoff.next_delay(holding=False)
    backoff.reset()
    assert backoff.next_delay(holding=False) == 0.25


def test_a_very_long_outage_does_not_overflow() -> None:
    backoff = Backoff(rand=lambda: 1.0)
    for _ in range(2000):
        assert backoff.next_delay(holding=False) <= 30.0
