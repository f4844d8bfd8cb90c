"""`translate(inputs, options)`: the cached objects to snapshots, status verdicts and Events.

A pure function in named stages, like Contour's DAG builder: classes, gateways and their
listeners, bind ports, routes, Ingresses, then finalize (TLS stores, listener resources, verdicts,
canonical order). No I/O; the same inputs give the same result, byte for byte.
"""

from __future__ import annotations

from coxswain_controller.discovery.scopes import SHARED_POOL, GatewayScope, Identity
from coxswain_controller.translate.backends import BackendResolver
from coxswain_controller.translate.classes import claimed_classes
from coxswain_controller.translate.gateway_status import gateway_verdict
from coxswain_controller.translate.gateways import GatewayState, gateway_states
from coxswain_controller.translate.grants import Grants
from coxswain_controller.translate.httproutes import http_routes
from coxswain_controller.translate.ingress import ingresses
from coxswain_controller.translate.inputs import Inputs, Options, generation, name, namespace
from coxswain_controller.translate.memo import RouteMemo
from coxswain_controller.translate.ports import assign_bind_ports
from coxswain_controller.translate.result import TranslateResult, Verdict
from coxswain_controller.translate.tables import ScopeTables
from coxswain_routing import Listener, TlsCertificate

__all__ = ["translate"]


def translate(
    inputs: Inputs, options: Options | None = None, memo: RouteMemo | None = None
) -> TranslateResult:
    """Translate `inputs`. `memo` (kept across passes by the publisher) reuses compiled routes
    that nothing they depend on has changed; the result is the same with or without it."""
    options = options or Options()
    grants = Grants(inputs)
    classes, class_verdicts = claimed_classes(inputs, options)
    gateways = gateway_states(inputs, classes, grants)
    assign_bind_ports(gateways, options)
    resolver = BackendResolver(inputs, grants)
    tables = ScopeTables()
    tables.scope(SHARED_POOL)
    by_key = {(g.namespace, g.name): g for g in gateways}
    route_verdicts, events = http_routes(inputs, by_key, resolver, tables, memo)
    if memo is not None:
        memo.keep_only(("HTTPRoute", namespace(r), name(r)) for r in inputs.all("HTTPRoute"))
    events += ingresses(inputs, options, resolver, tables)
    for gateway in gateways:
        _finalize_gateway(gateway, tables)
    verdicts: list[Verdict] = [
        *class_verdicts,
        *(gateway_verdict(g) for g in gateways),
        *route_verdicts,
    ]
    identities = {
        g.scope: Identity(g.namespace, f"{g.name}-{g.cls.name}")
        for g in gateways
        if isinstance(g.scope, GatewayScope)
    }
    return TranslateResult(
        snapshots=tables.resources(resolver.endpoint_sets),
        verdicts=tuple(verdicts),
        events=tuple(sorted(events, key=lambda e: (e.ref, e.reason, e.message))),
        gateway_identities=identities,
    )


def _finalize_gateway(gateway: GatewayState, tables: ScopeTables) -> None:
    """The listeners a proxy binds for this Gateway and the certificates its ports serve."""
    tables.scope(gateway.scope)
    if not gateway.served:
        return
    listeners = []
    for x in gateway.listeners:
        if not x.served:
            continue
        listeners.append(
            Listener(x.name, x.port, x.bind_port, x.model_protocol, x.hostname, x.tls_mode)
        )
        for certificate in x.certificates:
            names = (x.hostname,) if x.hostname else certificate.dns_names
            tables.add_certificate(
                gateway.scope,
                x.bind_port,
                TlsCertificate(
                    names, certificate.chain_pem, certificate.key_pem, certificate.source
                ),
            )
    tables.add_listeners(
        gateway.scope, gateway.namespace, gateway.name, generation(gateway.obj), listeners
    )
