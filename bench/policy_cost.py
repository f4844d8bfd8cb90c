"""Benchmark: what each of a rule's policies costs a request, in process.

    ./pants run bench:policy_cost            (add `-- --quick` for a smoke run)

Times `policies.gate.admit` (and the affinity pick) on a stand-in for a request cycle, one
policy part at a time, as the proxy runs them after a match: the source-range check with its
address memo, one rate limit keyed per client (the bucket seen before), the in-flight count, a
basic-auth credential already verified (a digest and a dict lookup), the affinity cookie
found and honoured, an access log line (made and queued;
written in batches). Beside them, the one-off costs: an apr1 verification (Python, on the event
loop, once per credential), a bcrypt one at cost 10 (libcrypt, in a worker thread), and a
rule without any policy (an attribute test, for scale). Prints the median nanoseconds per
call over batches; docs/performance.md records them next to the ~16 µs a proxied request
costs here.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import ctypes
import io
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from coxswain_proxy.dataplane.http.policies import accesslog, compiled_policy, gate, htpasswd
from coxswain_proxy.dataplane.http.policies.affinity import Affinity, endpoint_token
from coxswain_proxy.dataplane.upstream.picker import EndpointPicker
from coxswain_routing import (
    Backend,
    BasicAuth,
    Endpoint,
    EndpointSet,
    Policy,
    RateLimit,
    RouteId,
    Rule,
    SessionAffinity,
    SourceRanges,
)

BATCH = 1000
RANGES = Policy(source_ranges=SourceRanges(("10.0.0.0/8", "192.168.0.0/16"), ("10.9.0.0/16",)))


@dataclass
class _Conn:
    forwarded: bytes = b"10.1.2.3\r\nx-forwarded-proto: http\r\nx-forwarded-host: "
    scheme: str = "http"


@dataclass
class _Runtime:
    loop: asyncio.AbstractEventLoop


@dataclass
class _Tables:
    endpoint_picker: EndpointPicker

    def picker(self, backend: Backend) -> EndpointPicker:
        return self.endpoint_picker


@dataclass
class _Cycle:
    """What `gate.admit` reads of a request cycle, and no more."""

    rt: _Runtime
    headers: list[tuple[bytes, bytes]]
    conn: _Conn = field(default_factory=_Conn)
    phase: int = 0
    cors: list[tuple[bytes, bytes]] = field(default_factory=list)
    # What an access log line reads.
    method: bytes = b"GET"
    host: bytes = b"shop.example.com"
    url: bytes = b"/cart?id=7"
    status: int = 200
    route: str = "Ingress/shop/web"
    origin: tuple[str, int] | None = ("10.0.0.12", 8080)
    version: str = "1.1"


def _median_ns(call: Callable[[], object], rounds: int) -> float:
    samples = []
    for _ in range(rounds):
        t0 = time.perf_counter_ns()
        for _ in range(BATCH):
            call()
        samples.append((time.perf_counter_ns() - t0) / BATCH)
    return statistics.median(samples)


def _admit(policy: Policy, cycle: _Cycle) -> Callable[[], object]:
    compiled = compiled_policy.compile_policy(Rule(RouteId(0, "ns", "bench"), policy=policy))
    assert compiled is not None
    return lambda: gate.admit(cycle, None, compiled)  # type: ignore[arg-type]


def _bcrypt_ms() -> float:
    function = htpasswd._crypt_rn
    if function is None:
        return float("nan")
    data = ctypes.create_string_buffer(32768)
    hashed = function(b"secret", b"$2y$10$abcdefghijklmnopqrstuu", data, 32768)
    assert hashed is not None
    t0 = time.perf_counter()
    assert htpasswd.verify_bcrypt(b"secret", bytes(hashed))
    return (time.perf_counter() - t0) * 1000


async def measure(rounds: int) -> dict[str, float]:
    loop = asyncio.get_running_loop()
    token = base64.b64encode(b"alice:secret")
    auth = [(b"authorization", b"Basic " + token)]
    cycle = _Cycle(_Runtime(loop), [(b"host", b"example.com"), *auth])
    users = (("alice", "$apr1$saltsalt$LrttParrLPdxvgutaSXWJ0"),)
    results = {
        "no policy (attribute test)": _median_ns(lambda: cycle.phase is not None, rounds),
        "source ranges (3 CIDRs, memo hit)": _median_ns(_admit(RANGES, cycle), rounds),
        "rate limit per client": _median_ns(
            _admit(Policy(rate_limits=(RateLimit(10**9, burst=10**9),)), cycle), rounds
        ),
        "basic auth, credential remembered": _median_ns(
            _admit(Policy(basic_auth=BasicAuth("r", users)), cycle), rounds
        ),
    }
    in_flight = _admit(Policy(connections_per_client=10**6), cycle)
    cycle.phase = 7  # each counted request is already done, as a finished one would be
    results["in-flight count per client"] = _median_ns(in_flight, rounds)
    cycle.phase = 0
    endpoints = EndpointSet("ns", "svc", 80, tuple(Endpoint(f"10.0.0.{i}", 80) for i in range(8)))
    picker = EndpointPicker(endpoints)
    affinity = Affinity(SessionAffinity("route"))
    pinned = b"route=" + endpoint_token(picker.origins[3])
    cycle.headers.append((b"cookie", b"a=b; " + pinned))
    backends = (Backend(1, endpoints.key),)
    tables = _Tables(picker)
    results["affinity cookie honoured"] = _median_ns(
        lambda: affinity.pinned(cycle, tables, backends),
        rounds,
    )
    with contextlib.redirect_stdout(io.StringIO()):
        results["access log line"] = _median_ns(lambda: accesslog.record(cycle, 0.0), rounds)  # type: ignore[arg-type]
        accesslog.flush()
    t0 = time.perf_counter_ns()
    for _ in range(20):
        htpasswd.verify_fast(b"secret", users[0][1].encode())
    results["apr1 verification (once per credential)"] = (time.perf_counter_ns() - t0) / 20
    results["bcrypt cost 10 (once per credential, off the loop)"] = _bcrypt_ms() * 1e6
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="one round")
    args = parser.parse_args()
    results = asyncio.run(measure(3 if args.quick else 30))
    print(f"{'per request':55} {'median':>12}")
    for name, ns in results.items():
        shown = f"{ns / 1e6:.2f} ms" if ns >= 1e6 else f"{ns / 1000:.2f} µs"
        print(f"{name:55} {shown:>12}")


if __name__ == "__main__":
    main()
