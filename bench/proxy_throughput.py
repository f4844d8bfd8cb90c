"""Benchmark: coxswain-proxy against nginx as a reverse proxy, in one run, alternating.

    apt-get install -y nginx wrk nghttp2-client   (Debian packages; not installed by default)
    ./pants run bench:proxy_throughput    (add `-- --quick` for a smoke run)
    ./pants run bench:proxy_throughput -- --baseline REV   (also the proxy as of git REV)
    ./pants run bench:proxy_throughput -- --only HTTP/2   (only the scenarios so named)

The backend is nginx serving a small static body (fast enough never to be the bottleneck). The
same backend is driven through (a) nginx configured as a keep-alive reverse proxy and (b) the
coxswain data plane with a real snapshot (100 routes, metrics on), each with the same number of
worker processes, by `wrk` with 50 connections. Scenarios: HTTP keep-alive, HTTPS keep-alive,
a new connection per request (HTTP), each with 1 worker and with N (CPU count) workers. It
prints req/s, p50 and p99 for both and the ratio coxswain/nginx. Fixed-rate rows offer both
the same load, FIXED_RATE requests/s over 50 keep-alive connections (`h2load --h1 --rps`), HTTP
and HTTPS: their last column is the p99's difference from nginx's in ms, not a ratio.

HTTP/2 rows: `h2load` (50 connections x 10 concurrent streams) against nginx with `http2` on and
against the proxy, in cleartext h2c (prior knowledge) and h2 over TLS (ALPN), both proxying to
the same HTTP/1.1 backend; and a gRPC unary row, one async grpcio client loop (this file, run as
`--grpc-client`) against nginx `grpc_pass` and against the proxy's gRPC backend, the backend
being nginx serving a canned unary response over h2c (an empty message and `grpc-status: 0`).
Absolute numbers depend on the machine; docs/performance.md records the ratios.

`--baseline REV` adds a third column: the proxy's code as of git revision REV (extracted with
`git archive` into a temporary folder and run from there), measured in the same run, so a
change to the request path is judged against its own past side by side, not against an old
run on a machine whose load has changed since.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import coxswain_routing as routing
from coxswain_devkit.pki import CertificateAuthority
from coxswain_routing import (
    Backend,
    Endpoint,
    EndpointSet,
    GatewayListeners,
    HostRoutes,
    Listener,
    ListenerProtocol,
    Match,
    PathMatch,
    RouteId,
    Rule,
    TlsCertificate,
    TlsStore,
)

BODY = b"x" * 64


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def nginx_conf(root: Path, *, workers: int, listen: str, body: str) -> Path:
    conf = root / f"nginx-{listen.split()[0]}.conf"
    conf.write_text(
        f"""
