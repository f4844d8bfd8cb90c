"""`coxswain-proxy`: the command line. `serve` runs the data plane until SIGTERM."""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
from collections.abc import Sequence

import uvloop

from coxswain_proxy import admin, logs
from coxswain_proxy._version import __version__

log = logging.getLogger("coxswain_proxy")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="coxswain-proxy", description=__doc__)
    parser.add_argument("--version", action="version", version=f"coxswain-proxy {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)
    serve = commands.add_parser("serve", help="run the proxy")
    mode = serve.add_mutually_exclusive_group(required=True)
    mode.add_argument("--shared", action="store_true", help="serve the shared pool's snapshot")
    mode.add_argument("--dedicated", action="store_true", help="serve one Gateway's snapshot")
    serve.add_argument("--gateway-name", help="the dedicated Gateway's name")
    serve.add_argument("--gateway-namespace", help="the dedicated Gateway's namespace")
    serve.add_argument("--admin-address", default="0.0.0.0", help="admin listen address")
    serve.add_argument("--admin-port", type=int, default=9092, help="admin port (0: any)")
    serve.add_argument("--log-level", default="info", choices=["debug", "info", "warning"])
    return parser


def _check(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    if args.dedicated and not (args.gateway_name and args.gateway_namespace):
        parser.error("--dedicated needs --gateway-name and --gateway-namespace")
    if args.shared and (args.gateway_name or args.gateway_namespace):
        parser.error("--gateway-name/--gateway-namespace apply only with --dedicated")


async def serve(args: argparse.Namespace) -> None:
    readiness = admin.Readiness()
    readiness.await_("snapshot", "no routing snapshot received from the controller yet")
    runner = await admin.start(args.admin_address, args.admin_port, readiness)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    log.info("proxy started", extra={"fields": {"version": __version__}})
    await stop.wait()
    log.info("stopping")
    await runner.cleanup()
    log.info("stopped")


def main(argv: Sequence[str] | None = None) -> None:
    parser = _parser()
    args = parser.parse_args(argv)
    _check(parser, args)
    logs.configure("proxy", args.log_level)
    uvloop.run(serve(args))
