"""Benchmark: how evenly `--workers N` worker processes share 50 keep-alive client connections.

    apt-get install -y wrk            (else `--client python`: 50 asyncio connections)
    ./pants run bench:worker_balance  (add `-- --trials 10` for a smoke run)

Each worker binds the proxy's ports with SO_REUSEPORT and the kernel spreads new connections
over them by a hash of the connection's addresses: with 50 connections and 2 workers one worker
gets more than 1.3x its share in a few trials in a hundred, with 4 workers in about two in five.
The proxy then tops that up (`dataplane/balance.py`): a worker holding more than its share hands
a connection it has just accepted to the least-loaded worker. This bench starts, in this process,
two proxies of N workers each on a port of their own, one as the kernel spreads alone (`hash`)
and one balanced (`balanced`); each trial opens 50 connections at once (`wrk -c50`, or 50
asyncio ones), each sending requests on keep-alive, and once all 50 are open reads how many each
worker holds from the parent's merged stats (`Stats.per_worker`, the workers' own counts, which
/metrics gives as `coxswain_proxy_worker_connections`). Trials alternate between the two proxies.
It prints each trial's worst share (the busiest worker's connections over an even share) and,
per worker count and mode, the median, 90th percentile and worst of those and how many trials
went over 1.3x. The requests find no route (the proxy answers 404 itself): what is measured is
where connections land, not what they carry.

`--cost` measures what the mechanism costs instead. (a) The decision, in this process: the
wrapped factory a port's server calls at each accept against the bare one, for a connection kept
(ns per accept). (b) A handover, in this process: two data planes seated as workers 0 and 1 on
one board, connections opened one after another to worker 0, each answered and closed, with
worker 0 handing every one to worker 1, against a data plane with no balancer; the difference
in CPU time per connection is what a handover costs both ends. (c) End to end, with wrk
opening a new connection per request (`Connection: close`, 50 at a time) against three proxies
of N workers: `hash`, `balanced`, and `forced` (every accept handed to another worker, the next
one that has taken all it was sent: see `force`): connections per second, the workers' CPU time
per connection (from /proc), and the share handed over. The CPU a handover adds is the
difference from `hash`, divided by the share handed over.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from dataclasses import dataclass, field

from coxswain_proxy.dataplane import balance
from coxswain_proxy.dataplane.core import Dataplane, Options
from coxswain_proxy.dataplane.workers import Workers
from coxswain_routing import GatewayListeners, Listener, ListenerProtocol

CONNECTIONS = 50
LIMIT = 1.3  # issue 20: no worker serves more than 1.3x its share
MODES = {"hash": False, "balanced": True}  # Options.balance, by mode


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def listener(port: int) -> GatewayListeners:
    return GatewayListeners(
        "bench", "gw", 1, (Listener("http", port, port, ListenerProtocol.HTTP),)
    )


@dataclass
class Proxy:
    mode: str
    port: int
    workers: Workers
    shares: list[float] = field(default_factory=list)  # each trial's worst share
    handed: int = 0  # connections handed over so far (all trials)

    async def counts(self) -> list[int]:
        stats = await self.workers.stats()
        self.handed = stats.handed_over
        return stats.per_worker

    async def settled(self, total: int) -> list[int]:
        """The per-worker counts once they add up to `total` (or after 10 s, what they are)."""
        counts = await self.counts()
        for _ in range(500):
            if sum(counts) == total:
                break
            await asyncio.sleep(0.02)
            counts = await self.counts()
        return counts


@contextlib.asynccontextmanager
async def proxy(mode: str, workers: int) -> AsyncIterator[Proxy]:
    port = free_port()  # SO_REUSEPORT: every worker binds this same port
    options = Options(shared=False, address="127.0.0.1", reuse_port=True, balance=mode != "hash")
    with force() if mode == "forced" else contextlib.nullcontext():
        pool = await Workers(options).start(workers)  # the workers keep what they were forked with
    try:
        await pool.apply([listener(port)])
        yield Proxy(mode, port, pool)
    finally:
        await pool.close(1.0)


# ------------------------------------------------------------------------------ clients

Load = Callable[[int], contextlib.AbstractAsyncContextManager[None]]


@contextlib.asynccontextmanager
async def wrk(port: int) -> AsyncIterator[None]:
    """`wrk -c50` running (keep-alive) until the block ends."""
    process = await asyncio.create_subprocess_exec(
        "wrk", "-t2", f"-c{CONNECTIONS}", "-d60s", "-H", "Host: bench.example.com",
        f"http://127.0.0.1:{port}/", stdout=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        yield
    finally:
        process.terminate()
        await process.wait()


@contextlib.asynccontextmanager
async def python_client(port: int) -> AsyncIterator[None]:
    """50 connections opened at once, each with one request answered, held open."""
    opened = await asyncio.gather(
        *(asyncio.open_connection("127.0.0.1", port) for _ in range(CONNECTIONS))
    )
    try:
        for _, writer in opened:
            writer.write(b"GET / HTTP/1.1\r\nHost: bench.example.com\r\n\r\n")
        await asyncio.gather(*(reader.read(65536) for reader, _ in opened))
        yield
    finally:
        for _, writer in opened:
            writer.close()


async def trial(target: Proxy, load: Load) -> list[int]:
    async with load(target.port):
        counts = await target.settled(CONNECTIONS)
    await target.settled(0)
    await asyncio.sleep(0.2)  # every worker republishes what it holds (`balance.REFRESH`)
    return counts


def worst_share(counts: Sequence[int]) -> float:
    return max(counts) * len(counts) / max(sum(counts), 1)


async def measure(workers: int, trials: int, load: Load) -> list[Proxy]:
    async with contextlib.AsyncExitStack() as stack:
        proxies = [await stack.enter_async_context(proxy(mode, workers)) for mode in MODES]
        for number in range(1, trials + 1):
            for target in proxies:
                before = target.handed
                counts = await trial(target, load)
                share = worst_share(counts)
                target.shares.append(share)
                flag = "  over" if share > LIMIT else ""
                print(
                    f"{workers} workers, {target.mode:9} trial {number:3}: "
                    f"{' '.join(f'{c:3}' for c in counts)}  worst {share:.2f}, "
                    f"{target.handed - before:2} handed over{flag}",
                    flush=True,
                )
        return proxies


def summary(rows: list[tuple[int, Proxy]]) -> None:
    print(f"\n{'workers':>7} {'mode':9} {'trials':>6} {'median':>7} {'p90':>6} {'worst':>6} "
          f"{'> 1.3x':>7} {'handed over':>12}")  # fmt: skip
    for workers, target in rows:
        shares = sorted(target.shares)
        p90 = shares[min(len(shares) - 1, len(shares) * 9 // 10)]
        over = sum(s > LIMIT for s in shares)
        handed = target.handed / (len(shares) * CONNECTIONS)
        print(
            f"{workers:7} {target.mode:9} {len(shares):6} {statistics.median(shares):7.2f} "
            f"{p90:6.2f} {shares[-1]:6.2f} {over:4}/{len(shares)} {handed:11.1%}"
        )


# ------------------------------------------------------------------------------ cost


@contextlib.contextmanager
def force() -> Iterator[None]:
    """Every accept handed over, while workers are forked: a limit of 0 (RATIO 0, SLACK far
    below zero), and the worker picked is the next one with nothing of this one's in flight."""

    def anyone(self: balance.Balancer, held: int) -> int | None:
        seat = self.seat
        for step in range(1, seat.count):
            j = (seat.index + step) % seat.count
            if self.sent[j] == seat.taken_from_me[j]:
                return j
        return None

    kept = balance.RATIO, balance.SLACK, balance.Balancer._lightest
    balance.RATIO, balance.SLACK = 0.0, -(10**9)
    balance.Balancer._lightest = anyone  # type: ignore[method-assign]
    try:
        yield
    finally:
        balance.RATIO, balance.SLACK, balance.Balancer._lightest = kept  # type: ignore[method-assign]


