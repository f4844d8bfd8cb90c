"""Electors against the emulated API server, on a clock the test moves by hand.

`ManualTime` is both the electors' clock and their sleep: an elector's renewal sleep ends only
when the test advances time past it, and `sleeping(n)` waits until n electors have finished a
round and gone back to sleep, so a test steps the election one round at a time and never
waits out a lease duration (convention 20).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import kubernetes
import pytest

from coxswain_controller.leader import election, pod
from coxswain_controller.leader.leadership import Leadership
from coxswain_devkit.apiserver import ApiServer

NAMESPACE = "coxswain-system"
# Generous: a wait that times out is a failure, never the expected path.
WAIT = 20.0


class ManualTime:
    def __init__(self, now: float = 1_800_000_000.0) -> None:
        self.now = now
        self._sleepers: list[tuple[float, asyncio.Future[None]]] = []
        self._changed = asyncio.Event()

    def __call__(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        entry = (self.now + seconds, asyncio.get_running_loop().create_future())
        self._sleepers.append(entry)
        self._changed.set()
        try:
            await entry[1]
        finally:
            if entry in self._sleepers:
                self._sleepers.remove(entry)

    async def sleeping(self, count: int) -> None:
        """Return once `count` sleeps are pending (each elector finished its round)."""
        async with asyncio.timeout(WAIT):
            while len(self._sleepers) < count:
                self._changed.clear()
                await self._changed.wait()

    def advance(self, seconds: float) -> None:
        self.now += seconds
        for entry in [e for e in self._sleepers if e[0] <= self.now]:
            self._sleepers.remove(entry)
            entry[1].set_result(None)


async def becomes(leadership: Leadership, leading: bool) -> None:
    """Wait (bounded) until `leadership` says `leading`."""
    changed = asyncio.Event()
    unsubscribe = leadership.subscribe(lambda now: changed.set() if now == leading else None)
    try:
        async with asyncio.timeout(WAIT):
            while leadership.is_leader != leading:
                await changed.wait()
    finally:
        unsubscribe()


@pytest.fixture
async def api() -> AsyncIterator[ApiServer]:
    async with ApiServer() as server:
        server.apply([{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}])
        yield server


@pytest.fixture
def client(api: ApiServer) -> Iterator[Any]:
    with kubernetes.client.ApiClient(kubernetes.client.Configuration(host=api.url)) as c:
        yield c


@pytest.fixture
def clock() -> ManualTime:
    return ManualTime()


def settings(identity: str, *, label: bool = False) -> election.ElectionSettings:
    ref = pod.PodRef(NAMESPACE, identity) if label else None
    return election.ElectionSettings(identity=identity, namespace=NAMESPACE, pod=ref)


Elect = Callable[..., tuple[election.Elector, Leadership]]


@pytest.fixture
async def elect(client: Any, clock: ManualTime) -> AsyncIterator[Elect]:
    """`elect(identity, label=False)` starts an elector; every one is stopped at the end."""
    started: list[election.Elector] = []

    def start(identity: str, *, label: bool = False) -> tuple[election.Elector, Leadership]:
        leadership = Leadership()
        elector = election.Elector(
            client, leadership, settings(identity, label=label), clock=clock, sleep=clock.sleep
        )
        elector.start()
        started.append(elector)
        return elector, leadership

    yield start
    for elector in started:
        await elector.stop()
