"""Two worker processes behind one port: a snapshot reaches both before `apply` returns, both
serve, stats merge, and shutdown ends them; later snapshots reach them as deltas carrying only
what changed, which each worker applies to what it holds; a worker that dies unasked is
reported (the proxy then stops to be restarted whole). Leaves out load spreading (the kernel's
business)."""

from __future__ import annotations

import asyncio
import os
import signal
import socket

import pytest

from coxswain_devkit.echo import EchoServer
from coxswain_proto import discovery as pb
from coxswain_proxy.dataplane import testing as t
from coxswain_proxy.dataplane.core import Options
from coxswain_proxy.dataplane.workers import Workers, delta, staged


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


async def test_two_workers_serve_one_port_after_one_apply() -> None:
    port = free_port()  # SO_REUSEPORT needs the same explicit port in every worker
    async with EchoServer() as echo:
        resources: list[t.Resource] = [
            t.listeners((port, t.ListenerProtocol.HTTP, "")),
            t.endpoints("echo", echo.port),
            t.routes("example.com", t.rule("r", t.backend("echo")), port=port),
        ]
        options = Options(shared=False, address="127.0.0.1", reuse_port=True)
        workers = await Workers(options).start(2)
        try:
            bound = await workers.apply(resources, "v1")
            assert [b.port for b in bound] == [port]
            statuses = [(await t.get(port)).status for _ in range(10)]
            assert statuses == [200] * 10
            stats = await workers.stats()
            assert sum(n for (_, c), n in stats.requests.items() if c == 2) == 10
        finally:
            await workers.close(grace=1.0)


def test_the_first_snapshot_a_worker_gets_is_full() -> None:
    held = t.two_routes(1001, 1002)
    message = delta(None, held, "v1")
    assert message.full and {r.key for r in message.resources} == set(held)
    assert staged({}, pb.Snapshot().parse(bytes(message))) == held


@pytest.mark.parametrize(("edit", "expected"), t.DELTAS)
def test_workers_are_sent_only_what_changed(edit: t.Edit, expected: dict[str, str]) -> None:
    held = t.two_routes(1001, 1002)
    after = edit(held, 1002)
    changed = {key for key, r in after.items() if held.get(key) is not r}
    message = delta(held, after, "v2")
    assert not message.full
    assert {r.key for r in message.resources} == changed
    assert set(message.removed) == held.keys() - after.keys()
    worker = staged(held, pb.Snapshot().parse(bytes(message)))
    assert worker == after
    assert all(worker[key] is held[key] for key in after.keys() - changed)


async def test_deltas_reach_every_worker_before_apply_returns() -> None:
    port = free_port()
    options = Options(shared=False, address="127.0.0.1", reuse_port=True, port_map=lambda _: port)
    async with EchoServer(pod="a") as a, EchoServer(pod="b") as b:
        held = t.two_routes(a.port, b.port)
        steps: list[tuple[t.Edit, dict[str, str]]] = [
            (t.backend_edited, {t.ONE: "b", t.TWO: "a"}),
            (t.endpoints_moved, {t.ONE: "b", t.TWO: "b"}),
            (t.route_removed, {t.ONE: "404", t.TWO: "b"}),
            (t.route_added, {"three.example.com": "b", t.TWO: "b"}),
        ]
        workers = await Workers(options).start(2)
        try:
            await workers.apply(held, "v0")
            for version, (edit, expected) in enumerate(steps, start=1):
                held = edit(held, b.port)
                await workers.apply(held, f"v{version}")
                # Each request on a new connection, which the kernel hands to either worker.
                for host, pod in expected.items():
                    assert [await t.served_by(port, host) for _ in range(6)] == [pod] * 6
        finally:
            await workers.close(grace=1.0)


async def test_a_worker_that_dies_unasked_is_reported_and_one_closed_is_not() -> None:
    options = Options(shared=False, address="127.0.0.1", reuse_port=True)
    workers = await Workers(options).start(2)
    died: list[tuple[str, int | None]] = []
    reported = asyncio.Event()

    def report(name: str, code: int | None) -> None:
        died.append((name, code))
        reported.set()

    try:
        workers.watch(report)
        victim = workers.workers[1].process
        assert victim.pid is not None
        os.kill(victim.pid, signal.SIGKILL)
        await asyncio.wait_for(reported.wait(), 30)
    finally:
        await workers.close(grace=1.0)
    assert died == [(victim.name, -signal.SIGKILL)]  # the other one's ordered exit is not news
