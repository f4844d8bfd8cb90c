"""Benchmark: controller and proxy memory per route, and whether it stays flat under edits.

    ./pants run bench:memory                      (1k, 10k and 50k routes, then no soak)
    ./pants run bench:memory -- --sizes 1000,10000 --soak 10000
    ./pants run bench:memory -- --sizes 10000 --profile /tmp/mem   (where it goes, tracemalloc)

Starts the local stack (API emulator, echo backends, identity, controller, shared proxy, each
its own process; the proxy on the real mTLS discovery stream), creates a Gateway, and reads each
process's resident set (`VmRSS` in /proc/<pid>/status) at 0 routes, then after growing the
same stack to each size of simple HTTPRoutes (one hostname, one PathPrefix match, one backend,
all naming the same Service, so the figure is the routes' own cost). A size is measured once
the proxy serves the last route, has applied the controller's latest publish (the Ack follows
that line), and the controller's status writes have been quiet for 3 s; then each process runs
a full `gc.collect()` (asked over a Unix socket: both run under a small launcher, `PROBE`, that
adds one thread for it) and its RSS is read once it holds still. It prints RSS, the growth over
0 routes, and that growth per route against the goal of 2 KiB per route in each process.

`--soak N` then keeps the stack at `--soak-routes` routes and makes N edits, one after another,
each changing one route's path and header match to values never used before, and waits until a
request matching the new values is answered through the proxy before the next. RSS is sampled
(after a collection) `--samples` times; the verdict is in `flat()`.

`--profile DIR` runs both processes with tracemalloc tracing (8 frames), dumps a snapshot at 0
routes and at each size into DIR and prints the top allocation sites grown between them.
Tracing adds its own memory per allocation, so the RSS table of such a run is not the figure.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import http.client
import json
import os
import socket
import statistics
import sys
import tempfile
import time
import tracemalloc
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import kubernetes
from convergence import GATEWAY_CLASS, GROUP, VERSION, settle

from coxswain_devkit.stack import Launcher, Stack, StackPorts

GOAL = 2048  # bytes per route, in each process
NS = "memory"
# The shared proxy's bind port is derived from the Gateway's name: a name of this run's own, so
# two stacks on one machine (this bench twice, or bench:convergence's "bench/gw") do not both
# want the same port, where the second proxy cannot bind and the bench would reach the first.
GATEWAY_NAME = f"gw-{os.getpid()}"
GATEWAY = {
    "apiVersion": f"{GROUP}/{VERSION}",
    "kind": "Gateway",
    "metadata": {"name": GATEWAY_NAME, "namespace": NS},
    "spec": {
        "gatewayClassName": "coxswain",
        "listeners": [{"name": "http", "port": 80, "protocol": "HTTP"}],
    },
}
ROLES = ("controller", "proxy")
PATH = "/app"
TRACE_FRAMES = 8
CREATORS = 8  # threads creating routes: the emulator answers several at once

# The launcher of the measured processes: `python -c PROBE <socket> <frames> <module> ARGS...`
# runs `<module>` as `python -m` would, after starting a thread that answers on a Unix socket:
# "gc" runs a full collection and answers the allocator's live blocks, "types" the count of
# collector-tracked objects by type (not those `gc.freeze` moved out of its sight), "dump PATH"
# writes a tracemalloc snapshot (with frames > 0, tracing starts before the service imports
# anything). Stdlib only, so it adds nothing to RSS
# a plain `python -m` would not have.
PROBE = r"""
import collections, gc, json, runpy, socket, sys, threading, tracemalloc
path, frames, module, *args = sys.argv[1:]
if int(frames):
    tracemalloc.start(int(frames))
def answer(conn):
    with conn, conn.makefile("rw") as f:
        for line in f:
            command, _, arg = line.strip().partition(" ")
            if command == "gc":
                gc.collect()
                f.write(f"{sys.getallocatedblocks()}\n")
            elif command == "dump":
                tracemalloc.take_snapshot().dump(arg)
                f.write("dumped\n")
            elif command == "types":
                gc.collect()
                counts = collections.Counter(
                    f"{type(o).__module__}.{type(o).__qualname__}" for o in gc.get_objects()
                )
                f.write(json.dumps(counts) + "\n")
            f.flush()
