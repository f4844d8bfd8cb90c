"""Benchmark: change-to-traffic time at 100 to 10k routes, through the whole stack, under load.

    ./pants run bench:convergence            (add `-- --sizes 100 --edits 20` for a quick run)

Starts the local stack (API emulator, echo backends, identity, controller, shared proxy, each
its own process), creates a Gateway with N HTTPRoutes (one hostname each), waits until the
controller has written every status, then, while a steady keep-alive load runs through the
proxy (`steady_load`), measures two kinds of change, each from just before the client sends it
to the API server to the first request through the proxy that reaches the new backend
(watch → debounce → translate → publish → stream → stage → apply):

- route edits: one route's backendRef flipped between two Services (`--edits` of them, on a
  set of routes the load keeps hitting);
- EndpointSlice changes: the slice of the Service one route names is moved to the other echo
  backend's port (`--slices` of them).

For each size it prints p50 / p99 / max of both, what the load saw (every answer that was not
2xx, every request that got none), and where the time went, phase by phase, from the
controller's `published` and the proxy's `snapshot applied` log lines (tied by publish_seq).
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import random
import statistics
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import kubernetes
from steady_load import LoadReport, SteadyLoad

from coxswain_devkit.stack import Launcher, Stack, StackPorts

NS, GROUP, VERSION = "bench", "gateway.networking.k8s.io", "v1"
HOT_ROUTES = 20  # the routes edited, which the load keeps hitting
FLIP = "flip"  # the Service (and route) whose EndpointSlice moves between the two echoes
GATEWAY_CLASS = {
    "apiVersion": f"{GROUP}/{VERSION}",
    "kind": "GatewayClass",
    "metadata": {"name": "coxswain"},
    "spec": {"controllerName": "coxswain-labs.dev/gateway-controller"},
}
GATEWAY = {
    "apiVersion": f"{GROUP}/{VERSION}",
    "kind": "Gateway",
    "metadata": {"name": "gw", "namespace": NS},
    "spec": {
        "gatewayClassName": "coxswain",
        "listeners": [{"name": "http", "port": 80, "protocol": "HTTP"}],
    },
}
PHASES = (
    "API + watch delivery",
    "debounce",
    "translate",
    "publish (encode)",
    "stream to proxy",
    "proxy stage",
    "proxy apply",
    "first request",
)


@dataclass
class Change:
    sent: float  # time.time() just before the client sent it
    seen: float  # time.time() when a request first reached the new backend

    @property
    def seconds(self) -> float:
        return self.seen - self.sent


@dataclass
class Run:
    edits: list[Change] = field(default_factory=list)
    slices: list[Change] = field(default_factory=list)
    load: LoadReport = field(default_factory=LoadReport)
    phases: dict[str, dict[str, list[float]]] = field(default_factory=dict)  # kind -> phase -> ms
    setup_seconds: float = 0.0


def _pod(port: int, host: str) -> str | None:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    try:
        conn.request("GET", "/", headers={"Host": host})
        response = conn.getresponse()
        body = response.read()
        return str(json.loads(body).get("pod")) if response.status == 200 else None
    except (OSError, ValueError, http.client.HTTPException):
        return None
    finally:
        conn.close()


def _wait(port: int, host: str, pod: str, timeout: float = 300.0) -> float:
    """Poll until `host` answers from `pod`; the time.time() it first did."""
    deadline = time.monotonic() + timeout
    while _pod(port, host) != pod:
        if time.monotonic() > deadline:
            raise TimeoutError(f"{host} never reached {pod}")
    return time.time()


def route(i: int | str, backend: str) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "HTTPRoute",
        "metadata": {"name": f"r{i}", "namespace": NS},
        "spec": {
            "parentRefs": [{"name": "gw"}],
            "hostnames": [f"r{i}.bench.example"],
            "rules": [{"backendRefs": [{"name": backend, "port": 80}]}],
        },
    }


def host(i: int | str) -> str:
    return f"r{i}.bench.example"


def _flip_slice(port: int, pod: str) -> dict[str, Any]:
    return {
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {"name": f"{FLIP}-1", "labels": {"kubernetes.io/service-name": FLIP}},
        "addressType": "IPv4",
        "ports": [{"name": "http", "port": port, "protocol": "TCP"}],
        "endpoints": [{"addresses": ["127.0.0.1"], "conditions": {"ready": True},
                       "targetRef": {"kind": "Pod", "name": pod, "namespace": NS}}],
    }  # fmt: skip


def launcher(profile: Path | None) -> Launcher:
    """From source; with `profile`, the controller and the proxy run under cProfile, each
    writing `<profile>/<role>.pstats` when stopped (their event loops' threads only)."""
    modules = Launcher.modules()
    if profile is None:
        return modules
    profile.mkdir(parents=True, exist_ok=True)
    prefixes = dict(modules.prefixes)
    for role in ("controller", "proxy"):
        out = str(profile.resolve() / f"{role}.pstats")
        prefixes[role] = (sys.executable, "-m", "cProfile", "-o", out, "-m", f"coxswain_{role}")
    return Launcher(prefixes)


def new_stack(workdir: Path, profile: Path | None = None) -> Stack:
    return Stack(
        launcher(profile),
        workdir,
        echo_services=[(NS, "one"), (NS, "two")],
        ports=StackPorts.free(),
        extra_objects=[{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}}],
    )


