"""Benchmark: coxswain-proxy's TCP and UDP relays against nginx's `stream` module, in one run.

    apt-get install -y nginx libnginx-mod-stream wrk curl
    ./pants run bench:stream_relay          (add `-- --quick` for a smoke run)

Both relays run one worker process and relay the same backends, side by side in one run:
- bulk TCP: `curl` downloads a 1 GiB file (`--quick`: 256 MiB) that a backend nginx serves with
  sendfile, through each relay; MB/s;
- new connections per second: `wrk` with `Connection: close` (one TCP connection per request,
  50 at a time) against a backend nginx answering a 2-byte body, through each relay;
- UDP packets per second: 8 client sockets, each keeping 32 datagrams of 64 bytes in flight,
  against a UDP echo (uvloop), through each relay; answers/s.
It prints each figure and the ratio coxswain/nginx; docs/performance.md records the ratios.
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
import time
from pathlib import Path
from typing import cast

MODULE = "/usr/lib/nginx/modules/ngx_stream_module.so"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def nginx(root: Path, name: str, body: str) -> subprocess.Popen[bytes]:
    conf = root / f"{name}.conf"
    conf.write_text(
        f"load_module {MODULE};\nworker_processes 1;\npid {root}/{name}.pid;\n"
        f"error_log {root}/{name}.log warn;\nevents {{ worker_connections 16384; }}\n{body}\n"
    )
    return subprocess.Popen(["nginx", "-c", str(conf), "-g", "daemon off;"])


def backend_http(root: Path, port: int) -> str:
    return (
        f"http {{ access_log off; sendfile on; server {{ listen 127.0.0.1:{port} reuseport;"
        f' location = /big {{ alias {root}/big; }} location / {{ return 200 "ok"; }} }} }}'
    )


def relay_stream(tcp: int, udp: int, http_port: int, udp_port: int) -> str:
    return (
        f"stream {{ server {{ listen 127.0.0.1:{tcp}; proxy_pass 127.0.0.1:{http_port}; }}"
        f" server {{ listen 127.0.0.1:{udp} udp; proxy_pass 127.0.0.1:{udp_port};"
        " proxy_timeout 60s; } }"
    )


# ----------------------------------------------------------------------------- the proxy


def serve_coxswain(tcp: int, udp: int, http_port: int, udp_port: int) -> None:
    import uvloop

    from coxswain_proxy.dataplane.core import Dataplane, Options
    from coxswain_routing import (
        Backend,
        Endpoint,
        EndpointSet,
        GatewayListeners,
        Listener,
        ListenerProtocol,
        Resource,
        RouteId,
        StreamMatch,
        StreamRoute,
        Transport,
    )

    http = EndpointSet("bench", "http", 80, (Endpoint("127.0.0.1", http_port),))
    echo = EndpointSet(
        "bench", "echo", 53, (Endpoint("127.0.0.1", udp_port),), transport=Transport.UDP
    )
    resources: list[Resource] = [
        GatewayListeners("bench", "gw", 1, (
            Listener("tcp", tcp, tcp, ListenerProtocol.TCP),
            Listener("udp", udp, udp, ListenerProtocol.UDP),
        )),
        http,
        echo,
        StreamRoute(tcp, ListenerProtocol.TCP, (
            StreamMatch(RouteId(0, "bench", "tcp", "TCPRoute"), (Backend(endpoints=http.key),)),
        )),
        StreamRoute(udp, ListenerProtocol.UDP, (
            StreamMatch(RouteId(0, "bench", "udp", "UDPRoute"), (Backend(endpoints=echo.key),)),
        )),
    ]  # fmt: skip

    async def main() -> None:
        stop = asyncio.Event()
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
        plane = await Dataplane(Options(shared=False, address="127.0.0.1")).start()
        await plane.apply(resources)
        print("ready", flush=True)
        await stop.wait()
        await plane.close(1.0)

    uvloop.run(main())


# ----------------------------------------------------------------------------- UDP


class _Echo(asyncio.DatagramProtocol):
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.DatagramTransport, transport)

    def datagram_received(self, data: bytes, addr: tuple[str, int]) -> None:
        self.transport.sendto(data, addr)


def serve_udp_echo(port: int) -> None:
    import uvloop

    async def main() -> None:
        loop = asyncio.get_running_loop()
        await loop.create_datagram_endpoint(_Echo, local_addr=("127.0.0.1", port))
        print("ready", flush=True)
        await asyncio.Event().wait()

    uvloop.run(main())


class _Pinger(asyncio.DatagramProtocol):
    def __init__(self, window: int) -> None:
        self.window = window
        self.answers = 0
        self.transport: asyncio.DatagramTransport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.DatagramTransport, transport)
        for _ in range(self.window):
            self.transport.sendto(b"x" * 64)

    def datagram_received(self, data: bytes, addr: tuple[str, int]) -> None:
        self.answers += 1
        assert self.transport is not None
        self.transport.sendto(data)

    def error_received(self, exc: Exception) -> None:
        pass


def udp_pps(port: int, seconds: float) -> float:
    import uvloop

    async def main() -> float:
        loop = asyncio.get_running_loop()
        pingers = []
        for _ in range(8):
            _, p = await loop.create_datagram_endpoint(
                lambda: _Pinger(32), remote_addr=("127.0.0.1", port)
            )
            pingers.append(p)
        await asyncio.sleep(0.5)  # warm up: sessions opened
        start = sum(p.answers for p in pingers)
        await asyncio.sleep(seconds)
        done = sum(p.answers for p in pingers) - start
        for p in pingers:
            assert p.transport is not None
            p.transport.close()
        return done / seconds

    return uvloop.run(main())


# ----------------------------------------------------------------------------- TCP


def bulk_mbps(port: int) -> float:
    out = subprocess.run(
        ["curl", "-s", "-o", "/dev/null", "-w", "%{speed_download} %{size_download}",
         f"http://127.0.0.1:{port}/big"],
        check=True, capture_output=True, text=True,
    ).stdout.split()  # fmt: skip
    return float(out[0]) / 1e6


def connections_per_second(port: int, seconds: int) -> float:
    out = subprocess.run(
        ["wrk", "-t", "1", "-c", "50", "-d", f"{seconds}s", "-H", "Connection: close",
         f"http://127.0.0.1:{port}/"],
        check=True, capture_output=True, text=True,
    ).stdout  # fmt: skip
    found = re.search(r"Requests/sec:\s+([\d.]+)", out)
    errors = re.search(r"Socket errors: (.*)", out)
    if errors:
        print(f"    wrk: socket errors {errors.group(1)}", file=sys.stderr)
    return float(found.group(1)) if found else 0.0


def wait_port(port: int, kind: int = socket.SOCK_STREAM) -> None:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if kind == socket.SOCK_DGRAM:
            return  # nothing to probe: the process said "ready"
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    sys.exit(f"nothing listening on {port}")


def ready(proc: subprocess.Popen[bytes]) -> None:
    assert proc.stdout is not None
    if proc.stdout.readline().strip() != b"ready":
        sys.exit("a helper process did not start")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--serve", nargs=4, type=int)
    parser.add_argument("--udp-echo", type=int)
    args = parser.parse_args()
    if args.serve:
        serve_coxswain(*args.serve)
        return
    if args.udp_echo:
        serve_udp_echo(args.udp_echo)
        return
    for tool in ("wrk", "nginx", "curl"):
        if shutil.which(tool) is None:
            sys.exit(f"{tool} is not installed: apt-get install -y nginx libnginx-mod-stream wrk")
    if not os.path.exists(MODULE):
        sys.exit("nginx's stream module is missing: apt-get install -y libnginx-mod-stream")
    run(quick=args.quick)


def run(*, quick: bool) -> None:
    seconds = 3 if quick else 10
    root = Path(tempfile.mkdtemp(prefix="coxswain-stream-bench-"))
    root.chmod(0o755)  # nginx's workers run as another user and must read the file
    with open(root / "big", "wb") as big:
        big.truncate((256 if quick else 1024) * 1024 * 1024)
    http_port, udp_port = free_port(), free_port()
    ngx_tcp, ngx_udp, cox_tcp, cox_udp = (free_port() for _ in range(4))
    procs = [
        nginx(root, "backend", backend_http(root, http_port)),
        nginx(root, "relay", relay_stream(ngx_tcp, ngx_udp, http_port, udp_port)),
    ]
    me = [sys.executable, __file__]
    try:
        echo = subprocess.Popen([*me, "--udp-echo", str(udp_port)], stdout=subprocess.PIPE)
        procs.append(echo)
        ready(echo)
        cox = subprocess.Popen(
            [*me, "--serve", str(cox_tcp), str(cox_udp), str(http_port), str(udp_port)],
            stdout=subprocess.PIPE,
        )
        procs.append(cox)
        ready(cox)
        for port in (http_port, ngx_tcp, cox_tcp):
            wait_port(port)
        report(seconds, {"nginx": (ngx_tcp, ngx_udp), "coxswain": (cox_tcp, cox_udp)})
    finally:
        for p in procs:
            p.send_signal(signal.SIGTERM)
        for p in procs:
            p.wait(10)
        shutil.rmtree(root, ignore_errors=True)


def report(seconds: int, relays: dict[str, tuple[int, int]]) -> None:
    scenarios = [
        ("bulk TCP download (MB/s)", lambda tcp, udp: bulk_mbps(tcp)),
        ("new TCP connections/s", lambda tcp, udp: connections_per_second(tcp, seconds)),
        ("UDP packets/s (answers)", lambda tcp, udp: udp_pps(udp, seconds)),
    ]
    print(f"{'scenario':30} {'nginx':>12} {'coxswain':>12} {'ratio':>7}")
    for name, measure in scenarios:
        figures: dict[str, float] = {}
        for relay in ("nginx", "coxswain", "nginx", "coxswain"):  # alternating, best of two
            figures[relay] = max(figures.get(relay, 0.0), measure(*relays[relay]))
        ratio = figures["coxswain"] / figures["nginx"] if figures["nginx"] else 0.0
        print(f"{name:30} {figures['nginx']:12.0f} {figures['coxswain']:12.0f} {ratio:6.2f}x")


if __name__ == "__main__":
    main()