def serve(server):
    while True:
        answer(server.accept()[0])
server = socket.socket(socket.AF_UNIX)
try:
    server.bind(path)
except OSError:  # taken: another run of the role (`coxswain-controller translate`), unprobed
    server.close()
else:
    server.listen()
    threading.Thread(target=serve, args=(server,), name="memory-probe", daemon=True).start()
sys.argv = [module, *args]
runpy.run_module(module, run_name="__main__", alter_sys=True)
"""


def launcher(workdir: Path, frames: int) -> Launcher:
    prefixes = dict(Launcher.modules().prefixes)
    for role in ROLES:
        sock = str(workdir / f"{role}.probe")
        prefixes[role] = (sys.executable, "-c", PROBE, sock, str(frames), f"coxswain_{role}")
    return Launcher(prefixes)


def ask(workdir: Path, role: str, command: str, timeout: float = 600.0) -> str:
    with socket.socket(socket.AF_UNIX) as sock:
        sock.settimeout(timeout)
        sock.connect(str(workdir / f"{role}.probe"))
        with sock.makefile("rw") as f:
            f.write(command + "\n")
            f.flush()
            return f.readline().strip()


def rss(pid: int) -> int:
    """VmRSS of `pid`, bytes."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"no VmRSS for {pid}")


def settled_rss(stack: Stack, workdir: Path) -> dict[str, int]:
    """Each process's RSS after a full collection, once two reads 0.5 s apart agree (to 64 KiB:
    a collection can hand arenas back a moment later), or after 10 s; and under "<role>.blocks"
    the memory blocks its Python allocator had handed out and not got back just then (objects
    alive, whatever the allocator's fragmentation does to RSS)."""
    result = {f"{role}.blocks": int(ask(workdir, role, "gc")) for role in ROLES}
    for role in ROLES:
        pid = stack.processes[role].pid
        last, deadline = rss(pid), time.monotonic() + 10
        while time.monotonic() < deadline:
            time.sleep(0.5)
            now = rss(pid)
            if abs(now - last) <= 64 * 1024:
                break
            last = now
        result[role] = rss(pid)
    return result


def route(i: int, match: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "HTTPRoute",
        "metadata": {"name": f"r{i}", "namespace": NS},
        "spec": {
            "parentRefs": [{"name": GATEWAY_NAME}],
            "hostnames": [host(i)],
            "rules": [_rule(match or {"path": {"type": "PathPrefix", "value": PATH}})],
        },
    }


def _rule(match: dict[str, Any]) -> dict[str, Any]:
    return {"matches": [match], "backendRefs": [{"name": "one", "port": 80}]}


def host(i: int) -> str:
    return f"r{i}.memory.example"


def soak_match(k: int) -> dict[str, Any]:
    """Edit k's match: a path and a header value no earlier edit used."""
    return {
        "path": {"type": "PathPrefix", "value": f"/s{k}"},
        "headers": [{"name": "x-soak", "value": str(k)}],
    }


class Cluster:
    """The bench's objects in the stack's API server, through the real `kubernetes` client."""

    def __init__(self, stack: Stack) -> None:
        self.client = stack.client()
        self.custom: Any = kubernetes.client.CustomObjectsApi(self.client)
        self.core: Any = kubernetes.client.CoreV1Api(self.client)
        self.routes = 0

    def base(self) -> None:
        """Service `one` (the echo's slice is the stack's), the class and the Gateway."""
        spec = {"ports": [{"name": "http", "port": 80}]}
        self.core.create_namespaced_service(NS, {"metadata": {"name": "one"}, "spec": spec})
        self.custom.create_cluster_custom_object(GROUP, VERSION, "gatewayclasses", GATEWAY_CLASS)
        self.custom.create_namespaced_custom_object(GROUP, VERSION, NS, "gateways", GATEWAY)

    def grow(self, routes: int) -> None:
        """Routes r<routes so far> .. r<routes - 1>, created from several threads."""
        with concurrent.futures.ThreadPoolExecutor(CREATORS) as pool:
            for done in pool.map(self._create, range(self.routes, routes)):
                del done
        self.routes = max(self.routes, routes)

    def _create(self, i: int) -> None:
        self.custom.create_namespaced_custom_object(
            GROUP, VERSION, NS, "httproutes", route(i), _preload_content=False
        ).release_conn()

    def edit(self, i: int, match: dict[str, Any]) -> None:
        patch = {"spec": {"rules": [_rule(match)]}}
        self.custom.patch_namespaced_custom_object(
            GROUP, VERSION, NS, "httproutes", f"r{i}", patch, _preload_content=False
        ).release_conn()

    def close(self) -> None:
        self.client.close()


