"""`translate(inputs, options)`: the cached objects to snapshots, status verdicts and Events.

A pure function in named stages, like Contour's DAG builder: classes, gateways and their
listeners, bind ports, routes, Ingresses, then finalize (TLS stores, listener resources, verdicts,
canonical order). No I/O; the same inputs give the same result, byte for byte.

The stages' products are kept in a `Pass` so that `translate.incremental.Translator` can patch a
pass when only HTTPRoutes, EndpointSlices or Services changed (route edits and endpoint churn,
the common changes) instead of running every stage again: `Pass.patch` withdraws each changed
route's contribution (and each route naming a changed Service) and adds its new one, refreshes
the endpoint sets whose slices or Services changed, and
`Pass.result()` assembles the same `TranslateResult` a fresh pass would (incremental_test
compares the two on every golden case and on random edit sequences).
"""

from __future__ import annotations

from collections.abc import Mapping

from coxswain_controller.discovery.scopes import SHARED_POOL, GatewayScope, Identity
from coxswain_controller.translate.addresses import Addresses, published_addresses
from coxswain_controller.translate.backends import BackendResolver
from coxswain_controller.translate.classes import claimed_classes, class_events
from coxswain_controller.translate.gateway_status import gateway_events, gateway_verdict
from coxswain_controller.translate.gateways import GatewayState, gateway_states
from coxswain_controller.translate.grants import Grants
from coxswain_controller.translate.httproutes import (
    KIND as HTTP_ROUTE,
)
from coxswain_controller.translate.httproutes import (
    RouteContribution,
    http_route,
    http_routes,
    withdraw,
)
from coxswain_controller.translate.ingress import ingress_verdicts, ingresses
from coxswain_controller.translate.inputs import Inputs, Obj, Options, equivalent, generation
from coxswain_controller.translate.memo import RouteMemo
from coxswain_controller.translate.ports import assign_bind_ports
from coxswain_controller.translate.result import (
    ClassVerdict,
    Event,
    IngressVerdict,
    TranslateResult,
    Verdict,
)
from coxswain_controller.translate.tables import ScopeTables
from coxswain_routing import Listener, TlsCertificate

__all__ = ["PATCHABLE", "Pass", "changed_keys", "translate"]

# The kinds a `Pass` can absorb a change to without running every stage again.
PATCHABLE = frozenset({HTTP_ROUTE, "EndpointSlice", "Service"})


def translate(
    inputs: Inputs, options: Options | None = None, memo: RouteMemo | None = None
) -> TranslateResult:
    """Translate `inputs`. `memo` (kept across passes by the publisher) reuses compiled routes
    that nothing they depend on has changed; the result is the same with or without it."""
    return Pass.build(inputs, options or Options(), memo).result()


