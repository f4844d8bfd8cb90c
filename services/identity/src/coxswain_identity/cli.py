"""`coxswain-identity`: the command line. `serve` runs the service until SIGTERM."""

from __future__ import annotations

import argparse
import datetime
import logging
import re
from collections.abc import Sequence

import uvloop

from coxswain_identity import ca, server, service, serving, tokens
from coxswain_identity._version import __version__
from coxswain_service import admin, logs, readiness, signals

log = logging.getLogger("coxswain_identity")

DURATION = re.compile(r"^(\d+)([smhd]?)$")
UNIT_SECONDS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}


def duration(text: str) -> datetime.timedelta:
    """`90s`, `30m`, `24h`, `7d` or plain seconds."""
    match = DURATION.match(text.strip())
    if not match or int(match[1]) == 0:
        raise argparse.ArgumentTypeError(f"expected a positive duration like 24h, got {text!r}")
    return datetime.timedelta(seconds=int(match[1]) * UNIT_SECONDS[match[2]])


def object_ref(text: str) -> ca.ObjectRef:
    try:
        return ca.ObjectRef.parse(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc


def dns_names(text: str) -> tuple[str, ...]:
    return tuple(name.strip() for name in text.split(",") if name.strip())


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="coxswain-identity", description=__doc__)
    parser.add_argument("--version", action="version", version=f"coxswain-identity {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)
    serve = commands.add_parser("serve", help="run the identity service")
    admin.add_arguments(serve, port=9091)
    _identity_flags(serve)
    _kubernetes_flags(serve)
    return parser


def _identity_flags(serve: argparse.ArgumentParser) -> None:
    serve.add_argument("--address", default="0.0.0.0", help="IssueSvid listen address")
    serve.add_argument("--port", type=int, default=50052, help="IssueSvid port (0: any)")
    serve.add_argument("--ca-mode", type=ca.Mode, choices=list(ca.Mode), default=ca.Mode.AUTO)
    serve.add_argument(
        "--ca-secret",
        type=object_ref,
        default=ca.ObjectRef("coxswain-system", "coxswain-discovery-ca"),
        help="namespace/name of the kubernetes.io/tls Secret holding the CA",
    )
    serve.add_argument(
        "--serving-dns",
        type=dns_names,
        default=serving.DEFAULT_DNS,
        help="comma-separated DNS names of the serving certificate (127.0.0.1 is always in it)",
    )
    serve.add_argument("--trust-domain", default="cluster.local", help="SPIFFE trust domain")
    serve.add_argument("--svid-ttl", type=duration, default=datetime.timedelta(hours=24))
    serve.add_argument(
        "--shared-proxy-service-account",
        type=object_ref,
        default=ca.ObjectRef("coxswain-system", "coxswain-proxy"),
        help="namespace/name of the shared proxy's ServiceAccount",
    )


def _kubernetes_flags(serve: argparse.ArgumentParser) -> None:
    serve.add_argument("--kubeconfig", help="kubeconfig file (default: in-cluster configuration)")
    serve.add_argument("--api-server", help="API server URL, no credentials (tests and the demo)")


def settings(args: argparse.Namespace) -> service.Settings:
    shared: ca.ObjectRef = args.shared_proxy_service_account
    return service.Settings(
        address=args.address,
        port=args.port,
        ca_mode=args.ca_mode,
        ca_secret=args.ca_secret,
        serving_dns=tuple(args.serving_dns),
        policy=server.Policy(trust_domain=args.trust_domain, svid_ttl=args.svid_ttl),
        shared_proxy=tokens.ServiceAccount(shared.namespace, shared.name),
        api_server=args.api_server,
        kubeconfig=args.kubeconfig,
    )


async def serve(args: argparse.Namespace) -> None:
    waiting = readiness.Readiness()
    admin_server = admin.AdminServer(service="identity", version=__version__, readiness=waiting)
    await admin_server.start(args.admin_address, args.admin_port)
    identity = service.Service(settings(args), waiting)
    try:
        await identity.start()
        log.info("identity started", extra={"fields": {"version": __version__}})
        await signals.wait()
        log.info("stopping")
    finally:
        await identity.stop()
        await admin_server.stop()
    log.info("stopped")


def main(argv: Sequence[str] | None = None) -> None:
    parser = _parser()
    args = parser.parse_args(argv)
    logs.configure("identity", args.log_level)
    uvloop.run(serve(args))
