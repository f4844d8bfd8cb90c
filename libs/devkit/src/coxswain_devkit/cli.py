"""`coxswain-devkit`: the emulator, the echo backend, the node and the load balancer as processes.

    coxswain-devkit apiserver --port 6443 --manifests DIR   # prints the kubeconfig's path
    coxswain-devkit echo --port 8080 --namespace ns --pod echo-0
    coxswain-devkit node --api-server URL [--run proxy='python coxswain-proxy.pex'] ...
    coxswain-devkit lb --api-server URL [--low-port-offset 10000]
    coxswain-devkit grpc-call HOST:PORT --authority NAME     # one call of the gRPC echo

Each runs until SIGTERM or SIGINT and logs JSON lines on stderr, among them one
"apiserver listening" / "echo listening" line with the bound port, and "node agent started" /
"load balancer started" once those are watching.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import shlex
import signal
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import uvloop

from coxswain_devkit import crds
from coxswain_devkit._version import __version__
from coxswain_devkit.apiserver import ApiServer
from coxswain_devkit.echo import grpc_call
from coxswain_devkit.loadbalancer import LOW_PORT_OFFSET, LoadBalancer
from coxswain_devkit.node import NodeAgent, Settings, default_launcher
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
    api.add_argument(
        "--rbac",
        action="store_true",
        help="enforce RBAC for every bearer token (requests without credentials stay the admin)",
    )
    echo = commands.add_parser("echo", help="run the echo backend")
    echo.add_argument("--address", default="127.0.0.1", help="listen address")
    echo.add_argument("--port", type=int, default=8080, help="HTTP/1.1 and WebSocket port (0: any)")
    echo.add_argument("--grpc-port", type=int, help="also serve the gRPC echo service on this port")
    echo.add_argument("--h2c-port", type=int, help="also serve cleartext HTTP/2 on this port")
    echo.add_argument("--namespace", default="default", help="the namespace it reports")
    echo.add_argument("--pod", default="echo", help="the pod name it reports")
    _node_parser(commands)
    lb = commands.add_parser("lb", help="run the load balancer for LoadBalancer Services")
    lb.add_argument("--api-server", required=True, help="the API server URL (no credentials)")
    lb.add_argument(
        "--low-port-offset",
        type=int,
        default=LOW_PORT_OFFSET,
        help="added to a port below 1024 when it cannot be bound (recorded on the Service)",
    )
    grpc_call.add_parser(commands)
    return parser


def _node_parser(commands: Any) -> None:
    node = commands.add_parser("node", help="run the node agent: Deployments' pods as processes")
    node.add_argument("--api-server", required=True, help="the API server URL (no credentials)")
    node.add_argument("--name", default="devkit-node", help="the Node's name")
    node.add_argument("--workdir", type=Path, help="where pods' files go (default: a temp dir)")
    node.add_argument(
        "--run",
        action="append",
        default=[],
        metavar="ROLE=COMMAND",
        help="how to start a role (proxy, controller, identity, ui, devkit), e.g. "
        "proxy='python dist/coxswain-proxy.pex' (default: python -m coxswain_<role>)",
    )
    node.add_argument("--probe-interval", type=float, default=0.5, help="seconds")


def _launcher(runs: Sequence[str]) -> dict[str, Sequence[str]]:
    launcher = default_launcher()
    for run in runs:
        role, sep, command = run.partition("=")
        if not sep or not command.strip():
            raise SystemExit(f"coxswain-devkit node: --run wants ROLE=COMMAND, not {run!r}")
        launcher[role] = tuple(shlex.split(command))
    return launcher


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
        rbac=args.rbac,
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


async def run_node(args: argparse.Namespace) -> None:
    agent = NodeAgent(
        args.api_server,
        name=args.name,
        workdir=args.workdir,
        launcher=_launcher(args.run),
        settings=Settings(probe_interval=args.probe_interval),
    )
    await agent.start()
    try:
        await _until_signalled()
    finally:
        await agent.stop()
    log.info("stopped")


async def run_lb(args: argparse.Namespace) -> None:
    balancer = LoadBalancer(args.api_server, low_port_offset=args.low_port_offset)
    await balancer.start()
    try:
        await _until_signalled()
    finally:
        await balancer.stop()
    log.info("stopped")


_COMMANDS = {"apiserver": run_apiserver, "echo": run_echo, "node": run_node, "lb": run_lb}


def main(argv: Sequence[str] | None = None) -> None:
    args = _parser().parse_args(argv)
    if args.command == "grpc-call":  # a client: one call, its answer on stdout, no logs
        raise SystemExit(grpc_call.run(args))
    logs.configure("devkit", args.log_level)
    # The load balancer relays every benchmark request: on uvloop, as the proxy itself runs.
    run = uvloop.run if args.command == "lb" else asyncio.run
    run(_COMMANDS[args.command](args))
