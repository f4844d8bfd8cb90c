"""`coxswain-ui`: the command line. `serve` runs the operator UI until SIGTERM.

The pages are served on `--address`/`--port` (loopback by default: whoever reaches the pages
reads what the UI's credential may read, see docs/ui.md); like every service, the UI also runs
the shared admin server on `--admin-address`/`--admin-port`, so probes and scrapes look alike
everywhere. The pages read the controller's API at `--controller-url` with the bearer token in
`--controller-token-file` (or, without one, each user's own token, signed in on /login),
trusting `--controller-ca-file` for an https URL.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import socket
from collections.abc import Iterator, Sequence
from pathlib import Path

import uvicorn
import uvloop

from coxswain_service import admin, logs, readiness, signals, tasks
from coxswain_ui import app, controller_probe
from coxswain_ui._version import __version__
from coxswain_ui.client import ControllerClient

log = logging.getLogger("coxswain_ui")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="coxswain-ui", description=__doc__)
    parser.add_argument("--version", action="version", version=f"coxswain-ui {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)
    serve = commands.add_parser("serve", help="run the operator UI")
    serve.add_argument(
        "--address",
        default="127.0.0.1",
        help="the pages' listen address (loopback by default; see docs/ui.md before widening)",
    )
    serve.add_argument("--port", type=int, default=8080, help="the pages' port (0: any)")
    serve.add_argument(
        "--controller-url", default="http://coxswain-controller:9090", help="controller admin API"
    )
    serve.add_argument(
        "--controller-token-file",
        type=Path,
        help="the UI's bearer token for the controller's API, re-read when it changes "
        "(without it, each user signs in with their own token)",
    )
    serve.add_argument(
        "--controller-ca-file", type=Path, help="CA bundle to trust for an https controller URL"
    )
    serve.add_argument(
        "--refresh-seconds",
        type=int,
        default=5,
        help="how often pages refresh themselves in the browser (0: never)",
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
    client = ControllerClient(
        args.controller_url, token_file=args.controller_token_file, ca_file=args.controller_ca_file
    )
    config = uvicorn.Config(
        app.create(waiting, client, refresh=args.refresh_seconds),
        log_config=None,
        access_log=False,
        timeout_graceful_shutdown=1,
    )
    server = _Server(config)
    signals.on_stop(lambda: setattr(server, "should_exit", True))
    probe = tasks.spawn(
        controller_probe.watch(args.controller_url, waiting, ca_file=args.controller_ca_file),
        name="controller-probe",
    )
    address, port = sock.getsockname()[:2]
    log.info(
        "ui listening",
        extra={"fields": {"address": address, "port": port, "url": f"http://{address}:{port}/"}},
    )
    log.info("ui started", extra={"fields": {"version": __version__}})
    try:
        await server.serve(sockets=[sock])
    finally:
        await tasks.cancel(probe)
        await client.close()
        await admin_server.stop()
    log.info("stopped")


def main(argv: Sequence[str] | None = None) -> None:
    args = _parser().parse_args(argv)
    logs.configure("ui", args.log_level)
    uvloop.run(serve(args))