class Client:
    """One keep-alive connection to the proxy's Gateway port, reopened when it fails."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.conn: http.client.HTTPConnection | None = None

    def status(self, host: str, path: str, headers: dict[str, str] | None = None) -> int:
        try:
            if self.conn is None:
                self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=5)
            self.conn.request("GET", path, headers={"Host": host, **(headers or {})})
            response = self.conn.getresponse()
            response.read()
            return response.status
        except (OSError, http.client.HTTPException):
            self.close()
            return 0

    def wait(
        self,
        host: str,
        path: str,
        headers: dict[str, str] | None = None,
        check: Callable[[], None] | None = None,
    ) -> None:
        """Until a GET answers 200; `check` is called between tries and may raise."""
        deadline = time.monotonic() + 900
        while self.status(host, path, headers) != 200:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{host}{path} never answered 200")
            if check is not None:
                check()
            time.sleep(0.002)

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()
            self.conn = None


class NotServed(Exception):
    """The proxy cannot get the routing at all (its discovery stream keeps failing)."""


def stream_failing(stack: Stack) -> None:
    ended = [x for x in stack.processes["proxy"].lines if x.get("msg") == "discovery stream ended"]
    if len(ended) >= 3 and not applied(stack):
        raise NotServed(f"{ended[-1].get('code')}: {ended[-1].get('details')}")


def applied(stack: Stack) -> list[dict[str, Any]]:
    return [x for x in stack.processes["proxy"].lines if x.get("msg") == "snapshot applied"]


def quiesce(stack: Stack, resources: int | None = None, timeout: float = 1800.0) -> None:
    """Until the controller's status writes are quiet and the proxy has applied (and so acked)
    the controller's latest publish, with at least `resources` resources when given."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        settle(stack, timeout=timeout)
        published = [x for x in stack.processes["controller"].lines if x.get("msg") == "published"]
        last = applied(stack)[-1] if applied(stack) else {}
        enough = resources is None or last.get("resources", 0) >= resources
        if published and last.get("publish_seq", -1) >= published[-1]["publish_seq"] and enough:
            return
        time.sleep(0.5)
    raise TimeoutError("the proxy never applied the controller's latest publish")


@dataclass
class Level:
    routes: int
    rss: dict[str, int]
    seconds: float = 0.0  # from the first create (or the restart) to measured
    resources: int = 0  # in the proxy's snapshot
    restarted: bool = False  # measured after the controller and the proxy were restarted
    phases: dict[str, float] = field(default_factory=dict)  # where `seconds` went

    @property
    def label(self) -> str:
        return f"{self.routes} routes" + (", restarted" if self.restarted else "")


@dataclass
class Sample:
    edits: int
    rss: dict[str, int]
    relists: dict[str, int] = field(default_factory=dict)  # the controller's, by kind, so far


def relists(stack: Stack) -> dict[str, int]:
    """Watches the controller restarted with a full list (its watch's resourceVersion had left
    the API server's window, 410), by kind: each replaces every cached object of the kind."""
    url = f"http://127.0.0.1:{stack.admin_port('controller')}/metrics"
    with urllib.request.urlopen(url, timeout=10) as answer:
        text = answer.read().decode()
    found = {}
    for line in text.splitlines():
        if (
            line.startswith("coxswain_controller_watch_restarts_total{")
            and 'reason="expired"' in line
        ):
            kind = line.split('kind="', 1)[1].split('"', 1)[0]
            found[kind] = int(float(line.rsplit(" ", 1)[1]))
    return found