class Cluster:
    """The bench's objects in the stack's API server, through the real `kubernetes` client."""

    def __init__(self, stack: Stack) -> None:
        self.stack = stack
        self.client = stack.client()
        self.custom: Any = kubernetes.client.CustomObjectsApi(self.client)
        self.core: Any = kubernetes.client.CoreV1Api(self.client)
        self.discovery: Any = kubernetes.client.DiscoveryV1Api(self.client)
        self.routes = 0
        self.echo_ports = {e.service: e.port for e in stack.echoes}

    def base(self) -> int:
        """Services one, two and flip, the class and the Gateway; the Gateway's bind port."""
        for name in ("one", "two", FLIP):
            spec = {"ports": [{"name": "http", "port": 80}]}
            self.core.create_namespaced_service(NS, {"metadata": {"name": name}, "spec": spec})
        self.discovery.create_namespaced_endpoint_slice(
            NS, _flip_slice(self.echo_ports["one"], "one-0")
        )
        self.custom.create_cluster_custom_object(GROUP, VERSION, "gatewayclasses", GATEWAY_CLASS)
        self.custom.create_namespaced_custom_object(GROUP, VERSION, NS, "gateways", GATEWAY)
        self.create(route(FLIP, FLIP))
        port = self.stack.bind_ports(NS, "gw")["http"]
        _wait(port, host(FLIP), "one-0")
        return port

    def create(self, body: dict[str, Any]) -> None:
        self.custom.create_namespaced_custom_object(
            GROUP, VERSION, NS, "httproutes", body, _preload_content=False
        )

    def grow(self, routes: int) -> None:
        """Routes r<routes so far> .. r<routes - 1>, all backed by `one`."""
        for i in range(self.routes, routes):
            self.create(route(i, "one"))
        self.routes = max(self.routes, routes)

    def edit(self, i: int | str, backend: str) -> None:
        patch = {"spec": {"rules": [{"backendRefs": [{"name": backend, "port": 80}]}]}}
        self.custom.patch_namespaced_custom_object(
            GROUP, VERSION, NS, "httproutes", f"r{i}", patch, _preload_content=False
        )

    def move_slice(self, pod: str) -> None:
        """The flip Service's endpoint moved to the echo `pod` ("one-0" or "two-0")."""
        body = _flip_slice(self.echo_ports[pod.removesuffix("-0")], pod)
        self.discovery.replace_namespaced_endpoint_slice(
            f"{FLIP}-1", NS, body, _preload_content=False
        )

    def close(self) -> None:
        self.client.close()


def settle(stack: Stack, *, quiet: float = 3.0, timeout: float = 900.0) -> None:
    """Until the controller's status writes stop for `quiet` seconds: at 10k routes, the first
    statuses take a while, and edits measured meanwhile would queue behind them."""
    url = f"http://127.0.0.1:{stack.admin_port('controller')}/metrics"
    deadline = time.monotonic() + timeout
    last, since = -1.0, time.monotonic()
    while time.monotonic() < deadline:
        with urllib.request.urlopen(url, timeout=10) as answer:
            text = answer.read().decode()
        writes = sum(
            float(line.rsplit(" ", 1)[1])
            for line in text.splitlines()
            if line.startswith("coxswain_status_writes_total{")
        )
        if writes != last:
            last, since = writes, time.monotonic()
        elif time.monotonic() - since >= quiet:
            return
        time.sleep(0.5)
    raise TimeoutError("the controller's status writes never settled")


