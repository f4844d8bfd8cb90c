"""`coxswain-devkit`: the emulator and the echo backend as processes, for e2e tests and the demo.

    coxswain-devkit apiserver --port 6443 --manifests DIR   # prints the kubeconfig's path
    coxswain-devkit echo --port 8080 --namespace ns --pod echo-0

Each runs until SIGTERM or SIGINT and logs JSON lines on stderr, among them one
"apiserver listening" / "echo listening" line with the bound port.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import tempfile
from collections.abc import Sequence
from pathlib import Path

from coxswain_devkit import crds
from coxswain_devkit._version import __version__
from coxswain_devkit.apiserver import ApiServer
from coxswain_service import logs

log = logging.getLogger("coxswain_devkit")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="coxswain-devkit", description=__doc__)
    parser.add_argument("--version", action="version", version=f"coxswain-devkit {__version__}")
    parser.add_argument("--log-level", default="info", choices=["debug", "info", "warning"])
    commands = parser.add_subparsers(dest="command", required=True)
    api = commands.add_parser("apiserver", help="run the Kubernetes API emulator")
    api.add_argument("--address", default="127.0.0.1", help="listen address")
    api.add_argument("--port", type=int, default=6443, help="port (0: any)")
    api.add_argument(
        "--manifests", type=Path, action="append", default=[], help="YAML file or directory to load"
    )
    api.add_argument(
        "--gateway-api",
        choices=["none", "standard", "experimental"],
        default="none",
        help="apply the bundled Gateway API CRDs of this channel at start",
    )
    api.add_argument(
        "--kubeconfig-out", type=Path, help="where to write the kubeconfig (default: a temp dir)"
    )
    api.add_argument(
        "--watch-window", type=int, default=1000, help="changes retained for watch resumption"
    )
    api.add_argument(
        "--bookmark-interval", type=float, default=60.0, help="seconds between watch bookmarks"
    )
    echo = commands.add_parser("echo", help="run the echo backend")
    echo.add_argument("--address", default="127.0.0.1", help="listen address")
    echo.add_argument("--port", type=int, default=8080, help="HTTP/1.1 and WebSocket port (0: any)")
    echo.add_argument("--grpc-port", type=int, help="also serve the gRPC echo service on this port")
    echo.add_argument("--h2c-port", type=int, help="also serve cleartext HTTP/2 on this port")
    echo.add_argument("--namespace", default="default", help="the namespace it reports")
    echo.add_argument("--pod", default="echo", help="the pod name it reports")
    return parser


async def _until_signalled() -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    log.info("stopping")


async def run_apiserver(args: argparse.Namespace) -> None:
    server = ApiServer(
        host=args.address,
        port=args.port,
        window=args.watch_window,
        bookmark_interval=args.bookmark_interval,
    )
    server.apply(crds.coxswain())  # installed with the controller, whatever the Gateway API
    if args.gateway_api != "none":
        bundled = crds.standard() if args.gateway_api == "standard" else crds.experimental()
        server.apply(bundled)
        log.info("gateway api crds loaded", extra={"fields": {"channel": args.gateway_api}})
    for path in args.manifests:
        loaded = server.apply_manifests(path)
        log.info("manifests loaded", extra={"fields": {"path": str(path), "objects": len(loaded)}})
    with tempfile.TemporaryDirectory(prefix="coxswain-devkit-") as tmp:
        await server.start()
        kubeconfig = server.write_kubeconfig(args.kubeconfig_out or Path(tmp) / "kubeconfig")
        print(kubeconfig, flush=True)
        log.info("kubeconfig written", extra={"fields": {"path": str(kubeconfig)}})
        try:
            await _until_signalled()
        finally:
            await server.stop()
    log.info("stopped")


async def run_echo(args: argparse.Namespace) -> None:
    from coxswain_devkit.echo import EchoServer

    server = EchoServer(
        host=args.address,
        port=args.port,
        grpc_port=args.grpc_port,
        h2c_port=args.h2c_port,
        namespace=args.namespace,
        pod=args.pod,
    )
    await server.start()
    try:
        await _until_signalled()
    finally:
        await server.stop()
    log.info("stopped")


def main(argv: Sequence[str] | None = None) -> None:
    args = _parser().parse_args(argv)
    logs.configure("devkit", args.log_level)
    asyncio.run(run_apiserver(args) if args.command == "apiserver" else run_echo(args))
