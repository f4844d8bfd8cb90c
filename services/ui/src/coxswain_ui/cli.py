"""`coxswain-ui`: the command line. `serve` runs the operator UI until SIGTERM.

The pages are served on `--address`/`--port`; like every service, the UI also runs the shared
admin server on `--admin-address`/`--admin-port`, so probes and scrapes look alike everywhere.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import socket
from collections.abc import Iterator, Sequence

import uvicorn
import uvloop

from coxswain_service import admin, logs, readiness, signals, tasks
from coxswain_ui import app, controller_probe
from coxswain_ui._version import __version__

log = logging.getLogger("coxswain_ui")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="coxswain-ui", description=__doc__)
    parser.add_argument("--version", action="version", version=f"coxswain-ui {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)
    serve = commands.add_parser("serve", help="run the operator UI")
    serve.add_argument("--address", default="0.0.0.0", help="the pages' listen address")
    serve.add_argument("--port", type=int, default=8080, help="the pages' port (0: any)")
    serve.add_argument(
        "--controller-url", default="http://coxswain-controller:9090", help="controller admin API"
    )
    admin.add_arguments(serve, port=9093)
    return parser


class _Server(uvicorn.Server):
    """uvicorn without its own signal handling: `serve` owns SIGTERM so the exit status is 0."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


async def serve(args: argparse.Namespace) -> None:
    waiting = readiness.Readiness()
    waiting.await_("controller", f"controller API at {args.controller_url} not reached yet")
    admin_server = admin.AdminServer(service="ui", version=__version__, readiness=waiting)
    await admin_server.start(args.admin_address, args.admin_port)
    # Bind here rather than in uvicorn so the real port (with --port 0) can be logged.
    sock = socket.create_server((args.address, args.port))
    config = uvicorn.Config(
        app.create(waiting),
        log_config=None,
        access_log=False,
        timeout_graceful_shutdown=1,
    )
    server = _Server(config)
    signals.on_stop(lambda: setattr(server, "should_exit", True))
    probe = tasks.spawn(
        controller_probe.watch(args.controller_url, waiting), name="controller-probe"
    )
    address, port = sock.getsockname()[:2]
    log.info("ui listening", extra={"fields": {"address": address, "port": port}})
    log.info("ui started", extra={"fields": {"version": __version__}})
    try:
        await server.serve(sockets=[sock])
    finally:
        await tasks.cancel(probe)
        await admin_server.stop()
    log.info("stopped")


def main(argv: Sequence[str] | None = None) -> None:
    args = _parser().parse_args(argv)
    logs.configure("ui", args.log_level)
    uvloop.run(serve(args))