def measure(routes: int, workdir: Path, args: argparse.Namespace) -> Run:
    stack = new_stack(workdir, args.profile)
    stack.start()
    run = Run()
    try:
        started = time.perf_counter()
        cluster = Cluster(stack)
        port = cluster.base()
        cluster.grow(routes)
        _wait(port, host(routes - 1), "one-0")
        settle(stack)
        run.setup_seconds = time.perf_counter() - started
        rng = random.Random(3)
        hot = rng.sample(range(routes), min(routes, HOT_ROUTES))
        # Three requests in four for a route being changed, the rest anywhere in the table.
        hosts = [host(i) for i in hot] * 3 + [host(FLIP)] * (3 * len(hot) // 4)
        hosts += [host(rng.randrange(routes)) for _ in range(len(hosts) // 3)]
        with SteadyLoad(port, hosts, rate=args.rate, connections=args.connections) as load:
            time.sleep(1.0)
            run.edits = _edits(cluster, port, hot, args.edits)
            run.slices = _slices(cluster, port, args.slices)
            time.sleep(0.5)
        run.load = load.report
        cluster.close()
        run.phases = {
            "route edit": phases(stack, run.edits),
            "EndpointSlice": phases(stack, run.slices),
        }
        return run
    finally:
        stack.stop()


def _edits(cluster: Cluster, port: int, hot: list[int], count: int) -> list[Change]:
    backends = dict.fromkeys(hot, "one")
    changes = []
    for k in range(count):
        i = hot[k % len(hot)]
        backends[i] = "two" if backends[i] == "one" else "one"
        sent = time.time()
        cluster.edit(i, backends[i])
        changes.append(Change(sent, _wait(port, host(i), f"{backends[i]}-0")))
    return changes


def _slices(cluster: Cluster, port: int, count: int) -> list[Change]:
    changes = []
    for k in range(count):
        pod = ("two-0", "one-0")[k % 2]
        sent = time.time()
        cluster.move_slice(pod)
        changes.append(Change(sent, _wait(port, host(FLIP), pod)))
    return changes


def _at(line: dict[str, Any]) -> float:
    return datetime.fromisoformat(str(line["ts"])).timestamp()


def phases(stack: Stack, changes: list[Change]) -> dict[str, list[float]]:
    """Each change's time split at the services' own log lines (`ts` is to the millisecond).

    The controller's `published` line ends its publish: before it come the publish, the
    translation and the debounce (each timed in the line), and before those the API call and
    the watch. The proxy's `snapshot applied` line (same publish_seq, or the first after it if
    the proxy took a later one) ends its apply, after its stage; between the two lines, the
    stream. After it, until the change was seen, the first request (and the polling)."""
    published = [x for x in stack.processes["controller"].lines if x.get("msg") == "published"]
    applied = [x for x in stack.processes["proxy"].lines if x.get("msg") == "snapshot applied"]
    split: dict[str, list[float]] = {p: [] for p in PHASES}
    for change in changes:
        pub = next((x for x in published if _pass_start(x) >= change.sent - 0.002), None)
        if pub is None:
            continue
        app = next((x for x in applied if x["publish_seq"] >= pub["publish_seq"]), None)
        if app is None:
            continue
        begun = _pass_start(pub) - pub.get("debounce_ms", 0.0) / 1000
        received = _at(app) - (app["stage_ms"] + app["apply_ms"]) / 1000
        values = (
            (begun - change.sent) * 1000,
            pub.get("debounce_ms", 0.0),
            pub["translate_ms"],
            pub["publish_ms"],
            (received - _at(pub)) * 1000,
            app["stage_ms"],
            app["apply_ms"],
            (change.seen - _at(app)) * 1000,
        )
        for name, value in zip(PHASES, values, strict=True):
            split[name].append(value)
    return split


def _pass_start(line: dict[str, Any]) -> float:
    return _at(line) - (line["translate_ms"] + line["publish_ms"]) / 1000


def quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))] if ordered else 0.0


def _row(changes: list[Change]) -> str:
    ms = [c.seconds * 1000 for c in changes]
    return f"{quantile(ms, 0.5):>7.0f} {quantile(ms, 0.99):>7.0f} {max(ms, default=0):>7.0f}"


def report(size: int, run: Run) -> None:
    print(
        f"{size:>7} {_row(run.edits)}   {_row(run.slices)}   "
        f"{run.load.failed:>5} / {run.load.sent:<6} ({run.setup_seconds:.0f} s setup)",
        flush=True,
    )


def report_details(size: int, run: Run) -> None:
    print(f"\n{size} routes. Load: {run.load.summary()}")
    for when, what in run.load.failures:
        print(f"  failed at {when:.3f}: {what}")
    for kind, split in run.phases.items():
        counted = len(next(iter(split.values()), []))
        print(f"  where the time goes, {kind} ({counted} changes), ms: p50 / p99 / mean")
        for name, values in split.items():
            print(
                f"    {name:<22} {quantile(values, 0.5):>7.1f} {quantile(values, 0.99):>7.1f} "
                f"{statistics.fmean(values) if values else 0:>7.1f}"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="100,1000,3000,10000")
    parser.add_argument("--edits", type=int, default=100, help="route edits per size")
    parser.add_argument("--slices", type=int, default=25, help="EndpointSlice changes per size")
    parser.add_argument("--rate", type=float, default=400, help="steady load, requests/s")
    parser.add_argument("--connections", type=int, default=8, help="keep-alive connections")
    parser.add_argument(
        "--profile", type=Path, help="run the controller and proxy under cProfile, into DIR"
    )
    args = parser.parse_args()
    load = os.getloadavg()
    print(f"load average before: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}, {os.cpu_count()} CPUs")
    print(f"steady load {args.rate:.0f} requests/s over {args.connections} connections")
    print(f"{'':>7} {'route edit (ms)':^23}   {'EndpointSlice (ms)':^23}   {'load':^14}")
    print(f"{'routes':>7} {'p50':>7} {'p99':>7} {'max':>7}   {'p50':>7} {'p99':>7} {'max':>7}  "
          f" failed / sent")  # fmt: skip
    runs = []
    for size in (int(s) for s in args.sizes.split(",")):
        with tempfile.TemporaryDirectory() as tmp:
            run = measure(size, Path(tmp), args)
        report(size, run)
        runs.append((size, run))
    for size, run in runs:
        report_details(size, run)
    load = os.getloadavg()
    print(f"\nload average after: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    if any(run.load.failed for _, run in runs):
        raise SystemExit("some requests failed while routing changed")


if __name__ == "__main__":
    main()
