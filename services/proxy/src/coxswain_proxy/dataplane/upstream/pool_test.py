"""The pool's bookkeeping rules, on plain values: reuse, limits, waiters, expiry.

Leaves out the I/O (connecting, closing), which `connector` does and the end-to-end tests cover.
"""

from __future__ import annotations

from coxswain_proxy.dataplane.upstream.pool import Limits, Pool

A = ("10.0.0.1", 80)
B = ("10.0.0.2", 80)


def test_a_released_connection_is_reused_and_a_new_one_opened_otherwise() -> None:
    pool: Pool[str, str] = Pool(Limits())
    first = pool.acquire(A, "w1", now=0)
    assert first.open_new and first.connection is None
    assert pool.release(A, "c1", now=1).handed_to is None
    again = pool.acquire(A, "w2", now=2)
    assert again.connection == "c1" and not again.open_new
    assert pool.total == 1


def test_the_warmest_idle_connection_is_used_first() -> None:
    pool: Pool[str, str] = Pool(Limits())
    pool.acquire(A, "w", now=0)
    pool.acquire(A, "w", now=0)
    pool.release(A, "old", now=1)
    pool.release(A, "new", now=2)
    assert pool.acquire(A, "w", now=3).connection == "new"


def test_stale_idle_connections_are_returned_for_closing() -> None:
    pool: Pool[str, str] = Pool(Limits(idle_timeout=10))
    pool.acquire(A, "w", now=0)
    pool.release(A, "c1", now=0)
    got = pool.acquire(A, "w", now=11)
    assert got.expired == ("c1",) and got.open_new
    assert pool.total == 1


def test_per_origin_limit_queues_waiters_in_order_and_hands_over_on_release() -> None:
    pool: Pool[str, str] = Pool(Limits(max_per_origin=1))
    assert pool.acquire(A, "w1", now=0).open_new
    queued = [pool.acquire(A, w, now=0) for w in ("w2", "w3")]
    assert all(not q.open_new and q.connection is None for q in queued)
    assert pool.acquire(B, "w4", now=0).open_new  # another origin is not held up
    assert pool.release(A, "c1", now=1).handed_to == "w2"
    assert pool.release(A, "c1", now=2).handed_to == "w3"
    assert pool.release(A, "c1", now=3).handed_to is None


def test_total_limit_counts_connections_being_opened() -> None:
    pool: Pool[str, str] = Pool(Limits(max_total=1))
    assert pool.acquire(A, "w1", now=0).open_new
    assert not pool.acquire(B, "w2", now=0).open_new


def test_a_discarded_connection_lets_a_waiter_open_one() -> None:
    pool: Pool[str, str] = Pool(Limits(max_per_origin=1))
    pool.acquire(A, "w1", now=0)
    pool.acquire(A, "w2", now=0)
    assert pool.discard(A, "c1") == "w2"
    assert pool.total == 1


def test_a_cancelled_waiter_is_not_handed_anything() -> None:
    pool: Pool[str, str] = Pool(Limits(max_per_origin=1))
    pool.acquire(A, "w1", now=0)
    pool.acquire(A, "w2", now=0)
    pool.cancel(A, "w2")
    assert pool.release(A, "c1", now=1).handed_to is None


def test_expire_and_drain_forget_what_they_return() -> None:
    pool: Pool[str, str] = Pool(Limits(idle_timeout=5))
    for _ in range(3):
        pool.acquire(A, "w", now=0)
    pool.release(A, "c1", now=0)
    pool.release(A, "c2", now=4)
    pool.release(A, "c3", now=6)
    assert pool.expire(now=8) == ["c1"]
    assert sorted(pool.drain_idle()) == ["c2", "c3"]
    assert pool.total == 0


def test_idle_overflow_closes_the_released_connection() -> None:
    pool: Pool[str, str] = Pool(Limits(max_idle_per_origin=1))
    pool.acquire(A, "w", now=0)
    pool.acquire(A, "w", now=0)
    pool.release(A, "c1", now=0)
    assert pool.release(A, "c2", now=0).close == ("c2",)
    assert pool.total == 1


def test_the_fast_paths_answer_as_acquire_and_release_would() -> None:
    pool: Pool[str, str] = Pool(Limits(max_idle_per_origin=1, idle_timeout=10))
    assert pool.take_idle(A, now=0) is None  # nothing idle: acquire decides
    pool.acquire(A, "w", now=0)
    assert pool.park(A, "c1", now=0)
    assert pool.take_idle(A, now=5) == "c1"
    assert pool.park(A, "c1", now=5)
    assert not pool.park(A, "c2", now=5)  # no room: release closes it
    assert pool.take_idle(A, now=20) is None  # stale: acquire returns it for closing
    assert pool.acquire(A, "w", now=20).expired == ("c1",)