async def decision_cost(workers: int, calls: int = 200_000) -> tuple[float, float]:
    """ns per call of a port's bare factory and of the balancer's wrapper, for a connection
    kept (the others' cells say they hold more)."""
    board = balance.Board(workers)
    plane = await Dataplane(Options(shared=False, address="127.0.0.1"), seat=board.seat(0)).start()
    balancer = plane.balancer
    assert balancer is not None
    for j in range(1, workers):
        balancer.seat.opens[j] = 1_000_000
    made = asyncio.Protocol()

    def bare() -> asyncio.Protocol:
        return made

    wrapped = balancer.wrap(1, bare)
    wrapped()  # works out the limit once, as a port's first accept does
    results = []
    for factory in (bare, wrapped):
        best = float("inf")
        for _ in range(5):
            started = time.perf_counter()
            for _ in range(calls // 1000):
                for _ in range(1000):
                    factory()
                await asyncio.sleep(0)
            best = min(best, (time.perf_counter() - started) / calls)
        results.append(best * 1e9)
    await plane.close(0.0)
    for receive, send in board.inboxes:
        receive.close()
        send.close()
    return results[0], results[1]


def cpu_seconds(pids: Sequence[int]) -> float:
    """User + system CPU time of these processes so far."""
    ticks = 0
    for pid in pids:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
        ticks += int(fields[11]) + int(fields[12])  # utime, stime
    return ticks / os.sysconf("SC_CLK_TCK")


@dataclass
class Churn:
    rps: list[float] = field(default_factory=list)
    cpu_us: list[float] = field(default_factory=list)  # workers' CPU per connection
    handed: list[float] = field(default_factory=list)  # share of connections handed over


async def churn(target: Proxy, seconds: int, into: Churn) -> None:
    pids = [w.process.pid for w in target.workers.workers if w.process.pid is not None]
    await target.counts()
    handed, cpu = target.handed, cpu_seconds(pids)
    process = await asyncio.create_subprocess_exec(
        "wrk", "-t2", f"-c{CONNECTIONS}", f"-d{seconds}s", "-H", "Host: bench.example.com",
        "-H", "Connection: close", f"http://127.0.0.1:{target.port}/",
        stdout=subprocess.PIPE,
    )  # fmt: skip
    out = (await process.communicate())[0].decode()
    cpu = cpu_seconds(pids) - cpu
    await target.settled(0)
    total = int(re.search(r"(\d+) requests in", out).group(1))  # type: ignore[union-attr]
    into.rps.append(total / seconds)
    into.cpu_us.append(cpu / total * 1e6)
    into.handed.append((target.handed - handed) / total)


async def served(port: int, connections: int) -> float:
    """CPU seconds (this process) per connection: open, one request answered, close."""
    started = time.process_time()
    for _ in range(connections):
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"GET / HTTP/1.1\r\nHost: bench.example.com\r\n\r\n")
        await reader.readuntil(b"\r\n\r\n")
        writer.close()
        await writer.wait_closed()
    return (time.process_time() - started) / connections