@dataclass
class Soak:
    routes: int
    samples: list[Sample] = field(default_factory=list)
    seconds: float = 0.0
    full_passes: int = 0  # controller passes not patched from the one before
    full_snapshots: int = 0  # applied by the proxy
    types: dict[str, list[dict[str, int]]] = field(default_factory=dict)  # after warm-up, at end


def object_types(workdir: Path, role: str) -> dict[str, int]:
    counts: dict[str, int] = json.loads(ask(workdir, role, "types"))
    return counts


def grown_types(before: dict[str, int], after: dict[str, int], limit: int = 8) -> str:
    grown = sorted(((after.get(t, 0) - n, t) for t, n in before.items()), reverse=True)
    grown += [(n, t) for t, n in after.items() if t not in before]
    top = sorted((g for g in grown if g[0] > 0), reverse=True)[:limit]
    return ", ".join(f"{t.removeprefix('builtins.')} {n:+}" for n, t in top) or "none"


def full_work(stack: Stack) -> tuple[int, int]:
    """Full translation passes and full snapshots applied, so far."""
    published = [x for x in stack.processes["controller"].lines if x.get("msg") == "published"]
    patched = [x.get("patched", 0) for x in published]
    passes = sum(1 for a, b in zip([-1, *patched], patched, strict=False) if a == b)
    return passes, sum(1 for x in applied(stack) if x.get("full"))


def gateway_port(stack: Stack) -> int:
    port = stack.bind_ports(NS, GATEWAY_NAME)["http"]
    deadline = time.monotonic() + 300
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return port
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def measure_level(stack: Stack, cluster: Cluster, client: Client, routes: int) -> Level:
    workdir = stack.workdir
    started = time.perf_counter()
    # One HostRoutes resource per route (each its own hostname): the count the proxy must reach.
    expected = applied(stack)[-1]["resources"] + routes - cluster.routes
    cluster.grow(routes)
    created = time.perf_counter()
    client.wait(host(routes - 1), PATH)
    served = time.perf_counter()
    quiesce(stack, expected)
    seconds = time.perf_counter() - started
    level = Level(routes, settled_rss(stack, workdir), seconds, applied(stack)[-1]["resources"])
    level.phases = {
        "create": created - started,
        "last served": served - created,
        "statuses settled": seconds - (served - started),
    }
    return level


def profile_dump(stack: Stack, profile: Path | None, label: str) -> None:
    if profile is None:
        return
    for role in ROLES:
        ask(stack.workdir, role, f"dump {(profile / f'{role}-{label}.tracemalloc').resolve()}")


def top_growth(profile: Path, role: str, before: str, after: str, limit: int = 15) -> list[str]:
    """The allocation sites that grew most from snapshot `before` to `after`, by line."""
    ignore = [tracemalloc.Filter(False, tracemalloc.__file__), tracemalloc.Filter(False, "<*")]
    old = tracemalloc.Snapshot.load(str(profile / f"{role}-{before}.tracemalloc"))
    new = tracemalloc.Snapshot.load(str(profile / f"{role}-{after}.tracemalloc"))
    old, new = old.filter_traces(ignore), new.filter_traces(ignore)
    stats = new.compare_to(old, "lineno")
    total = sum(s.size_diff for s in stats)
    lines = [f"  {role}: traced Python memory grew {total / 2**20:.1f} MiB"]
    for stat in stats[:limit]:
        frame = stat.traceback[0]
        where = _short(frame.filename)
        lines.append(
            f"    {stat.size_diff / 2**20:>7.2f} MiB {stat.count_diff:>+9} blocks  "
            f"{where}:{frame.lineno}"
        )
    return lines


