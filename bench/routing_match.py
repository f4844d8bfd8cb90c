"""Benchmark: the request matcher at 100, 1k, 10k and 50k routes.

    ./pants run bench:routing_match            (add `-- --quick` for a smoke run)

For each size it builds a routing table shaped like a busy shared proxy — many exact hosts,
some wildcard hosts, a hostless fallback; mostly PathPrefix routes, some Exact, some with a
method or header condition, about 1% RegularExpression — encodes it as the controller would,
then measures on this machine, in this run:

- decode: wire bytes → model (what a proxy does on every snapshot);
- compile: model → Router;
- recompile: the Router again after one host's routes changed, reusing the previous one's other
  host tables (`compile_router(resources, previous)`, what a proxy does on a delta);
- memory per route: bytes held by the decoded model plus the compiled router (tracemalloc);
- match: median nanoseconds per `Router.match` over requests that hit existing routes, with
  hosts drawn uniformly (every request a likely CPU-cache miss: the worst case) and by Zipf
  popularity (a few hot hosts, as production traffic is).

It prints the 50k/1k median ratios: how match cost grows with the table. The lookup does the
same work at every size (a dict per host tier, one probe per path segment); what grows is
memory latency once the table outgrows the CPU caches. Absolute times vary with the machine;
the ratios and the per-route memory are what `docs/performance.md` tracks.
"""

from __future__ import annotations

import argparse
import gc
import random
import statistics
import time
import tracemalloc
from dataclasses import dataclass

from coxswain_proto.gen.coxswain.discovery import v1 as pb
from coxswain_routing import (
    Backend,
    HostRoutes,
    Match,
    PathMatch,
    PathType,
    RouteId,
    Router,
    Rule,
    ValueMatch,
    compile_router,
    from_wire,
    to_wire,
)

PORT = 8080
ROUTES_PER_HOST = 10
BATCH = 200


@dataclass(frozen=True)
class Request:
    host: str
    method: str
    path: str
    headers: dict[str, str]


def _rule(host_index: int, i: int) -> Rule:
    rid = RouteId(1_700_000_000 + i, f"ns{host_index % 50}", f"route-{host_index}-{i}")
    backend = (Backend(endpoints=f"endpoints/ns{host_index % 50}/svc-{host_index}/80"),)
    if i % 100 == 99:
        match = Match(PathMatch(PathType.REGULAR_EXPRESSION, rf"/re{i}/[0-9]+/items"))
    elif i % 10 == 0:
        match = Match(PathMatch(PathType.EXACT, f"/exact/{i}"))
    elif i % 10 == 1:
        match = Match(PathMatch(PathType.PATH_PREFIX, f"/api/v{i}"), method="POST")
    elif i % 10 == 2:
        match = Match(
            PathMatch(PathType.PATH_PREFIX, f"/api/v{i}"), headers=(ValueMatch("x-canary", "on"),)
        )
    else:
        match = Match(PathMatch(PathType.PATH_PREFIX, f"/svc{i}/api"))
    return Rule(rid, (match,), backends=backend)


