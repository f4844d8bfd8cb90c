"""`coxswain-controller`: the command line.

`serve` runs the controller until SIGTERM; `translate -f` runs translation offline and prints
what it would serve and write; `translate -f --migration-report` prints instead, for each
Ingress, what becomes of its ingress-nginx annotations and the HTTPRoutes meaning the same.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Sequence
from pathlib import Path

import uvloop
import yaml

from coxswain_controller import api, runtime
from coxswain_controller._version import __version__
from coxswain_controller.api import access
from coxswain_controller.translate import Options, goldens
from coxswain_controller.translate.ingress import report
from coxswain_controller.translate.provision import parameters
from coxswain_service import admin, logs, readiness, signals

log = logging.getLogger("coxswain_controller")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="coxswain-controller", description=__doc__)
    parser.add_argument("--version", action="version", version=f"coxswain-controller {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)
    serve = commands.add_parser("serve", help="run the controller")
    admin.add_arguments(serve, port=9090)
    _kubernetes_flags(serve)
    _translation_flags(serve)
    _election_flags(serve)
    _discovery_flags(serve)
    _provisioning_flags(serve)
    access.add_arguments(serve)
    offline = commands.add_parser(
        "translate", help="translate manifests offline and print the compiled routing and status"
    )
    offline.add_argument(
        "-f", "--filename", action="append", type=Path, default=[], help="a manifest file (YAML)"
    )
    offline.add_argument(
        "--update-goldens", type=Path, metavar="DIR", help="rewrite the golden cases under DIR"
    )
    offline.add_argument(
        "--published-service",
        default="",
        metavar="NAMESPACE/NAME",
        help="as for serve: the Service whose addresses shared Gateways report",
    )
    offline.add_argument(
        "--migration-report",
        action="store_true",
        help="print each Ingress's ingress-nginx annotations with their fate (honoured, ignored, "
        "refused and why) and the equivalent HTTPRoutes, instead of the compiled routing",
    )
    offline.add_argument(
        "--report-gateway",
        type=gateway_ref,
        default="gateway",
        metavar="[NAMESPACE/]NAME",
        help="the Gateway the report's HTTPRoutes attach to (default: %(default)s)",
    )
    _provisioning_flags(offline)
    return parser


def gateway_ref(text: str) -> tuple[str, str]:
    """--report-gateway: `name` or `namespace/name`."""
    ns, _, gateway = text.rpartition("/")
    if not gateway or "/" in ns:
        raise argparse.ArgumentTypeError(f"{text!r} is not NAME or NAMESPACE/NAME")
    return ns, gateway


def _kubernetes_flags(serve: argparse.ArgumentParser) -> None:
    group = serve.add_argument_group("Kubernetes API (default: in-cluster configuration)")
    group.add_argument("--kubeconfig", type=Path, help="a kubeconfig file")
    group.add_argument("--api-server", help="the API server URL (no credentials: tests and demo)")


def _translation_flags(serve: argparse.ArgumentParser) -> None:
    defaults = Options()
    group = serve.add_argument_group("translation")
    group.add_argument(
        "--controller-name", default=defaults.gateway_controller, help="GatewayClass controllerName"
    )
    group.add_argument(
        "--ingress-controller-name",
        default=defaults.ingress_controller,
        help="IngressClass controller",
    )
    group.add_argument("--ingress-http-port", type=int, default=defaults.ingress_http_port)
    group.add_argument("--ingress-https-port", type=int, default=defaults.ingress_https_port)
    group.add_argument(
        "--published-service",
        default=defaults.published_service,
        metavar="NAMESPACE/NAME",
        help="the Service in front of the shared proxies: its load balancer addresses (or "
        "external IPs) become Ingresses' status.loadBalancer (Gateways report their own "
        "Services')",
    )


def _election_flags(serve: argparse.ArgumentParser) -> None:
    group = serve.add_argument_group("leader election (a coordination.k8s.io Lease)")
    group.add_argument(
        "--leader-election", action=argparse.BooleanOptionalAction, default=True,
        help="elect a leader over a Lease (--no-leader-election: this replica always leads)",
    )  # fmt: skip
    group.add_argument("--leader-election-namespace", default="coxswain-system")
    group.add_argument("--lease-duration", type=float, default=15.0, help="seconds")
    group.add_argument("--lease-renew-interval", type=float, default=5.0, help="seconds")
    group.add_argument("--lease-renew-deadline", type=float, default=10.0, help="seconds")
    group.add_argument(
        "--pod-name", default=os.environ.get("POD_NAME") or runtime.default_pod_name()
    )
    group.add_argument(
        "--pod-namespace", default=os.environ.get("POD_NAMESPACE", "coxswain-system")
    )


def _discovery_flags(serve: argparse.ArgumentParser) -> None:
    group = serve.add_argument_group("discovery (the mTLS stream proxies subscribe to)")
    group.add_argument("--discovery-address", default="0.0.0.0", help="listen address")
    group.add_argument("--discovery-port", type=int, default=50051, help="listen port (0: any)")
    group.add_argument(
        "--ca-secret", default="coxswain-system/coxswain-discovery-ca",
        help="namespace/name of the discovery CA Secret (the identity service's)",
    )  # fmt: skip
    group.add_argument(
        "--ca-cert-file",
        type=Path,
        help="the discovery CA certificate (PEM), instead of --ca-secret",
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


# Spec 002: "NodePort is rejected: it cannot preserve the advertised listener port."
NODE_PORT_REFUSED = (
    "NodePort is refused: a Gateway must be reached on the port each listener declares (spec "
    "002), and a NodePort Service is reached on node ports the API server allocates "
    "(30000-32767), so clients could not use the Gateway's own ports; use LoadBalancer, or "
    "ClusterIP behind a load balancer of your own"
)


def vip_service_type(text: str) -> str:
    """--vip-service-type: LoadBalancer or ClusterIP."""
    if text == "NodePort":
        raise argparse.ArgumentTypeError(NODE_PORT_REFUSED)
    if text not in parameters.SERVICE_TYPES:
        raise argparse.ArgumentTypeError(f"{text!r}: use LoadBalancer or ClusterIP")
    return text


def label_selector(text: str) -> tuple[tuple[str, str], ...]:
    """--shared-proxy-selector: `key=value[,key=value...]`, equality only (a Service's
    selector is a plain map)."""
    pairs = []
    for item in (part.strip() for part in text.split(",")):
        key, eq, value = item.partition("=")
        key, value = key.strip(), value.strip()
        if (
            not eq
            or not parameters.qualified_name(key)
            or not value
            or not parameters.label_value(value)
        ):
            raise argparse.ArgumentTypeError(f"{item!r} is not key=value with a label's syntax")
        pairs.append((key, value))
    return tuple(pairs)


def _provisioning_flags(parser: argparse.ArgumentParser) -> None:
    defaults = Options()
    group = parser.add_argument_group("provisioning (each Gateway's Service, identity, proxies)")
    group.add_argument(
        "--vip-service-type",
        type=vip_service_type,
        default="LoadBalancer",
        metavar="LoadBalancer|ClusterIP",
        help="the type of each shared Gateway's VIP Service (default: %(default)s; NodePort is "
        "refused: it cannot keep a listener's port)",
    )
    group.add_argument(
        "--shared-proxy-service",
        default="coxswain-system/coxswain-proxy",
        metavar="NAMESPACE/NAME",
        help="the Service selecting the shared proxy pods: a VIP Service in another namespace "
        "cannot select them, so their endpoints (this Service's EndpointSlices) are mirrored "
        "next to it (default: %(default)s; '' mirrors none)",
    )
    group.add_argument(
        "--shared-proxy-selector",
        type=label_selector,
        default=defaults.shared_proxy_selector,
        metavar="KEY=VALUE[,...]",
        help="the labels of the shared proxy pods, which every VIP Service selects "
        "(default: app.kubernetes.io/name=coxswain-proxy)",
    )
    group.add_argument(
        "--proxy-image",
        default=f"ghcr.io/coxswain-labs/coxswain-proxy:{__version__}",
        help="dedicated proxies' image, unless their parameters name one (default: %(default)s)",
    )
    group.add_argument(
        "--proxy-discovery-endpoint",
        default=defaults.proxy_discovery_endpoint,
        help="the discovery stream dedicated proxies subscribe to (their --discovery-endpoint)",
    )
    group.add_argument(
        "--proxy-bootstrap-endpoint",
        default=defaults.proxy_bootstrap_endpoint,
        help="where dedicated proxies get their SVID (their --discovery-bootstrap-endpoint)",
    )
    group.add_argument(
        "--proxy-arg",
        action="append",
        default=[],
        metavar="ARG",
        help="one more argument for every dedicated proxy, repeatable (--proxy-arg=--log-level "
        "--proxy-arg=debug)",
    )
    group.add_argument(
        "--trust-bundle-configmap",
        default=defaults.trust_bundle_configmap,
        metavar="NAMESPACE/NAME",
        help="the identity service's trust bundle ConfigMap, copied next to each dedicated "
        "Gateway for its proxies to mount (default: %(default)s)",
    )


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
    options = Options(
        published_service=args.published_service, **runtime.provisioning_options(args)
    )
    if args.migration_report:
        entries = report.migration_report(documents, options, gateway=args.report_gateway)
        sys.stdout.write(report.render_report(entries))
        return 0
    sys.stdout.write(goldens.render_manifests(documents, options))
    return 0


def admin_server(args: argparse.Namespace, running: runtime.Runtime) -> admin.AdminServer:
    """The admin server with the operator API (`api`) over `running`'s parts."""
    return admin.AdminServer(
        service="controller",
        version=__version__,
        readiness=running.readiness,
        health=lambda: api.health(running),
        routes=api.routes(running, api.Access(running, access.Settings.from_args(args))),
    )


def parse(argv: Sequence[str]) -> argparse.Namespace:
    return _parser().parse_args(argv)


async def serve(args: argparse.Namespace) -> None:
    waiting = readiness.Readiness()
    running = runtime.Runtime(args, waiting)
    server = admin_server(args, running)
    await server.start(args.admin_address, args.admin_port)
    await running.start()
    log.info("controller started", extra={"fields": {"version": __version__}})
    await signals.wait()
    log.info("stopping")
    await running.stop()
    await server.stop()
    log.info("stopped")


def main(argv: Sequence[str] | None = None) -> None:
    parser = _parser()
    args = parser.parse_args(argv)
    if args.command == "translate":
        sys.exit(_translate_offline(args))
    logs.configure("controller", args.log_level)
    uvloop.run(serve(args))
