"""Where an HTTP/2 request's time goes in the proxy: cProfile of N h2c requests, in process.

    PYTHONPATH=... python bench/h2_profile.py [--requests N] [--top K]

`--count N` runs N requests under a tracer and prints the Python calls and bytecodes per request
(a count: the same code gives the same figure on a loaded machine; C work such as httptools'
parsing is not in it). `--plain RUNS` runs without the profiler, RUNS times, and prints
h2load's figures and the data plane's CPU time per request (this process's; h2load and nginx
run apart): the real cost, less swayed than req/s by other work on a shared machine.
`--tls` runs h2 over TLS (ALPN) instead of h2c. `--close` makes the clients HTTP/1.1 with a new
connection per request (ApacheBench, from apache2-utils); `H2PROF_DUMP=<file>` keeps the profile
for pstats.

One data plane (the bench snapshot of `proxy_throughput`: 100 routes, metrics on) runs in this
process under cProfile, on uvloop; nginx is its HTTP/1.1 backend and `h2load` (50 connections x
10 streams, in its own process) the client, so only the proxy's work is profiled. It prints the
cumulative cost per request (µs) of the pieces docs/performance.md names — the `h2` library's
frame parsing and HPACK on the client side, the httptools re-parse of an HTTP/1.1 response in
`h2stream` (only the proxy's own answers take it now), the request cycle itself, the upstream
connection — then the top functions by own time. cProfile roughly doubles Python's cost: the
split, not the sum, is the result.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import os
import pstats
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any

import proxy_throughput as bench

from coxswain_devkit.pki import CertificateAuthority
from coxswain_routing import TlsCertificate

# (label, predicate on (file, function name)) for the cumulative split; first match counts.
PIECES = (
    ("h2 library: receive_data (frame parsing, HPACK decode, state machine)",
     lambda f, n: f.endswith("h2/connection.py") and n == "receive_data"),
    ("h2 library: send_headers (HPACK encode)",
     lambda f, n: f.endswith("h2/connection.py") and n == "send_headers"),
    ("h2 library: send_data + end_stream",
     lambda f, n: f.endswith("h2/connection.py") and n in ("send_data", "end_stream")),
    ("h2stream: httptools re-parse of the response (H2Stream.write)",
     lambda f, n: f.endswith("http2/h2stream.py") and n == "write"),
    ("server: validate.request (RFC 9113 §8.2-8.3 checks)",
     lambda f, n: f.endswith("http2/validate.py") and n == "request"),
    ("request cycle: dispatch.start (routing, filters, pool, upstream write)",
     lambda f, n: f.endswith("http/dispatch.py") and n == "start"),
    ("upstream: UpstreamConnection.data_received (response parse, cycle callbacks)",
     lambda f, n: f.endswith("upstream/connection.py") and n == "data_received"),
    ("server: H2ServerConnection.data_received (all of a client read)",
     lambda f, n: f.endswith("http2/server.py") and n == "data_received"),
)  # fmt: skip


async def run(
    requests: int,
    port: int,
    cert: TlsCertificate,
    h1: bool = False,
    close: bool = False,
    tls: bool = False,
) -> None:
    from coxswain_proxy.dataplane.core import Dataplane, Options

    plane = await Dataplane(Options(shared=False, address="127.0.0.1")).start()
    tls_port = bench.free_port()
    resources = bench.snapshot(port, tls_port, cert, bench.BACKEND_PORT, 1)
    await plane.apply(resources)  # type: ignore[arg-type]
    url = f"https://127.0.0.1:{tls_port}/p50/x" if tls else f"http://127.0.0.1:{port}/p50/x"
    if close:
        # ApacheBench without -k: one TCP connection per request, 50 at a time.
        client = await asyncio.create_subprocess_exec(
            "ab", "-q", "-n", str(requests), "-c50", "-H", "Host: bench.example.com", url,
            stdout=subprocess.PIPE,
        )  # fmt: skip
        out, _ = await client.communicate()
        lines = out.decode().splitlines()
        print("\n".join(line for line in lines if "Requests per second" in line))
    else:
        client = await asyncio.create_subprocess_exec(
            "h2load", *(["--h1"] if h1 else []), "-t1", "-c50", "-m10", f"-n{requests}",
            "-H", ":authority: bench.example.com", url, stdout=subprocess.PIPE,
        )  # fmt: skip
        out, _ = await client.communicate()
        print(out.decode().split("\n\n", 1)[-1].split("time for request")[0].strip())
    await plane.close(1.0)


def main() -> None:
    import uvloop

    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=50_000)
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument(
        "--plain",
        type=int,
        default=0,
        metavar="RUNS",
        help="no profiler: RUNS h2load runs, each one's req/s printed (the best is the figure)",
    )
    parser.add_argument(
        "--count",
        type=int,
        default=0,
        metavar="N",
        help="N requests under a tracer: Python calls and bytecodes per request (load-free)",
    )
    parser.add_argument("--tls", action="store_true", help="h2 over TLS (ALPN) instead of h2c")
    parser.add_argument(
        "--h1", action="store_true", help="HTTP/1.1 clients (h2load --h1, 10 pipelined) instead"
    )
    parser.add_argument(
        "--close",
        action="store_true",
        help="HTTP/1.1, a new connection per request (ApacheBench, apache2-utils) instead",
    )
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="coxswain-h2prof-"))
    issued = CertificateAuthority.create().issue(dns=["bench.example.com"])
    cert = TlsCertificate(("bench.example.com",), issued.chain_pem, issued.key_pem, "bench/cert")
    backend = bench.nginx_conf(
        root,
        workers=1,
        listen=f"127.0.0.1:{bench.BACKEND_PORT}",
        body='location / { return 200 "' + bench.BODY.decode() + '"; }',
    )
    nginx = subprocess.Popen(["nginx", "-c", str(backend), "-g", "daemon off;"])
    try:
        bench._wait_port(bench.BACKEND_PORT)
        if args.count:
            plane = run(args.count, bench.free_port(), cert, args.h1, args.close, args.tls)
            counts = count(lambda: uvloop.run(plane))
            calls, opcodes = (n / args.count for n in counts)
            print(f"counted: {calls:.1f} Python calls, {opcodes:.0f} bytecodes per request")
            return
        if args.plain:
            for _ in range(args.plain):
                began = time.process_time()
                uvloop.run(
                    run(args.requests, bench.free_port(), cert, args.h1, args.close, args.tls)
                )
                cpu = (time.process_time() - began) / args.requests * 1e6
                print(f"proxy CPU {cpu:.1f} µs/request (this process: the data plane alone)")
            return
        profile = cProfile.Profile()
        profile.enable()
        uvloop.run(run(args.requests, bench.free_port(), cert, args.h1, args.close, args.tls))
        profile.disable()
        if os.environ.get("H2PROF_DUMP"):
            profile.dump_stats(os.environ["H2PROF_DUMP"])
    finally:
        nginx.terminate()
        nginx.wait()
    report(pstats.Stats(profile), args.requests, args.top)


def count(work: Callable[[], None]) -> tuple[int, int]:
    """(Python calls, bytecodes) `work` runs in this thread: a count, not a time, so the same
    code gives the same figure however loaded the machine is."""
    calls = opcodes = 0

    def local(frame: FrameType, event: str, arg: Any) -> Any:
        nonlocal opcodes
        if event == "opcode":
            opcodes += 1
        return local

    def global_(frame: FrameType, event: str, arg: Any) -> Any:
        nonlocal calls
        calls += 1
        frame.f_trace_opcodes = True
        return local

    sys.settrace(global_)
    try:
        work()
    finally:
        sys.settrace(None)
    return calls, opcodes


def report(stats: pstats.Stats, requests: int, top: int) -> None:
    table = stats.stats  # type: ignore[attr-defined]
    total = sum(tt for _cc, _nc, tt, _ct, _callers in table.values())
    calls = sum(nc for _cc, nc, _tt, _ct, _callers in table.values())
    print(f"\nprofiled total {total / requests * 1e6:.1f} µs/request (own time of all functions)")
    # The calls are the load-independent figure: the same work gives the same count.
    print(f"function calls {calls / requests:.1f} per request")
    print("\ncumulative, µs per request:")
    for label, match in PIECES:
        cum = sum(ct for (f, _l, n), (_cc, _nc, _tt, ct, _c) in table.items() if match(f, n))
        print(f"  {cum / requests * 1e6:8.1f}  {label}")
    print(f"\ntop {top} by own time, µs per request:")
    rows = sorted(table.items(), key=lambda kv: kv[1][2], reverse=True)[:top]
    for (f, line, name), (_cc, nc, tt, _ct, _c) in rows:
        where = "/".join(Path(f).parts[-2:]) if f != "~" else "builtin"
        print(f"  {tt / requests * 1e6:8.2f}  {nc / requests:5.1f} calls  {where}:{line} {name}")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