class Pass:
    """One translation's stage products, kept so that the next pass can patch them."""

    def __init__(
        self,
        inputs: Inputs,
        class_verdicts: list[ClassVerdict],
        gateways: list[GatewayState],
        resolver: BackendResolver,
        tables: ScopeTables,
        routes: dict[tuple[str, str], RouteContribution],
        ingress_events: list[Event],
        addresses: Addresses = None,
    ) -> None:
        self.inputs = inputs
        self._class_verdicts = class_verdicts
        self._gateways = gateways
        self._by_key = {(g.namespace, g.name): g for g in gateways}
        self._resolver = resolver
        self._tables = tables
        self._routes = routes
        self._ingress_events = ingress_events
        self._addresses = addresses
        self._ingress_verdicts: list[IngressVerdict] = []
        self._ingress_services: frozenset[tuple[str, str]] = frozenset()  # Services they name
        self._identities = {
            g.scope: Identity(g.namespace, f"{g.name}-{g.cls.name}")
            for g in gateways
            if isinstance(g.scope, GatewayScope)
        }

    @classmethod
    def build(cls, inputs: Inputs, options: Options, memo: RouteMemo | None = None) -> Pass:
        grants = Grants(inputs)
        malformed: list[Event] = list(grants.malformed)
        classes, class_verdicts = claimed_classes(inputs, options, malformed)
        gateways = gateway_states(inputs, classes, grants, malformed)
        assign_bind_ports(gateways, options)
        resolver = BackendResolver(inputs, grants)
        tables = ScopeTables()
        tables.scope(SHARED_POOL)
        by_key = {(g.namespace, g.name): g for g in gateways}
        routes = http_routes(inputs, by_key, resolver, tables, memo)
        if memo is not None:
            memo.keep_only((HTTP_ROUTE, ns, n) for ns, n in inputs.table(HTTP_ROUTE))
        with resolver.recording() as ingress_services:
            ingress_events = ingresses(inputs, options, resolver, tables) + malformed
        for gateway in gateways:
            _finalize_gateway(gateway, tables)
        addresses = published_addresses(inputs, options, ingress_events)
        built = cls(
            inputs, class_verdicts, gateways, resolver, tables, routes, ingress_events, addresses
        )
        # Ingresses are not patched: any change to them runs every stage, so these hold.
        built._ingress_verdicts = ingress_verdicts(inputs, options, addresses)
        built._ingress_services = frozenset(ingress_services)
        return built

    def patch(self, inputs: Inputs, memo: RouteMemo | None = None) -> bool:
        """Move this pass to `inputs`, which differ from `self.inputs` only in the kinds of
        `PATCHABLE`; False (nothing done) when it cannot, and every stage must run again.

        EndpointSlices refresh the endpoint sets of their Services; a changed Service refreshes
        its endpoint sets and sends every route naming it through translation again, as does a
        change to the route itself (withdrawn, then translated anew). Ingress contributions are
        not kept apart, so a Service an Ingress names declines the patch.
        """
        services = changed_keys(self.inputs.table("Service"), inputs.table("Service"))
        if services & self._ingress_services:
            return False
        old: Mapping[tuple[str, str], Obj] = self.inputs.table(HTTP_ROUTE)
        new: Mapping[tuple[str, str], Obj] = inputs.table(HTTP_ROUTE)
        # A route whose new version differs only in status (our own write) translates alike.
        changed = [] if old is new else [k for k, r in new.items() if _edited(old.get(k), r)]
        changed += [k for k in old if k not in new]
        if services:
            edited = set(changed)
            changed += [
                k for k, c in self._routes.items() if c.services & services and k not in edited
            ]
            self._tables.endpoints_changed(self._resolver.refresh_services(inputs, services))
        if self.inputs.table("EndpointSlice") is not inputs.table("EndpointSlice"):
            self._tables.endpoints_changed(self._resolver.refresh_endpoints(inputs))
        self.inputs = inputs
        appended = False
        for key in changed:
            held = self._routes.get(key)
            if held is not None:
                withdraw(held, self._tables)
            route = new.get(key)
            contribution = None
            if route is not None:
                contribution = http_route(
                    route, inputs, self._by_key, self._resolver, self._tables, memo
                )
            if contribution is None:
                self._routes.pop(key, None)
                if memo is not None:
                    memo.forget((HTTP_ROUTE, *key))
            else:
                appended = appended or held is None
                self._routes[key] = contribution  # an existing key keeps its place
        if appended:
            # The canonical (namespace, name) order a fresh pass produces.
            self._routes = dict(sorted(self._routes.items()))
        return True

    def result(self) -> TranslateResult:
        route_events = [e for c in self._routes.values() for e in c.events]
        events = [
            *class_events(self._class_verdicts),
            *(e for g in self._gateways for e in gateway_events(g)),
            *route_events,
            *self._ingress_events,
            *self._resolver.events,  # slices and policies it could not read
        ]
        verdicts: list[Verdict] = [
            *self._class_verdicts,
            *(gateway_verdict(g, self._addresses) for g in self._gateways),
            *(c.verdict for c in self._routes.values() if c.verdict is not None),
            *self._ingress_verdicts,
        ]
        return TranslateResult(
            snapshots=self._tables.resources(self._resolver.endpoint_sets),
            verdicts=tuple(verdicts),
            events=tuple(sorted(events, key=lambda e: (e.ref, e.reason, e.message))),
            gateway_identities=dict(self._identities),
        )


def changed_keys(
    old: Mapping[tuple[str, str], Obj], new: Mapping[tuple[str, str], Obj]
) -> set[tuple[str, str]]:
    """The keys whose object was added, removed or changed other than in status."""
    if old is new:
        return set()
    found = {k for k, obj in new.items() if _edited(old.get(k), obj)}
    return found | {k for k in old if k not in new}


def _edited(held: Obj | None, route: Obj) -> bool:
    return held is not route and (held is None or not equivalent(held, route))


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