async def handover_cost(connections: int = 2000) -> tuple[float, float, int]:
    """(us per connection kept with no balancer, us per connection handed over, handed)."""
    options = Options(shared=False, address="127.0.0.1", port_map=lambda _: 0)
    plain = await Dataplane(options).start()
    board = balance.Board(2)
    planes = [await Dataplane(options, seat=balance.Seat(board, i)).start() for i in (0, 1)]
    try:
        for plane in (plain, *planes):
            await plane.apply([listener(8080)])
        ports = [plane.bound()[0].actual for plane in (plain, planes[0])]
        await served(ports[0], 200)  # warm up
        kept = await served(ports[0], connections)
        with force():
            assert planes[0].balancer is not None
            planes[0].balancer.limit = 0.0  # as worked out under force()
            handed = await served(ports[1], connections)
        stats = planes[0].rt.stats if planes[0].rt is not None else None
        return kept * 1e6, handed * 1e6, stats.handed_over if stats is not None else 0
    finally:
        for plane in (plain, *planes):
            await plane.close(0.0)
        for receive, send in board.inboxes:
            receive.close()
            send.close()


async def cost_main(args: argparse.Namespace) -> None:
    print(f"{'workers':>7} {'bare factory':>13} {'balanced':>9} {'added':>6}  (ns per accept)")
    for workers in args.workers:
        bare, wrapped = await decision_cost(workers)
        print(f"{workers:7} {bare:13.0f} {wrapped:9.0f} {wrapped - bare:6.0f}")
    kept, handed, count = await handover_cost(args.connections)
    print(f"\nCPU per connection, both ends in this process: {kept:.1f} us kept, {handed:.1f} us "
          f"handed over ({count} handed): a handover adds {handed - kept:.1f} us")  # fmt: skip
    print(f"\nnew connection per request, wrk -c{CONNECTIONS}, {args.seconds} s runs, medians of "
          f"{args.rounds}")  # fmt: skip
    print(f"{'workers':>7} {'mode':9} {'conn/s':>8} {'CPU us/conn':>12} {'handed over':>12} "
          f"{'us per handover':>16}")  # fmt: skip
    for workers in args.workers:
        async with contextlib.AsyncExitStack() as stack:
            modes = ("hash", "balanced", "forced")
            proxies = [await stack.enter_async_context(proxy(mode, workers)) for mode in modes]
            runs = {p.mode: Churn() for p in proxies}
            for _ in range(args.rounds):
                for target in proxies:
                    await churn(target, args.seconds, runs[target.mode])
        if not args.rounds:
            continue
        base = statistics.median(runs["hash"].cpu_us)
        for mode, run in runs.items():
            cpu, handed = statistics.median(run.cpu_us), statistics.median(run.handed)
            each = f"{(cpu - base) / handed:16.0f}" if handed > 0.05 else f"{'':16}"
            print(
                f"{workers:7} {mode:9} {statistics.median(run.rps):8.0f} {cpu:12.1f} "
                f"{handed:11.1%} {each}",
                flush=True,
            )


async def balance_main(args: argparse.Namespace) -> None:
    load: Load = wrk if args.client == "wrk" else python_client
    rows: list[tuple[int, Proxy]] = []
    for workers in args.workers:
        rows += [(workers, p) for p in await measure(workers, args.trials, load)]
    summary(rows)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--trials", type=int, default=30)
    parser.add_argument("--workers", type=int, nargs="+", default=[2, 4])
    parser.add_argument("--client", choices=["wrk", "python"], default="wrk")
    parser.add_argument("--cost", action="store_true", help="measure the cost instead")
    parser.add_argument("--seconds", type=int, default=5, help="--cost: each wrk run")
    parser.add_argument("--rounds", type=int, default=3, help="--cost: runs per mode")
    parser.add_argument("--connections", type=int, default=2000, help="--cost: handed over")
    args = parser.parse_args()
    if (args.client == "wrk" or args.cost) and shutil.which("wrk") is None:
        sys.exit("wrk is not installed: apt-get install -y wrk (or --client python)")
    import uvloop

    uvloop.run(cost_main(args) if args.cost else balance_main(args))


if __name__ == "__main__":
    main()