def profiles(profile: Path, sizes: list[int], soaked: bool) -> None:
    pairs = [("0", str(size), f"0 -> {size} routes") for size in sizes]
    if soaked:
        pairs.append(("soak-start", "soak-end", "the soak, after its warm-up"))
    for before, after, what in pairs:
        print(f"\ntracemalloc, {what}, top growth by line:")
        for role in ROLES:
            print("\n".join(top_growth(profile, role, before, after)))


def _short(filename: str) -> str:
    for marker in ("site-packages/", "/src/", "lib/python3"):
        if marker in filename:
            return filename.split(marker, 1)[1]
    return filename


def run_soak(workdir: Path, args: argparse.Namespace) -> Soak:
    """`args.soak` edits on a stack of its own holding `args.soak_routes` routes."""
    with running(workdir, args, "soak") as (stack, cluster, client):
        routes = args.soak_routes
        cluster.grow(routes)
        client.wait(host(routes - 1), PATH)
        quiesce(stack, routes)
        soak = Soak(routes)
        every = max(1, args.soak // args.samples)
        soak.samples.append(Sample(0, settled_rss(stack, workdir)))
        passes, snapshots = full_work(stack)
        started = time.perf_counter()
        for k in range(1, args.soak + 1):
            i = k % routes
            cluster.edit(i, soak_match(k))
            client.wait(host(i), f"/s{k}", {"x-soak": str(k)})
            if k % every == 0 or k == args.soak:
                soak.samples.append(Sample(k, settled_rss(stack, workdir), relists(stack)))
                _print_sample(soak.samples[-1], started)
                # Every sample's, so a step can be looked at between the two samples around it.
                profile_dump(stack, args.profile, f"soak-{k}")
            if k == warmup(args.soak, routes) or k == args.soak:
                profile_dump(stack, args.profile, "soak-start" if k < args.soak else "soak-end")
                for role in ROLES:
                    soak.types.setdefault(role, []).append(object_types(workdir, role))
        soak.seconds = time.perf_counter() - started
        now = full_work(stack)
        soak.full_passes, soak.full_snapshots = now[0] - passes, now[1] - snapshots
        return soak


def _print_sample(sample: Sample, started: float) -> None:
    figures = "  ".join(
        f"{role} {_mib(sample.rss[role])} ({sample.rss[f'{role}.blocks']:>8} blocks)"
        for role in ROLES
    )
    listed = ", ".join(f"{kind} {n}" for kind, n in sorted(sample.relists.items()))
    print(
        f"  after {sample.edits:>6} edits ({time.perf_counter() - started:>5.0f} s): {figures}"
        + (f"  relists so far: {listed}" if listed else "")
    )


# Flat: after the warm-up, the median of the last quarter of the samples is within
# FLAT_PERCENT of the median of the first quarter. The warm-up is the first WARMUP of the edits,
# and at least one edit of every route: a route's first edit changes its shape for good (a
# header match added, a second managedFields entry) and that growth is not a leak; after it,
# every edit swaps values of the same shape. Medians, so one sample caught in a transient does
# not decide. 1% is ten times the spread seen between samples of a steady process here (the
# controller's RSS held to 0.1 MiB over 2,000 edits), and the leak it would miss is small: at
# 1k routes (~120 MiB), 1.2 MiB over the ~6,800 edits between the quarters' middles of a
# 10,000-edit soak, about 180 bytes per edit.
WARMUP = 0.1
FLAT_PERCENT = 1.0


def warmup(total_edits: int, routes: int) -> int:
    return min(total_edits // 2, max(round(WARMUP * total_edits), routes))


@dataclass
class Flatness:
    first: float  # median RSS of the first quarter after warm-up, bytes
    last: float  # of the last quarter
    edits: float  # between the two quarters' middles

    @property
    def percent(self) -> float:
        return (self.last - self.first) / self.first * 100

    @property
    def per_edit(self) -> float:
        return (self.last - self.first) / self.edits if self.edits else 0.0

    @property
    def flat(self) -> bool:
        return self.percent <= FLAT_PERCENT


def flat(soak: Soak, role: str, total_edits: int) -> Flatness:
    kept = [s for s in soak.samples if s.edits >= warmup(total_edits, soak.routes)]
    quarter = max(1, len(kept) // 4)
    first, last = kept[:quarter], kept[-quarter:]
    middle = statistics.median([s.edits for s in last]) - statistics.median(
        [s.edits for s in first]
    )
    return Flatness(
        statistics.median([s.rss[role] for s in first]),
        statistics.median([s.rss[role] for s in last]),
        middle,
    )


def _mib(value: float) -> str:
    return f"{value / 2**20:7.1f} MiB"


def report(levels: list[Level]) -> None:
    base = levels[0]
    head = "".join(
        f" | {role + ' RSS':>15} {'growth':>11} {'per route':>10} {'goal':>5}" for role in ROLES
    )
    print(f"\n{'routes':>7}{head} | {'time':>6}")
    for level in levels:
        cells = []
        for role in ROLES:
            grown = level.rss[role] - base.rss[role]
            if level.routes:
                per = grown / level.routes
                verdict = "met" if per <= GOAL else "OVER"
                cells.append(
                    f" | {_mib(level.rss[role]):>15} {_mib(grown)} {per:>8.0f} B {verdict:>5}"
                )
            else:
                cells.append(f" | {_mib(level.rss[role]):>15} {'':>11} {'':>10} {'':>5}")
        routes = f"{level.routes}{'*' if level.restarted else ''}"
        print(f"{routes:>7}{''.join(cells)} | {level.seconds:>5.0f}s", flush=True)
    if any(level.restarted for level in levels):
        print("* after restarting the controller and the proxy with the routes in place")


def report_soak(soak: Soak, total: int) -> None:
    per_edit = soak.seconds / max(total, 1) * 1000
    print(f"\nsoak: {total} edits at {soak.routes} routes in {soak.seconds:.0f} s")
    print(f"  {per_edit:.1f} ms per edit, each waited for through the proxy, samples included")
    print(
        f"  flat = after the first {warmup(total, soak.routes)} edits, last-quarter median RSS "
        f"within {FLAT_PERCENT}% of the first-quarter median"
    )
    print(
        f"  during it: {soak.full_passes} full translation passes, {soak.full_snapshots} full "
        "snapshots applied by the proxy (the rest incremental)"
    )
    for role in ROLES:
        f = flat(soak, role, total)
        verdict = "flat" if f.flat else "GROWING"
        print(
            f"  {role:<10} first quarter {_mib(f.first)}, last quarter {_mib(f.last)}: "
            f"{f.percent:+.2f}% ({f.per_edit:+.0f} B per edit) -> {verdict}"
        )
        b = flat(soak, f"{role}.blocks", total)
        print(
            f"  {'':<10} allocated blocks {b.first:.0f} -> {b.last:.0f} ({b.percent:+.2f}%, "
            f"{b.per_edit:+.2f} per edit)"
        )
        types = soak.types.get(role, [])
        if len(types) == 2:
            grown = grown_types(types[0], types[1])
            print(f"  {'':<10} tracked objects grown after the warm-up: {grown}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,10000,50000", help="route counts, ascending")
    parser.add_argument(
        "--soak", type=int, default=10000, help="route edits at a steady level (0: none)"
    )
    parser.add_argument("--soak-routes", type=int, default=1000, help="routes during the soak")
    parser.add_argument("--samples", type=int, default=40, help="RSS samples during the soak")
    parser.add_argument("--profile", type=Path, help="trace with tracemalloc, snapshots into DIR")
    parser.add_argument("--logs", type=Path, help="keep every process's log lines in DIR")
    parser.add_argument(
        "--restart", action="store_true", help="then restart both at the last size, measure again"
    )
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",") if s]
    load = os.getloadavg()
    print(f"load average before: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}, {os.cpu_count()} CPUs")
    if args.profile is not None:
        args.profile.mkdir(parents=True, exist_ok=True)
        print("tracemalloc tracing: the RSS figures include its own bookkeeping")
    levels, soak = [], None
    if sizes:
        with tempfile.TemporaryDirectory() as tmp:
            levels = run_sizes(Path(tmp), sizes, args)
        report(levels)
    if args.soak:
        print(f"\nsoak: {args.soak} edits at {args.soak_routes} routes, a stack of its own")
        with tempfile.TemporaryDirectory() as tmp:
            soak = run_soak(Path(tmp), args)
        report_soak(soak, args.soak)
    if args.profile is not None:
        profiles(args.profile, [level.routes for level in levels[1:]], soak is not None)
    load = os.getloadavg()
    print(f"\nload average after: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")


@contextlib.contextmanager
def running(
    workdir: Path, args: argparse.Namespace, label: str
) -> Iterator[tuple[Stack, Cluster, Client]]:
    """A stack with the Gateway, no routes yet, in `workdir` (the probes' sockets too)."""
    frames = TRACE_FRAMES if args.profile is not None else 0
    stack = Stack(
        launcher(workdir, frames),
        workdir,
        echo_services=[(NS, "one")],
        ports=StackPorts.free(),
        extra_objects=[{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}}],
    )
    stack.start()
    try:
        cluster = Cluster(stack)
        cluster.base()
        client = Client(gateway_port(stack))
        try:
            yield stack, cluster, client
        finally:
            client.close()
            cluster.close()
    finally:
        keep_logs(stack, args.logs, label)
        stack.stop()