worker_processes {workers};
pid {root}/nginx-{listen.split()[0]}.pid;
error_log {root}/error.log;
events {{ worker_connections 4096; }}
http {{
  access_log off;
  # nginx's default (1000) ends a client's connection after 1000 requests: wrk reconnects,
  # h2load does not (the rest of its run has fewer connections), and the proxy sets no such
  # limit. Enough idle upstream connections for h2load's 500 concurrent streams, or nginx
  # opens and closes upstream connections per request.
  keepalive_requests 1000000;
  upstream backend {{ server 127.0.0.1:{BACKEND_PORT}; keepalive 1024; }}
  server {{
    listen {listen};
    {body}
  }}
}}
"""
    )
    return conf


BACKEND_PORT = free_port()
GRPC_BACKEND_PORT = free_port()  # h2c: nginx answering every gRPC call with an empty message
FIXED_RATE = 5000  # requests/s offered by the fixed-rate rows, below either proxy's capacity
GRPC_METHOD = "/bench.Bench/Unary"

# The gRPC backend: a unary response is one length-prefixed message (here empty, 5 bytes:
# uncompressed flag and a zero length) then the trailers; POST to a static file is 405 in
# nginx, hence the error_page turning it into the file. The mirror is there only for its
# `mirror_request_body on`: nginx then reads the request's body before it answers; answering
# first, it resets the stream and sends frames that a proxy (nginx's grpc_pass) sees as for an
# unknown stream, failing the next call on that connection.
GRPC_BACKEND = (
    f" }}\n  server {{ listen 127.0.0.1:{GRPC_BACKEND_PORT} http2; "
    "location = /m { internal; return 204; } "
    "location / { mirror /m; mirror_request_body on; "
    "default_type application/grpc; add_trailer grpc-status 0 always; "
    "error_page 405 =200 /unary.bin; root {root}; try_files /unary.bin =404; }"
)


@dataclass
class Result:
    rps: float
    p50_ms: float
    p99_ms: float


def wrk(url: str, seconds: int, *, new_connections: bool = False) -> Result:
    """One wrk run; exits when any response was not a 2xx/3xx (an error page is no benchmark)."""
    script = []
    if new_connections:
        script = ["-H", "Connection: close"]
    out = subprocess.run(
        [
            "wrk",
            "-t2",
            "-c50",
            f"-d{seconds}s",
            "--latency",
            "-H",
            "Host: bench.example.com",
            *script,
            url,
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    bad = re.search(r"Non-2xx or 3xx responses:\s+(\d+)", out)
    if bad:
        sys.exit(f"{url}: {bad.group(1)} responses were not 2xx/3xx:\n{out}")
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))  # type: ignore[union-attr]
    return Result(rps, _latency(out, "50%"), _latency(out, "99%"))


def _latency(out: str, pct: str) -> float:
    m = re.search(rf"{pct}\s+([\d.]+)(us|ms|s)", out)
    assert m, out
    value, unit = float(m.group(1)), m.group(2)
    return value / 1000 if unit == "us" else value * 1000 if unit == "s" else value


def snapshot(
    port: int, tls_port: int, cert: TlsCertificate, backend_port: int, grpc_port: int
) -> list[object]:
    eps = EndpointSet("bench", "backend", 80, (Endpoint("127.0.0.1", backend_port),))
    backend = Backend(endpoints=eps.key)
    grpc_rules: tuple[Rule, ...] = ()
    extra: list[object] = []
    # A baseline revision from before gRPC has no BackendProtocol: it gets no gRPC rule (and
    # its column says n/a for the gRPC row).
    protocol = getattr(routing, "BackendProtocol", None)
    if protocol is not None:
        grpc_eps = EndpointSet("bench", "grpc", 80, (Endpoint("127.0.0.1", grpc_port),))
        grpc_backend = Backend(endpoints=grpc_eps.key, protocol=protocol.GRPC)
        grpc_rules = (
            Rule(
                id=RouteId(2, "bench", "grpc"),
                matches=(Match(path=PathMatch(value=GRPC_METHOD.rsplit("/", 1)[0])),),
                backends=(grpc_backend,),
            ),
        )
        extra.append(grpc_eps)
    rules = (
        *(
            Rule(
                id=RouteId(0, "bench", f"r{i}"),
                matches=(Match(path=PathMatch(value=f"/p{i}")),),
                backends=(backend,),
            )
            for i in range(99)
        ),
        *grpc_rules,
        Rule(id=RouteId(1, "bench", "root"), backends=(backend,)),
    )
    listeners = GatewayListeners(
        "bench",
        "gw",
        1,
        (
            Listener("http", port, port, ListenerProtocol.HTTP),
            Listener("https", tls_port, tls_port, ListenerProtocol.HTTPS),
        ),
    )
    return [
        listeners,
        eps,
        *extra,
        HostRoutes("gateway/bench/gw", port, "bench.example.com", rules),
        HostRoutes("gateway/bench/gw", tls_port, "bench.example.com", rules),
        TlsStore(tls_port, (cert,)),
    ]


async def run_coxswain(
    workers: int,
    port: int,
    tls_port: int,
    cert: TlsCertificate,
    backend_port: int,
    stop: asyncio.Event,
    ready: asyncio.Event,
) -> None:
    from coxswain_proxy.dataplane.core import Dataplane, Options
    from coxswain_proxy.dataplane.workers import Workers

    options = Options(shared=False, address="127.0.0.1", reuse_port=workers > 1)
    resources = snapshot(port, tls_port, cert, backend_port, GRPC_BACKEND_PORT)
    if workers > 1:
        pool = await Workers(options).start(workers)
        await pool.apply(resources)  # type: ignore[arg-type]
        ready.set()
        await stop.wait()
        await pool.close(1.0)
    else:
        plane = await Dataplane(options).start()
        await plane.apply(resources)  # type: ignore[arg-type]
        ready.set()
        await stop.wait()
        await plane.close(1.0)


# The source roots a proxy needs, relative to a tree's top.
SOURCE_ROOTS = ("services/proxy/src", "libs/routing/src", "libs/proto/src", "libs/service/src",
                "libs/devkit/src")  # fmt: skip


def coxswain_process(
    workers: int, port: int, tls_port: int, certdir: Path, tree: Path | None = None
) -> subprocess.Popen[bytes]:
    """The proxy serving the bench snapshot: this checkout's, or the one extracted at `tree`."""
    # The backend's port is passed on: this module picks a fresh one at import, and a proxy
    # pointed at the wrong port answers 503s fast enough to look like a result.
    args = [str(workers), str(port), str(tls_port), str(certdir), str(BACKEND_PORT),
            str(GRPC_BACKEND_PORT)]  # fmt: skip
    env = dict(os.environ)
    if tree is not None:
        # Ahead of this interpreter's own copies, so the baseline's modules are the ones run.
        roots = [str(tree / r) for r in SOURCE_ROOTS if (tree / r).is_dir()]
        env["PYTHONPATH"] = os.pathsep.join([*roots, env.get("PYTHONPATH", "")])
    return subprocess.Popen(
        [sys.executable, __file__, "--serve", *args], stdout=subprocess.PIPE, env=env
    )


