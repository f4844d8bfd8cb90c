"""Snapshot swaps under load, and listeners coming and going.

Covers: 50 swaps while clients keep sending (zero failed requests); adding a listener leaves the
others' connections alone; a removed listener stops accepting and its open connection finishes
the request in flight. Leaves out workers (workers_test.py).
"""

from __future__ import annotations

import asyncio

from coxswain_devkit.echo import EchoServer
from coxswain_proxy.dataplane import testing as t
from coxswain_routing import ListenerProtocol

OTHER = 18081


async def test_fifty_swaps_under_load_fail_no_request() -> None:
    async with EchoServer(pod="a") as a, EchoServer(pod="b") as b:

        def snapshot(i: int) -> list[object]:
            name = "a" if i % 2 else "b"
            return [
                t.HTTP_LISTENER,
                t.endpoints("a", a.port),
                t.endpoints("b", b.port),
                t.routes("example.com", t.rule(f"r{i}", t.backend(name))),
            ]

        async with t.running(snapshot(0)) as plane:  # type: ignore[arg-type]
            port = t.actual(plane)
            stop = asyncio.Event()
            statuses: list[int] = []

            async def load() -> None:
                async with t.client(port) as c:
                    while not stop.is_set():
                        statuses.append((await c.request()).status)

            loaders = [asyncio.create_task(load()) for _ in range(4)]
            for i in range(1, 51):
                await plane.apply(snapshot(i))  # type: ignore[arg-type]
                await asyncio.sleep(0)
            stop.set()
            await asyncio.gather(*loaders)
    assert statuses and set(statuses) == {200}


async def test_adding_and_removing_listeners_leaves_the_others_alone() -> None:
    async with EchoServer() as echo:
        base = [
            t.endpoints("echo", echo.port),
            t.routes("example.com", t.rule("r", t.backend("echo"))),
        ]
        two = t.listeners((t.PORT, ListenerProtocol.HTTP, ""), (OTHER, ListenerProtocol.HTTP, ""))
        other_routes = t.routes("example.com", t.rule("o", t.backend("echo")), port=OTHER)
        async with t.running([t.HTTP_LISTENER, *base]) as plane:  # type: ignore[list-item]
            port = t.actual(plane)
            async with t.client(port) as kept:
                assert (await kept.request()).status == 200
                await plane.apply([two, other_routes, *base])  # type: ignore[list-item]
                other = t.actual(plane, OTHER)
                assert t.actual(plane) == port and (await kept.request()).status == 200
                async with t.client(other) as leaving:
                    assert (await leaving.request()).status == 200
                    await plane.apply([t.HTTP_LISTENER, *base])  # type: ignore[list-item]
                    assert OTHER not in [b.port for b in plane.bound()]
                    # An idle connection of a removed listener is closed (one with a request in
                    # flight would close after answering it).
                    assert await leaving.closed() == b""
                assert (await kept.request()).status == 200