def keep_logs(stack: Stack, logs: Path | None, label: str) -> None:
    if logs is None:
        return
    logs.mkdir(parents=True, exist_ok=True)
    for name, process in stack.processes.items():
        (logs / f"{label}-{name.replace('/', '-').replace(' ', '-')}.jsonl").write_text(
            process.log_text() + "\n"
        )


def run_sizes(workdir: Path, sizes: list[int], args: argparse.Namespace) -> list[Level]:
    """0 routes, then each size in turn, on one stack."""
    with running(workdir, args, "sizes") as (stack, cluster, client):
        started = time.perf_counter()
        quiesce(stack)
        levels = [Level(0, settled_rss(stack, workdir), time.perf_counter() - started)]
        levels[0].resources = applied(stack)[-1]["resources"]
        print(f"0 routes: {_levels_line(levels[0])}", flush=True)
        profile_dump(stack, args.profile, "0")
        for size in sizes:
            levels.append(measure_level(stack, cluster, client, size))
            print(f"{levels[-1].label}: {_levels_line(levels[-1])}", flush=True)
            profile_dump(stack, args.profile, str(size))
        if args.restart and sizes:
            try:
                levels.append(measure_restart(stack, client, sizes[-1]))
            except NotServed as exc:
                print(f"{sizes[-1]} routes, restarted: the new proxy is never served: {exc}")
            else:
                print(f"{levels[-1].label}: {_levels_line(levels[-1])}", flush=True)
        return levels


def measure_restart(stack: Stack, client: Client, routes: int) -> Level:
    """The controller and the proxy stopped and started again (same ports) with `routes` in
    the API server: the controller lists them all at once, the proxy gets one full snapshot."""
    expected = applied(stack)[-1]["resources"]
    started = time.perf_counter()
    for role in ("proxy", "controller"):
        stack.processes.pop(role).stop(grace=30)
        (stack.workdir / f"{role}.probe").unlink(missing_ok=True)
    stack.start_controller(port=stack.discovery_ports[0])
    stack.start_proxy()
    client.close()
    client.wait(host(routes - 1), PATH, check=lambda: stream_failing(stack))
    quiesce(stack, expected)
    seconds = time.perf_counter() - started
    level = Level(routes, settled_rss(stack, stack.workdir), seconds, expected, restarted=True)
    return level


def _levels_line(level: Level) -> str:
    figures = ", ".join(f"{role} {_mib(level.rss[role]).strip()}" for role in ROLES)
    phases = "".join(f", {name} {seconds:.0f} s" for name, seconds in level.phases.items())
    return f"{figures} ({level.resources} resources served, {level.seconds:.0f} s{phases})"


if __name__ == "__main__":
    main()