def extract(rev: str, into: Path) -> Path:
    """The repository's tree at `rev`, as files under `into` (no worktree, nothing to clean)."""
    into.mkdir(parents=True)
    archive = subprocess.run(["git", "archive", rev], check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into


def serve_main(
    workers: int, port: int, tls_port: int, certdir: Path, backend_port: int, grpc_port: int
) -> None:
    import uvloop

    global GRPC_BACKEND_PORT
    GRPC_BACKEND_PORT = grpc_port

    cert = TlsCertificate(
        ("bench.example.com",),
        (certdir / "chain.pem").read_bytes(),
        (certdir / "key.pem").read_bytes(),
        "bench/cert",
    )

    async def main() -> None:
        stop, ready = asyncio.Event(), asyncio.Event()
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
        task = asyncio.create_task(
            run_coxswain(workers, port, tls_port, cert, backend_port, stop, ready)
        )
        await ready.wait()
        print("ready", flush=True)
        await task

    uvloop.run(main())


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--serve", nargs=6)
    parser.add_argument("--grpc-client", nargs=2, metavar=("PORT", "SECONDS"))
    parser.add_argument("--baseline", metavar="REV", help="also run the proxy as of git REV")
    parser.add_argument(
        "--only", metavar="PREFIX", default="", help="only the scenarios named PREFIX..."
    )
    args = parser.parse_args()
    if args.serve:
        w, p, tp, d, bp, gp = args.serve
        serve_main(int(w), int(p), int(tp), Path(d), int(bp), int(gp))
        return
    if args.grpc_client:
        grpc_client_main(int(args.grpc_client[0]), float(args.grpc_client[1]))
        return
    for tool in ("wrk", "nginx", "h2load"):
        if shutil.which(tool) is None:
            sys.exit(f"{tool} is not installed: apt-get install -y nginx wrk nghttp2-client")
    seconds = 3 if args.quick else 10
    root = Path(tempfile.mkdtemp(prefix="coxswain-bench-"))
    ca = CertificateAuthority.create()
    issued = ca.issue(dns=["bench.example.com"])
    (root / "chain.pem").write_bytes(issued.chain_pem)
    (root / "key.pem").write_bytes(issued.key_pem)
    # nginx's workers run as another user: they may pass through the folder (not list it) and
    # read the canned gRPC response, in a folder of its own; the key stays unreadable.
    root.chmod(0o711)
    (root / "grpc").mkdir(mode=0o755)
    (root / "grpc" / "unary.bin").write_bytes(b"\x00\x00\x00\x00\x00")
    (root / "grpc" / "unary.bin").chmod(0o644)
    ncpu = os.cpu_count() or 1
    backend = nginx_conf(
        root,
        workers=ncpu,
        listen=f"127.0.0.1:{BACKEND_PORT}",
        body='location / { return 200 "'
        + BODY.decode()
        + '"; }'
        + GRPC_BACKEND.replace("{root}", str(root / "grpc")),
    )
    baseline = extract(args.baseline, root / "baseline") if args.baseline else None
    procs = [subprocess.Popen(["nginx", "-c", str(backend), "-g", "daemon off;"])]
    try:
        header = (
            f"{'scenario':42} {'nginx req/s':>12} {'p50':>7} {'p99':>7} "
            f"{'coxswain':>10} {'p50':>7} {'p99':>7} {'ratio':>6}"
        )
        if baseline is not None:
            header += f" {args.baseline[:10]:>10} {'p50':>7} {'p99':>7} {'ratio':>6}"
        print(header)
        for workers in (1, ncpu) if ncpu > 1 else (1,):
            compare(root, workers, seconds, baseline, args.only)
    finally:
        for p in procs:
            p.terminate()
            p.wait()


def compare(root: Path, workers: int, seconds: int, baseline: Path | None, only: str) -> None:
    nport, ntls, cport, ctls = free_port(), free_port(), free_port(), free_port()
    nh2c, nh2tls = free_port(), free_port()
    proxy_body = (
        "location / { proxy_pass http://backend; proxy_http_version 1.1; "
        'proxy_set_header Connection ""; proxy_set_header Host $host; '
        "proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for; }"
    )
    grpc_body = (
        f"location {GRPC_METHOD.rsplit('/', 1)[0]}/ {{ grpc_pass grpc://grpcbackend; "
        "grpc_set_header X-Forwarded-For $proxy_add_x_forwarded_for; }"
    )
    tls = f"ssl_certificate {root}/chain.pem; ssl_certificate_key {root}/key.pem; "
    # nginx 1.22 takes h2c only by prior knowledge on a port of its own (`listen ... http2`),
    # where the proxy's HTTP listener takes both; so nginx has two more ports, and the
    # HTTP/1.1 rows' servers stay as they were.
    servers = [
        f"listen 127.0.0.1:{ntls} ssl; {tls} {proxy_body}",
        f"listen 127.0.0.1:{nh2c} http2; {proxy_body} {grpc_body}",
        f"listen 127.0.0.1:{nh2tls} ssl http2; {tls} {proxy_body} {grpc_body}",
    ]
    conf = nginx_conf(
        root,
        workers=workers,
        listen=f"127.0.0.1:{nport}",
        body=proxy_body
        + "".join(f" }}\n  server {{ {server} " for server in servers)
        + f" }}\n  upstream grpcbackend {{ server 127.0.0.1:{GRPC_BACKEND_PORT}; keepalive 1024; ",
    )
    nginx = subprocess.Popen(["nginx", "-c", str(conf), "-g", "daemon off;"])
    cox = coxswain_process(workers, cport, ctls, root)
    base, bport, btls = None, 0, 0
    if baseline is not None:
        bport, btls = free_port(), free_port()
        base = coxswain_process(workers, bport, btls, root, baseline)
    try:
        for proc in (cox, base):
            if proc is not None:
                assert proc.stdout is not None
                proc.stdout.readline()
        _wait_port(nport)
        for port in (nport, cport, bport):
            if port:
                _check(port)
        label = f"{workers} worker{'s' if workers > 1 else ''}"
        scenarios = [
            ("HTTP keep-alive", "http://127.0.0.1:{}/p50/x", False, False),
            ("HTTPS keep-alive", "https://127.0.0.1:{}/p50/x", True, False),
            ("HTTP new connection per request", "http://127.0.0.1:{}/p50/x", False, True),
        ]
        for name, url, is_tls, new in scenarios:
            if not name.startswith(only):
                continue
            n = wrk(url.format(ntls if is_tls else nport), seconds, new_connections=new)
            c = wrk(url.format(ctls if is_tls else cport), seconds, new_connections=new)
            b = None
            if base is not None:
                b = wrk(url.format(btls if is_tls else bport), seconds, new_connections=new)
            _row(f"{name}, {label}", n, c, b, base is not None)
        # The same offered load through each (issue 20's p99 goal: within 0.5 ms of nginx's):
        # h2load --h1 with 50 keep-alive connections, each at a fixed request rate.
        for name, url, is_tls in (
            ("HTTP keep-alive", "http://127.0.0.1:{}/p50/x", False),
            ("HTTPS keep-alive", "https://127.0.0.1:{}/p50/x", True),
        ):
            if not name.startswith(only):
                continue
            n = h2load(url.format(ntls if is_tls else nport), seconds, root, rate=FIXED_RATE)
            c = h2load(url.format(ctls if is_tls else cport), seconds, root, rate=FIXED_RATE)
            b = None
            if base is not None:
                b = h2load(url.format(btls if is_tls else bport), seconds, root, rate=FIXED_RATE)
            _row(f"{name} at {FIXED_RATE} req/s, {label}", n, c, b, base is not None, fixed=True)
        h2 = [
            ("HTTP/2 h2c 50x10 streams", "http://127.0.0.1:{}/p50/x", nh2c, cport, bport),
            ("HTTP/2 TLS 50x10 streams", "https://127.0.0.1:{}/p50/x", nh2tls, ctls, btls),
        ]
        for name, url, nginx_port, cox_port, base_port in h2:
            if not name.startswith(only):
                continue
            n = h2load(url.format(nginx_port), seconds, root)
            c = h2load(url.format(cox_port), seconds, root)
            b = None
            if base is not None and _speaks_h2(url.format(base_port)):
                b = h2load(url.format(base_port), seconds, root)
            _row(f"{name}, {label}", n, c, b, base is not None)
        if "gRPC unary".startswith(only):
            n = grpc_load(nh2c, seconds)
            c = grpc_load(cport, seconds)
            b = grpc_load(bport, seconds) if base is not None and _speaks_grpc(bport) else None
            _row(f"gRPC unary (grpcio client), {label}", n, c, b, base is not None)
    finally:
        for p in (nginx, cox, base):
            if p is not None:
                p.terminate()
                p.wait()


def _row(
    label: str, n: Result, c: Result, b: Result | None, has_base: bool, fixed: bool = False
) -> None:
    """One scenario; `fixed`: the load was offered at a fixed rate, so the last column is the
    p99's difference from nginx's (ms, `+` when slower), not the req/s ratio."""

    def last(x: Result) -> str:
        return f"{x.p99_ms - n.p99_ms:+6.2f}" if fixed else f"{x.rps / n.rps:6.2f}"

    line = (
        f"{label:42} {n.rps:12.0f} {n.p50_ms:7.2f} {n.p99_ms:7.2f} "
        f"{c.rps:10.0f} {c.p50_ms:7.2f} {c.p99_ms:7.2f} {last(c)}"
    )
    if b is not None:
        line += f" {b.rps:10.0f} {b.p50_ms:7.2f} {b.p99_ms:7.2f} {last(b)}"
    elif has_base:
        line += f" {'n/a':>10} {'':7} {'':7} {'n/a':>6}"
    print(line, flush=True)


def h2load(url: str, seconds: int, root: Path, rate: int = 0) -> Result:
    """One h2load run, 50 connections x 10 concurrent streams, two threads (as wrk's -t2); with
    `rate`, HTTP/1.1 keep-alive instead, one request at a time per connection, the 50 together
    offering `rate` requests per second. h2load prints no percentiles: they come from its
    per-request log. Exits when any response was not a 2xx (an error page is no benchmark)."""
    log = root / "h2load.log"
    # Offering only h2: h2load falls back to HTTP/1.1 when a server's ALPN picks it.
    mode = ["--h1", "-m1", f"--rps={rate / 50:g}"] if rate else ["-m10", "--npn-list=h2"]
    out = subprocess.run(
        ["h2load", "-t2", "-c50", *mode, f"-D{seconds}", "--warm-up-time=1",
         "-H", ":authority: bench.example.com", f"--log-file={log}", url],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    # In duration mode the streams still open when time is up count as failed (at most one per
    # stream slot, 50 x 10); any other failure, or any response but a 2xx, ends the bench.
    m = re.search(r"requests: \d+ total, \d+ started, \d+ done, (\d+) succeeded, (\d+) failed", out)
    codes = re.search(r"status codes: (\d+) 2xx, (\d+) 3xx, (\d+) 4xx, (\d+) 5xx", out)
    if (
        not m
        or not codes
        or int(m.group(1)) == 0
        or int(m.group(2)) > 500
        or int(codes.group(3)) + int(codes.group(4)) > 0
    ):
        sys.exit(f"{url}: h2load saw failures or non-2xx responses:\n{out}")
    rps = float(re.search(r"finished in [\d.]+\w+, ([\d.]+) req/s", out).group(1))  # type: ignore[union-attr]
    times = sorted(int(line.split("\t")[2]) for line in log.read_text().splitlines() if line)
    return Result(rps, times[len(times) // 2] / 1000, times[len(times) * 99 // 100] / 1000)


def _speaks_h2(url: str) -> bool:
    """Whether a (baseline) proxy answers HTTP/2 at all; one that does not gets n/a."""
    out = subprocess.run(
        ["h2load", "-n1", "-c1", "--npn-list=h2", "-H", ":authority: bench.example.com", url],
        capture_output=True, text=True, timeout=10,
    ).stdout  # fmt: skip
    protocol = re.search(r"Application protocol: (\S+)", out)
    spoke = protocol is not None and protocol.group(1) in ("h2", "h2c")
    return spoke and "1 succeeded" in out and "1 2xx" in out


def grpc_load(port: int, seconds: int) -> Result:
    """The gRPC client loop, in a process of its own (as wrk and h2load are)."""
    done = subprocess.run(
        [sys.executable, __file__, "--grpc-client", str(port), str(seconds)],
        capture_output=True, text=True,
    )  # fmt: skip
    if done.returncode != 0:
        sys.exit(f"gRPC through port {port} failed:\n{done.stderr[-2000:]}")
    rps, p50, p99 = (float(v) for v in done.stdout.split())
    return Result(rps, p50, p99)


def _speaks_grpc(port: int) -> bool:
    import grpc

    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        call = channel.unary_unary(
            GRPC_METHOD, request_serializer=bytes, response_deserializer=bytes
        )
        try:
            call(b"", timeout=5, metadata=(), wait_for_ready=False)
        except grpc.RpcError:
            return False
    return True


def grpc_client_main(port: int, seconds: float) -> None:
    """Unary calls from 5 channels (HTTP/2 connections) x 10 in flight each, for `seconds`
    after a one-second warm-up; prints req/s, p50 and p99 (ms). Any failed call ends it."""
    import time

    import grpc
    import uvloop

    async def run() -> None:
        channels = [
            grpc.aio.insecure_channel(
                f"127.0.0.1:{port}",
                # A local subchannel pool each: five channels, five connections.
                options=[
                    ("grpc.default_authority", "bench.example.com"),
                    ("grpc.use_local_subchannel_pool", 1),
                ],
            )
            for _ in range(5)
        ]  # fmt: skip
        calls = [c.unary_unary(GRPC_METHOD, request_serializer=bytes, response_deserializer=bytes)
                 for c in channels]  # fmt: skip
        times: list[float] = []
        clock = time.perf_counter
        start = clock() + 1.0
        end = start + seconds

        async def loop(call: grpc.aio.UnaryUnaryMultiCallable) -> None:
            while (t0 := clock()) < end:
                await call(b"hello", timeout=10)
                if t0 >= start:
                    times.append(clock() - t0)

        await asyncio.gather(*(loop(call) for call in calls for _ in range(10)))
        for c in channels:
            await c.close()
        times.sort()
        rps = len(times) / seconds
        print(rps, times[len(times) // 2] * 1000, times[len(times) * 99 // 100] * 1000)

    uvloop.run(run())


def _check(port: int) -> None:
    """One request through a proxy must come back as the backend's 200 before anything counts."""
    import http.client

    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    try:
        conn.request("GET", "/p50/x", headers={"Host": "bench.example.com"})
        response = conn.getresponse()
        body = response.read()
    finally:
        conn.close()
    if response.status != 200 or body != BODY:
        sys.exit(f"port {port} answered {response.status} {body[:200]!r}, not the backend's 200")


def _wait_port(port: int) -> None:
    for _ in range(100):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.1).close()
            return
        except OSError:
            import time

            time.sleep(0.05)


if __name__ == "__main__":
    main()
