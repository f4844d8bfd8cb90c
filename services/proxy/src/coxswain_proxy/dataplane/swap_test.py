"""Snapshot swaps under load, and listeners coming and going.

Covers: 50 swaps while clients keep sending (zero failed requests); adding a listener leaves the
others' connections alone; a removed listener stops accepting and its open connection finishes
the request in flight; deltas (a route's backend edited, an endpoint set changed, a route removed
or added) compiled incrementally serve what a compile from scratch would, reusing what was
compiled from the resources they leave alone. Leaves out workers (workers_test.py) and TLS
stores (tls_test.py).
"""

from __future__ import annotations

import asyncio

import pytest

from coxswain_devkit.echo import EchoServer
from coxswain_proxy.dataplane import tables
from coxswain_proxy.dataplane import testing as t
from coxswain_routing import EndpointSet, HostRoutes, ListenerProtocol, Miss, Outcome

OTHER = 18081


async def test_fifty_swaps_under_load_fail_no_request() -> None:
    async with EchoServer(pod="a") as a, EchoServer(pod="b") as b:

        def snapshot(i: int) -> list[t.Resource]:
            name = "a" if i % 2 else "b"
            return [
                t.HTTP_LISTENER,
                t.endpoints("a", a.port),
                t.endpoints("b", b.port),
                t.routes("example.com", t.rule(f"r{i}", t.backend(name))),
            ]

        async with t.running(snapshot(0)) as plane:
            port = t.actual(plane)
            stop = asyncio.Event()
            statuses: list[int] = []

            async def load() -> None:
                async with t.client(port) as c:
                    while not stop.is_set():
                        statuses.append((await c.request()).status)

            loaders = [asyncio.create_task(load()) for _ in range(4)]
            for i in range(1, 51):
                await plane.apply(snapshot(i))
                await asyncio.sleep(0)
            stop.set()
            await asyncio.gather(*loaders)
    assert statuses and set(statuses) == {200}


async def test_adding_and_removing_listeners_leaves_the_others_alone() -> None:
    async with EchoServer() as echo:
        base: list[t.Resource] = [
            t.endpoints("echo", echo.port),
            t.routes("example.com", t.rule("r", t.backend("echo"))),
        ]
        two = t.listeners((t.PORT, ListenerProtocol.HTTP, ""), (OTHER, ListenerProtocol.HTTP, ""))
        other_routes = t.routes("example.com", t.rule("o", t.backend("echo")), port=OTHER)
        async with t.running([t.HTTP_LISTENER, *base]) as plane:
            port = t.actual(plane)
            async with t.client(port) as kept:
                assert (await kept.request()).status == 200
                await plane.apply([two, other_routes, *base])
                other = t.actual(plane, OTHER)
                assert t.actual(plane) == port and (await kept.request()).status == 200
                async with t.client(other) as leaving:
                    assert (await leaving.request()).status == 200
                    await plane.apply([t.HTTP_LISTENER, *base])
                    assert OTHER not in [b.port for b in plane.bound()]
                    # An idle connection of a removed listener is closed (one with a request in
                    # flight would close after answering it).
                    assert await leaving.closed() == b""
                assert (await kept.request()).status == 200


def _outcome(outcome: Outcome) -> tuple[object, ...]:
    if isinstance(outcome, Miss):
        return (outcome.status, outcome.reason)
    return (id(outcome.rule), outcome.match_index, outcome.status)


def assert_like_from_scratch(served: tables.Tables, held: t.Held) -> None:
    fresh = tables.compile_tables(held, ingress={})
    for host in (t.ONE, t.TWO, "three.example.com", "other.example.com"):
        probe = (t.PORT, host, "GET", "/")
        assert _outcome(served.router.match(*probe)) == _outcome(fresh.router.match(*probe))
    assert served.plans == fresh.plans
    assert {k: p.origins for k, p in served.endpoints.items()} == {
        k: p.origins for k, p in fresh.endpoints.items()
    }
    assert served.ports == fresh.ports


def assert_reused(before: tables.Tables, after: tables.Tables, old: t.Held, new: t.Held) -> None:
    """What was compiled from a resource the delta left alone is the very same object."""
    kept = [r for key, r in new.items() if old.get(key) is r]
    for rule in (rule for r in kept if isinstance(r, HostRoutes) for rule in r.rules):
        assert after.plans[id(rule)] is before.plans[id(rule)]
    for endpoint_set in (r for r in kept if isinstance(r, EndpointSet)):
        key = endpoint_set.key
        assert after.endpoints[key] is before.endpoints[key]


@pytest.mark.parametrize(("edit", "expected"), t.DELTAS)
async def test_a_delta_serves_what_a_compile_from_scratch_would(
    edit: t.Edit, expected: dict[str, str]
) -> None:
    async with EchoServer(pod="a") as a, EchoServer(pod="b") as b:
        held = t.two_routes(a.port, b.port)
        async with t.running(list(held.values())) as plane:
            assert plane.rt is not None and plane.rt.tables is not None
            before = plane.rt.tables
            after = edit(held, b.port)
            await plane.apply(after)
            assert plane.rt.tables is not before
            assert {host: await t.served_by(t.actual(plane), host) for host in expected} == expected
            assert_like_from_scratch(plane.rt.tables, after)
            assert_reused(before, plane.rt.tables, held, after)
