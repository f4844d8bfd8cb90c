"""`coxswain-identity`: the command line. `serve` runs the service until SIGTERM."""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
from collections.abc import Sequence

import uvloop

from coxswain_identity import admin, logs
from coxswain_identity._version import __version__

log = logging.getLogger("coxswain_identity")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="coxswain-identity", description=__doc__)
    parser.add_argument("--version", action="version", version=f"coxswain-identity {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)
    serve = commands.add_parser("serve", help="run the identity service")
    serve.add_argument("--admin-address", default="0.0.0.0", help="admin listen address")
    serve.add_argument("--admin-port", type=int, default=9091, help="admin port (0: any)")
    serve.add_argument("--log-level", default="info", choices=["debug", "info", "warning"])
    return parser


async def serve(args: argparse.Namespace) -> None:
    readiness = admin.Readiness()
    readiness.await_("ca", "no certificate authority loaded yet")
    runner = await admin.start(args.admin_address, args.admin_port, readiness)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    log.info("identity started", extra={"fields": {"version": __version__}})
    await stop.wait()
    log.info("stopping")
    await runner.cleanup()
    log.info("stopped")


def main(argv: Sequence[str] | None = None) -> None:
    parser = _parser()
    args = parser.parse_args(argv)
    logs.configure("identity", args.log_level)
    uvloop.run(serve(args))
