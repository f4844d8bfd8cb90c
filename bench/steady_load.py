"""Steady HTTP/1.1 load through the proxy while a benchmark changes its routing.

    with SteadyLoad(port, hosts, rate=400, connections=8) as load:
        ...  # edit routes
    report = load.report  # every answer that was not 2xx, every connection that failed

A fixed request rate over keep-alive connections, from its own process (so the benchmark's own
timing loop never waits on it for the GIL), each request for a host picked at random from
`hosts`. Paced per connection with one request in flight, so a stalled proxy shows up as fewer
requests sent and a high latency tail, not as a queue of requests fired at once afterwards.
Counts what a client would notice: each status, each failed connection or timeout, and the
latency of the answers.
"""

from __future__ import annotations

import asyncio
import contextlib
import multiprocessing
import random
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from multiprocessing.synchronize import Event
from types import TracebackType

__all__ = ["LoadReport", "SteadyLoad"]

TIMEOUT = 5.0
KEPT_FAILURES = 20


@dataclass
class LoadReport:
    seconds: float = 0.0
    statuses: Counter[int] = field(default_factory=Counter)
    errors: Counter[str] = field(default_factory=Counter)
    latencies: list[float] = field(default_factory=list)  # seconds, each 2xx answer's
    failures: list[tuple[float, str]] = field(
        default_factory=list
    )  # (time.time(), what), first few

    @property
    def sent(self) -> int:
        return sum(self.statuses.values()) + sum(self.errors.values())

    @property
    def non_2xx(self) -> int:
        return sum(n for status, n in self.statuses.items() if not 200 <= status < 300)

    @property
    def failed(self) -> int:
        """Answers that were not 2xx, and requests that got no answer at all."""
        return self.non_2xx + sum(self.errors.values())

    def quantile(self, q: float) -> float:
        ordered = sorted(self.latencies)
        return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))] if ordered else 0.0

    def summary(self) -> str:
        rate = self.sent / self.seconds if self.seconds else 0.0
        text = (
            f"{self.sent} requests at {rate:.0f}/s, {self.non_2xx} non-2xx, "
            f"{sum(self.errors.values())} without an answer; latency p50 "
            f"{self.quantile(0.5) * 1000:.1f} ms, p99 {self.quantile(0.99) * 1000:.1f} ms, "
            f"max {self.quantile(1.0) * 1000:.1f} ms"
        )
        if self.failed:
            text += f"; statuses {dict(self.statuses)}, errors {dict(self.errors)}"
        return text


class SteadyLoad:
    def __init__(
        self, port: int, hosts: Sequence[str], *, rate: float, connections: int = 8
    ) -> None:
        self._args = (port, list(hosts), rate, connections)
        context = multiprocessing.get_context("spawn")
        self._stop = context.Event()
        self._ready = context.Event()
        self._receive, send = context.Pipe(duplex=False)
        self._process = context.Process(
            target=_child, args=(*self._args, self._stop, self._ready, send), daemon=True
        )
        self.report = LoadReport()

    def __enter__(self) -> SteadyLoad:
        self._process.start()
        if not self._ready.wait(30):
            self._process.kill()
            raise RuntimeError("the load generator did not start")
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._stop.set()
        if self._receive.poll(30):
            self.report = self._receive.recv()
        self._process.join(10)
        if self._process.is_alive():
            self._process.kill()
            self._process.join()


def _child(
    port: int,
    hosts: list[str],
    rate: float,
    connections: int,
    stop: Event,
    ready: Event,
    send: Connection,
) -> None:
    report = asyncio.run(_drive(port, hosts, rate, connections, stop, ready))
    send.send(report)


async def _drive(
    port: int, hosts: list[str], rate: float, connections: int, stop: Event, ready: Event
) -> LoadReport:
    report = LoadReport()
    done = asyncio.Event()
    started = time.perf_counter()
    interval = connections / rate
    workers = [
        asyncio.create_task(_connection(port, hosts, interval, i, report, done))
        for i in range(connections)
    ]
    ready.set()
    await asyncio.to_thread(stop.wait)
    done.set()
    await asyncio.gather(*workers)
    report.seconds = time.perf_counter() - started
    return report


async def _connection(
    port: int, hosts: list[str], interval: float, seed: int, report: LoadReport, done: asyncio.Event
) -> None:
    rng = random.Random(seed)
    loop = asyncio.get_running_loop()
    due = loop.time() + interval * rng.random()  # spread the connections over one interval
    streams: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None
    while not done.is_set():
        await asyncio.sleep(max(0.0, due - loop.time()))
        due = max(due + interval, loop.time())  # late: go now, but do not catch up in a burst
        host = rng.choice(hosts)
        try:
            if streams is None:
                streams = await asyncio.wait_for(
                    asyncio.open_connection("127.0.0.1", port), TIMEOUT
                )
            sent = time.perf_counter()
            status, keep = await asyncio.wait_for(_request(*streams, host), TIMEOUT)
        except (OSError, asyncio.IncompleteReadError, TimeoutError, ValueError) as exc:
            _fail(report, type(exc).__name__, host)
            await _close(streams)
            streams = None
            continue
        report.statuses[status] += 1
        if 200 <= status < 300:
            report.latencies.append(time.perf_counter() - sent)
        else:
            _fail(report, f"status {status}", host, counted=True)
        if not keep:
            await _close(streams)
            streams = None
    await _close(streams)


async def _request(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, host: str
) -> tuple[int, bool]:
    writer.write(f"GET / HTTP/1.1\r\nHost: {host}\r\n\r\n".encode())
    head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1").lower()
    status = int(head[9:12])
    headers = dict(
        (name.strip(), value.strip())
        for name, _, value in (line.partition(":") for line in head.split("\r\n")[1:] if line)
    )
    if headers.get("transfer-encoding") == "chunked":
        while size := int((await reader.readuntil(b"\r\n")).split(b";")[0], 16):
            await reader.readexactly(size + 2)
        await reader.readuntil(b"\r\n")
    else:
        await reader.readexactly(int(headers.get("content-length", "0")))
    return status, headers.get("connection") != "close"


def _fail(report: LoadReport, what: str, host: str, *, counted: bool = False) -> None:
    if not counted:
        report.errors[what] += 1
    if len(report.failures) < KEPT_FAILURES:
        report.failures.append((time.time(), f"{host}: {what}"))


async def _close(
    streams: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None,
) -> None:
    if streams is not None:
        streams[1].close()
        with contextlib.suppress(OSError):
            await streams[1].wait_closed()
