"""`coxswain-proxy`: the command line. `serve` runs the data plane until SIGTERM.

`serve` wires the pieces: the admin server (readiness, metrics), the routing holder whose
every commit the data plane applies, and the discovery client that fills it. Without
`--discovery-endpoint` the proxy starts idle and says so on /readyz (the local demo and the
packaging tests start it that way).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import socket
import sys
from collections.abc import Sequence
from pathlib import Path

import uvloop

from coxswain_proto import discovery as pb
from coxswain_proxy._version import __version__
from coxswain_proxy.dataplane import wiring
from coxswain_proxy.discovery import endpoints, failures, ports, svid
from coxswain_proxy.discovery.client import ClientConfig, DiscoveryClient
from coxswain_proxy.discovery.holder import RoutingHolder
from coxswain_service import admin, logs, signals, tasks
from coxswain_service.readiness import Readiness

log = logging.getLogger("coxswain_proxy")

TOKEN_PATH = "/var/run/secrets/coxswain/discovery-token/token"  # noqa: S105 (a path)
TRUST_BUNDLE_PATH = "/var/run/secrets/coxswain/trust-bundle/ca.crt"

# How long the discovery client gets to close its stream and channel: inside the 5 s budget.
DISCOVERY_STOP_SECONDS = 2.0


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
    admin.add_arguments(serve, port=9092)
    _discovery_flags(serve)
    wiring.add_arguments(serve)
    return parser


def _discovery_flags(serve: argparse.ArgumentParser) -> None:
    group = serve.add_argument_group("discovery")
    group.add_argument(
        "--discovery-endpoint",
        help="the controller's discovery stream: comma-separated host:port or https://host:port",
    )
    group.add_argument(
        "--discovery-bootstrap-endpoint",
        help="the identity service that issues SVIDs: comma-separated host:port",
    )
    group.add_argument("--token-path", default=TOKEN_PATH, help="the projected token file")
    group.add_argument("--trust-bundle-path", default=TRUST_BUNDLE_PATH, help="the CA bundle")
    group.add_argument("--node-id", default=socket.gethostname(), help="default: the hostname")
    group.add_argument(
        "--discovery-server-name",
        help="the name the controller's and identity's certificates must carry "
        "(default: each endpoint's host)",
    )


def _check(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    if args.dedicated and not (args.gateway_name and args.gateway_namespace):
        parser.error("--dedicated needs --gateway-name and --gateway-namespace")
    if args.shared and (args.gateway_name or args.gateway_namespace):
        parser.error("--gateway-name/--gateway-namespace apply only with --dedicated")
    if args.discovery_endpoint and not args.discovery_bootstrap_endpoint:
        parser.error("--discovery-endpoint needs --discovery-bootstrap-endpoint")
    try:
        for flag in (args.discovery_endpoint, args.discovery_bootstrap_endpoint):
            if flag is not None:
                endpoints.parse(flag)
    except failures.ConfigError as exc:
        parser.error(str(exc))


def _scope(args: argparse.Namespace) -> pb.Scope:
    if args.dedicated:
        gateway = pb.ScopeGateway(namespace=args.gateway_namespace, name=args.gateway_name)
        return pb.Scope(gateway=gateway)
    return pb.Scope(shared_pool=pb.ScopeSharedPool())


def _client(
    args: argparse.Namespace,
    holder: RoutingHolder,
    readiness: Readiness,
    binder: ports.PortBinder,
) -> DiscoveryClient:
    issuer = svid.SvidIssuer(
        svid.IssuerConfig(
            endpoints=endpoints.parse(args.discovery_bootstrap_endpoint),
            token_path=Path(args.token_path),
            trust_bundle_path=Path(args.trust_bundle_path),
            server_name=args.discovery_server_name,
        )
    )
    config = ClientConfig(
        endpoints=endpoints.parse(args.discovery_endpoint),
        node_id=args.node_id,
        scope=_scope(args),
        server_name=args.discovery_server_name,
    )
    return DiscoveryClient(
        config,
        issuer=issuer,
        holder=holder,
        bound=binder,
        on_stop=lambda reason: readiness.warn("discovery", reason),
        on_connection=lambda connected: _connection(readiness, connected),
    )


DEGRADED = "degraded: not connected to the controller; serving the last snapshot received"


def _connection(readiness: Readiness, connected: bool) -> None:
    # Still ready while disconnected: the held routing keeps serving (spec 001); /readyz says
    # it is degraded so an operator sees it.
    if connected:
        readiness.clear_warning("connection")
    else:
        readiness.warn("connection", DEGRADED)


async def serve(args: argparse.Namespace) -> int:
    """Run until SIGTERM (exit status 0) or a worker process dies (1)."""
    readiness = Readiness()
    readiness.await_("snapshot", "no routing snapshot received from the controller yet")
    holder = RoutingHolder()
    holder.on_swap(lambda _: readiness.satisfy("snapshot"))
    admin_server = admin.AdminServer(service="proxy", version=__version__, readiness=readiness)
    await admin_server.start(args.admin_address, args.admin_port)
    binder = ports.PortBinder()
    stop = asyncio.Event()
    failed: list[str] = []

    def worker_died(name: str, code: int | None) -> None:
        log.error(
            "a worker process ended; stopping so that the proxy is restarted whole",
            extra={"fields": {"worker": name, "exit_code": code}},
        )
        failed.append(name)
        stop.set()

    # Workers are forked here, before the discovery client starts any gRPC threads.
    plane = await wiring.start(args, holder, binder, worker_died)
    discovery = None
    if args.discovery_endpoint:
        client = _client(args, holder, readiness, binder)
        discovery = tasks.spawn(client.run(), name="discovery", may_end=True)
    else:
        log.warning("no --discovery-endpoint: the proxy will receive no routing")
        readiness.warn("discovery", "no --discovery-endpoint configured")
    signals.on_stop(stop.set)
    log.info("proxy started", extra={"fields": {"version": __version__}})
    await stop.wait()
    log.info("stopping")
    if discovery is not None:
        discovery.cancel()
        await asyncio.wait({discovery}, timeout=DISCOVERY_STOP_SECONDS)
    await plane.close()
    await admin_server.stop()
    log.info("stopped")
    return 1 if failed else 0


def main(argv: Sequence[str] | None = None) -> None:
    parser = _parser()
    args = parser.parse_args(argv)
    _check(parser, args)
    logs.configure("proxy", args.log_level)
    sys.exit(uvloop.run(serve(args)))
