"""Benchmark: change-to-traffic time at 100, 1k and 3k routes, through the whole stack.

    ./pants run bench:convergence            (add `-- --sizes 100` for a quick run)

Starts the local stack (API emulator, echo backends, identity, controller, shared proxy, each
its own process), creates a Gateway with N HTTPRoutes (one hostname each), then repeatedly edits
one route's backend and measures the time from the API server accepting the edit to the first
request through the proxy that reaches the new backend: watch → debounce → translate → publish
→ stream → stage → swap. Prints p50 and p99 per size.
"""

from __future__ import annotations

import argparse
import http.client
import json
import random
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import kubernetes

from coxswain_devkit.stack import Launcher, Stack, StackPorts

NS, GROUP, VERSION = "bench", "gateway.networking.k8s.io", "v1"
SAMPLES = 25
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


def _wait(port: int, host: str, pod: str, timeout: float = 120.0) -> float:
    start = time.perf_counter()
    while _pod(port, host) != pod:
        if time.perf_counter() - start > timeout:
            raise TimeoutError(f"{host} never reached {pod}")
    return time.perf_counter() - start


def _route(i: int, backend: str) -> dict[str, Any]:
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


def _setup(stack: Stack, routes: int) -> tuple[Any, int]:
    client = stack.client()
    custom: Any = kubernetes.client.CustomObjectsApi(client)
    core: Any = kubernetes.client.CoreV1Api(client)
    for name in ("one", "two"):
        core.create_namespaced_service(
            NS, {"metadata": {"name": name}, "spec": {"ports": [{"name": "http", "port": 80}]}}
        )
    custom.create_cluster_custom_object(GROUP, VERSION, "gatewayclasses", GATEWAY_CLASS)
    custom.create_namespaced_custom_object(GROUP, VERSION, NS, "gateways", GATEWAY)
    for i in range(routes):
        custom.create_namespaced_custom_object(GROUP, VERSION, NS, "httproutes", _route(i, "one"))
    port = stack.bind_ports(NS, "gw")["http"]
    _wait(port, f"r{routes - 1}.bench.example", "one-0")
    return custom, port


def measure(routes: int, workdir: Path) -> list[float]:
    stack = Stack(
        Launcher.modules(),
        workdir,
        echo_services=[(NS, "one"), (NS, "two")],
        ports=StackPorts.free(),
        extra_objects=[{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}}],
    )
    stack.start()
    try:
        custom, port = _setup(stack, routes)
        rng = random.Random(3)
        backends = dict.fromkeys(range(routes), "one")
        samples = []
        for _ in range(SAMPLES):
            i = rng.randrange(routes)
            backends[i] = "two" if backends[i] == "one" else "one"
            patch = {"spec": {"rules": [{"backendRefs": [{"name": backends[i], "port": 80}]}]}}
            custom.patch_namespaced_custom_object(GROUP, VERSION, NS, "httproutes", f"r{i}", patch)
            samples.append(_wait(port, f"r{i}.bench.example", f"{backends[i]}-0"))
        custom.api_client.close()
        return samples
    finally:
        stack.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="100,1000,3000")
    args = parser.parse_args()
    print(f"{'routes':>7} {'p50 ms':>8} {'p99 ms':>8} {'max ms':>8}  ({SAMPLES} edits each)")
    for size in (int(s) for s in args.sizes.split(",")):
        with tempfile.TemporaryDirectory() as tmp:
            samples = sorted(measure(size, Path(tmp)))
        p50 = statistics.median(samples) * 1000
        p99 = samples[min(len(samples) - 1, round(0.99 * (len(samples) - 1)))] * 1000
        print(f"{size:>7} {p50:>8.0f} {p99:>8.0f} {samples[-1] * 1000:>8.0f}", flush=True)


if __name__ == "__main__":
    main()
