"""`coxswain-controller`: the command line. `serve` runs the service until SIGTERM."""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys
from collections.abc import Sequence
from pathlib import Path

import grpc.aio
import uvloop
import yaml

from coxswain_controller import admin, logs
from coxswain_controller._version import __version__
from coxswain_controller.discovery import leadership, listener, nodes, registry, scopes
from coxswain_controller.translate import goldens

log = logging.getLogger("coxswain_controller")

# Streams are told to go before the process exits; proxies reconnect to the next leader.
DISCOVERY_GRACE_SECONDS = 2.0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="coxswain-controller", description=__doc__)
    parser.add_argument("--version", action="version", version=f"coxswain-controller {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)
    serve = commands.add_parser("serve", help="run the controller")
    serve.add_argument("--admin-address", default="0.0.0.0", help="admin listen address")
    serve.add_argument("--admin-port", type=int, default=9090, help="admin port (0: any)")
    serve.add_argument("--log-level", default="info", choices=["debug", "info", "warning"])
    _discovery_flags(serve)
    offline = commands.add_parser(
        "translate", help="translate manifests offline and print the compiled routing and status"
    )
    offline.add_argument(
        "-f", "--filename", action="append", type=Path, default=[], help="a manifest file (YAML)"
    )
    offline.add_argument(
        "--update-goldens", type=Path, metavar="DIR", help="rewrite the golden cases under DIR"
    )
    return parser


def _translate_offline(args: argparse.Namespace) -> int:
    if args.update_goldens is not None:
        for case in goldens.update_goldens(args.update_goldens):
            print(f"updated {case}")
        return 0
    if not args.filename:
        print(
            "coxswain-controller translate: give -f FILE (or --update-goldens DIR)", file=sys.stderr
        )
        return 2
    documents = []
    for path in args.filename:
        with path.open() as handle:
            documents += list(yaml.safe_load_all(handle))
    sys.stdout.write(goldens.render_manifests(documents))
    return 0


def _discovery_flags(serve: argparse.ArgumentParser) -> None:
    group = serve.add_argument_group("discovery (the mTLS stream proxies subscribe to)")
    group.add_argument("--discovery-address", default="0.0.0.0", help="listen address")
    group.add_argument("--discovery-port", type=int, default=50051, help="listen port (0: any)")
    group.add_argument(
        "--ca-cert-file", type=Path, help="the discovery CA certificate (PEM); SVIDs chain to it"
    )
    group.add_argument("--ca-key-file", type=Path, help="the discovery CA key (PEM)")
    group.add_argument(
        "--discovery-dns",
        default="coxswain-controller-discovery.coxswain-system.svc,localhost",
        help="comma-separated DNS names of the discovery serving certificate",
    )
    group.add_argument("--trust-domain", default="cluster.local", help="SPIFFE trust domain")
    group.add_argument(
        "--shared-proxy-identity",
        default="coxswain-system/coxswain-proxy",
        help="namespace/serviceaccount of the shared proxy pool (the only SharedPool subscriber)",
    )


async def _start_discovery(
    args: argparse.Namespace, readiness: admin.Readiness
) -> grpc.aio.Server | None:
    if args.ca_cert_file is None or args.ca_key_file is None:
        readiness.await_("discovery", "no discovery CA configured (--ca-cert-file, --ca-key-file)")
        return None
    namespace, _, service_account = args.shared_proxy_identity.partition("/")
    settings = listener.DiscoverySettings(
        address=args.discovery_address,
        port=args.discovery_port,
        ca_cert_file=args.ca_cert_file,
        ca_key_file=args.ca_key_file,
        dns_names=tuple(n for n in args.discovery_dns.split(",") if n),
        trust_domain=args.trust_domain,
        shared_proxy=scopes.Identity(namespace, service_account),
    )
    # Until leader election lands, a controller leads from the start: run one replica.
    server, _ = await listener.start(
        settings,
        registry=registry.SnapshotRegistry(),
        nodes=nodes.NodeRegistry(),
        leadership=leadership.Leadership(leader=True),
    )
    return server


async def serve(args: argparse.Namespace) -> None:
    readiness = admin.Readiness()
    readiness.await_("snapshot", "caches not synced and no snapshot published yet")
    runner = await admin.start(args.admin_address, args.admin_port, readiness)
    discovery = await _start_discovery(args, readiness)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    log.info("controller started", extra={"fields": {"version": __version__}})
    await stop.wait()
    log.info("stopping")
    if discovery is not None:
        await discovery.stop(DISCOVERY_GRACE_SECONDS)
    await runner.cleanup()
    log.info("stopped")


def main(argv: Sequence[str] | None = None) -> None:
    parser = _parser()
    args = parser.parse_args(argv)
    if args.command == "translate":
        sys.exit(_translate_offline(args))
    logs.configure("controller", args.log_level)
    uvloop.run(serve(args))
