"""Benchmark: controller translation at 1k and 10k HTTPRoutes, and one edit to its publish.

    ./pants run bench:translate

Builds a cluster's worth of objects (one Gateway per 100 routes, a Service and EndpointSlice
per route), then measures on this machine, in this run:

- full translation (objects → snapshots, verdicts, Events), as the controller runs it (with the
  cyclic garbage collector paused for the pass);
- publish of the full result into a fresh snapshot registry (encoding every resource);
- one route edit: the controller's `Translator` patches the previous pass (only the HTTPRoute
  table changed, so only the edited route is withdrawn and translated again), plus the registry
  publish, which re-encodes only the resources that changed: what the controller does per edit;
- one EndpointSlice change (a new pod address): the same patch, refreshing one endpoint set.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

from coxswain_controller.discovery.registry import SnapshotRegistry
from coxswain_controller.publish import gc_paused, translate_pass
from coxswain_controller.translate import Inputs, Options
from coxswain_controller.translate.incremental import Translator
from coxswain_controller.translate.inputs import KINDS

ROUTES_PER_GATEWAY = 100
OPTIONS = Options()


def _objects(routes: int) -> list[dict[str, Any]]:
    objects: list[dict[str, Any]] = [
        {"kind": "GatewayClass", "metadata": {"name": "coxswain"},
         "spec": {"controllerName": "coxswain-labs.dev/gateway-controller"}},
    ]  # fmt: skip
    for g in range(max(1, routes // ROUTES_PER_GATEWAY)):
        listener = {
            "name": "http",
            "port": 80,
            "protocol": "HTTP",
            "hostname": f"*.zone{g}.example.com",
        }
        objects.append({
            "kind": "Gateway",
            "metadata": {"name": f"gw{g}", "namespace": f"ns{g}", "generation": 1},
            "spec": {"gatewayClassName": "coxswain", "listeners": [listener]},
        })  # fmt: skip
    for r in range(routes):
        objects += _route(r)
    return objects


def _route(r: int, backend_port: int = 80) -> list[dict[str, Any]]:
    ns, g = f"ns{r // ROUTES_PER_GATEWAY}", r // ROUTES_PER_GATEWAY
    return [
        {"kind": "HTTPRoute", "metadata": {"name": f"r{r}", "namespace": ns, "generation": 1,
                                           "creationTimestamp": "2026-01-01T00:00:00Z"},
         "spec": {"parentRefs": [{"name": f"gw{g}"}], "hostnames": [f"app{r}.zone{g}.example.com"],
                  "rules": [{"matches": [{"path": {"type": "PathPrefix", "value": f"/svc{r}"}}],
                             "backendRefs": [{"name": f"svc{r}", "port": backend_port}]}]}},
        {"kind": "Service", "metadata": {"name": f"svc{r}", "namespace": ns},
         "spec": {"ports": [{"name": "http", "port": 80}]}},
        {"kind": "EndpointSlice", "metadata": {"name": f"svc{r}-1", "namespace": ns,
                                               "labels": {"kubernetes.io/service-name": f"svc{r}"}},
         "ports": [{"name": "http", "port": 8080}],
         "endpoints": [{"addresses": [f"10.{r // 65536}.{r // 256 % 256}.{r % 256}"]}]},
    ]  # fmt: skip


def measure(routes: int) -> dict[str, float]:
    objects = _objects(routes)
    inputs = Inputs.from_objects(objects)
    t0 = time.perf_counter()
    translator = Translator(OPTIONS)
    result = translate_pass(translator, inputs)
    t1 = time.perf_counter()
    registry = SnapshotRegistry()
    with gc_paused():
        registry.publish(result.snapshots)
    t2 = time.perf_counter()
    # As the watch cache hands it over: the HTTPRoute table replaced, every other table the same.
    route = next(o for o in _route(7) if o["kind"] == "HTTPRoute")
    route["spec"]["rules"][0]["matches"][0]["path"]["value"] = "/edited"
    route_table = dict(inputs.table("HTTPRoute"))
    route_table[("ns0", "r7")] = route
    kinds = {kind: inputs.table(kind) for kind in KINDS}
    edited_inputs = Inputs({**kinds, "HTTPRoute": route_table})
    t3 = time.perf_counter()
    seq_before = registry.seq
    edited_result = translate_pass(translator, edited_inputs)
    with gc_paused():
        registry.publish(edited_result.snapshots)
    t4 = time.perf_counter()
    assert registry.seq == seq_before + 1
    # Endpoint churn: one Service's slice gets a new pod address.
    endpoint_slice = next(o for o in _route(11) if o["kind"] == "EndpointSlice")
    endpoint_slice["endpoints"] = [{"addresses": ["10.255.0.1"]}]
    slices = dict(edited_inputs.table("EndpointSlice"))
    slices[("ns0", "svc11-1")] = endpoint_slice
    churned_inputs = Inputs({**kinds, "HTTPRoute": route_table, "EndpointSlice": slices})
    t5 = time.perf_counter()
    churned = translate_pass(translator, churned_inputs)
    with gc_paused():
        registry.publish(churned.snapshots)
    t6 = time.perf_counter()
    assert registry.seq == seq_before + 2
    return {
        "translate": t1 - t0,
        "first_publish": t2 - t1,
        "edit_to_publish": t4 - t3,
        "endpoints_to_publish": t6 - t5,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,10000")
    args = parser.parse_args()
    header = f"{'routes':>8} {'translate s':>12} {'first publish s':>16} {'edit→publish s':>15}"
    print(f"{header} {'endpoints→publish s':>20}")
    for size in (int(s) for s in args.sizes.split(",")):
        r = measure(size)
        figures = (
            f"{r['translate']:>12.3f} {r['first_publish']:>16.3f} {r['edit_to_publish']:>15.3f}"
            f" {r['endpoints_to_publish']:>20.3f}"
        )
        print(f"{size:>8} {figures}")


if __name__ == "__main__":
    main()