def build_table(routes: int) -> list[HostRoutes]:
    hosts = max(1, routes // ROUTES_PER_HOST)
    tables = []
    for h in range(hosts):
        if h % 20 == 19:
            host = f"*.zone{h}.example.com"
        elif h == 0:
            host = ""
        else:
            host = f"app{h}.example.com"
        rules = tuple(_rule(h, h * ROUTES_PER_HOST + i) for i in range(ROUTES_PER_HOST))
        tables.append(HostRoutes(f"gateway/ns/gw{h % 7}", PORT, host, rules))
    return tables


def _request_for(table: HostRoutes, rng: random.Random) -> Request:
    host = table.host.replace("*", "www") if table.host else "unknown.example.net"
    match = rng.choice(table.rules).matches[0]
    path = match.path.value
    if match.path.type is PathType.REGULAR_EXPRESSION:
        path = path.split("/[")[0] + "/42/items"
    elif match.path.type is PathType.PATH_PREFIX:
        path += "/orders/17"
    headers = {h.name: h.value for h in match.headers}
    return Request(host, match.method or "GET", path, headers)


def requests_for(
    tables: list[HostRoutes], count: int, *, zipf: float = 0.0, seed: int = 7
) -> list[Request]:
    """Requests hitting routes of `tables`: hosts uniformly at random (zipf=0, the worst case
    for CPU caches), or by Zipf popularity with exponent `zipf`, as real traffic is skewed."""
    rng = random.Random(seed)
    if not zipf:
        return [_request_for(rng.choice(tables), rng) for _ in range(count)]
    ranked = tables[:]
    rng.shuffle(ranked)
    weights = [1 / (rank**zipf) for rank in range(1, len(ranked) + 1)]
    return [_request_for(t, rng) for t in rng.choices(ranked, weights, k=count)]


def median_match_ns(router: Router, requests: list[Request], rounds: int) -> float:
    match = router.match
    per_request = []
    for _ in range(rounds):
        for start in range(0, len(requests), BATCH):
            batch = requests[start : start + BATCH]
            t0 = time.perf_counter_ns()
            for r in batch:
                match(PORT, r.host, r.method, r.path, r.headers)
            per_request.append((time.perf_counter_ns() - t0) / len(batch))
    return statistics.median(per_request)


@dataclass(frozen=True)
class Result:
    routes: int
    wire_bytes: int
    decode_s: float
    compile_s: float
    recompile_s: float  # one host changed, the previous router reused
    bytes_per_route: float
    median_ns: float  # hosts uniformly at random
    zipf_median_ns: float  # hosts by Zipf(1.1) popularity


def _held_bytes(payload: list[bytes]) -> int:
    """Memory the decoded model and compiled router hold (measured apart: tracemalloc slows
    everything it watches, so it never overlaps a timing)."""
    gc.collect()
    tracemalloc.start()
    decoded = [from_wire(pb.Resource.parse(data)) for data in payload]
    router = compile_router(decoded)
    gc.collect()
    held, _ = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    del router, decoded
    return held


def measure(routes: int, *, requests: int, rounds: int) -> Result:
    tables = build_table(routes)
    payload = [bytes(to_wire(t)) for t in tables]
    gc.collect()
    t0 = time.perf_counter()
    decoded = [from_wire(pb.Resource.parse(data)) for data in payload]
    t1 = time.perf_counter()
    router = compile_router(decoded)
    t2 = time.perf_counter()
    # One host's routes as a delta brings them: a new object, decoded afresh.
    edited, middle = list(decoded), len(decoded) // 2
    edited[middle] = from_wire(pb.Resource.parse(payload[middle]))
    t3 = time.perf_counter()
    compile_router(edited, router)
    t4 = time.perf_counter()
    held = _held_bytes(payload)
    sample = requests_for(tables, requests)
    for r in sample[:100]:  # every sample request must hit a route, or the figure is of misses
        outcome = router.match(PORT, r.host, r.method, r.path, r.headers)
        assert outcome.status == 200, (r, outcome)
    return Result(
        routes=routes,
        wire_bytes=sum(map(len, payload)),
        decode_s=t1 - t0,
        compile_s=t2 - t1,
        recompile_s=t4 - t3,
        bytes_per_route=held / routes,
        median_ns=median_match_ns(router, sample, rounds),
        zipf_median_ns=median_match_ns(router, requests_for(tables, requests, zipf=1.1), rounds),
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, one round")
    args = parser.parse_args()
    sizes = [100, 1000] if args.quick else [100, 1_000, 10_000, 50_000]
    rounds = 1 if args.quick else 5
    print(
        f"{'routes':>8} {'wire KiB':>9} {'decode s':>9} {'compile s':>10} {'recompile ms':>13}"
        f" {'B/route':>8} {'match ns':>9} {'zipf ns':>8}"
    )
    results = {}
    for size in sizes:
        r = measure(size, requests=5_000, rounds=rounds)
        results[size] = r
        print(
            f"{r.routes:>8} {r.wire_bytes / 1024:>9.0f} {r.decode_s:>9.3f} {r.compile_s:>10.3f}"
            f" {r.recompile_s * 1000:>13.1f} {r.bytes_per_route:>8.0f} {r.median_ns:>9.0f}"
            f" {r.zipf_median_ns:>8.0f}"
        )
    if 50_000 in results:
        big, small = results[50_000], results[1_000]
        print(f"median match 50k/1k ratio, uniform hosts: {big.median_ns / small.median_ns:.2f}")
        zipf_ratio = big.zipf_median_ns / small.zipf_median_ns
        print(f"median match 50k/1k ratio, Zipf(1.1) hosts: {zipf_ratio:.2f}")
        ten = results[10_000]
        print(
            f"decode + compile of 10k routes: {ten.decode_s + ten.compile_s:.3f} s (target < 1 s)"
        )


if __name__ == "__main__":
    main()
