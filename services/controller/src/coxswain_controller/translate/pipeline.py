"""`translate(inputs, options)`: the cached objects to snapshots, status verdicts and Events.

A pure function in named stages, read top to bottom in `build` (as Envoy Gateway's translator
and Contour's DAG builder read): each stage's comment says why it comes where it does. No I/O;
the same inputs give the same result, byte for byte. What the stages produce is kept in a `Pass`
(products.py), so that `incremental.Translator` can patch it when only routes,
EndpointSlices or Services changed instead of running every stage again.
"""

from __future__ import annotations

from coxswain_controller.translate.backends.grants import Grants
from coxswain_controller.translate.backends.resolver import BackendResolver
from coxswain_controller.translate.gateways.addresses import published_addresses
from coxswain_controller.translate.gateways.bind_ports import assign_bind_ports
from coxswain_controller.translate.gateways.classes import claimed_classes
from coxswain_controller.translate.gateways.finalize import finalize_gateways
from coxswain_controller.translate.gateways.gateway_states import gateway_states
from coxswain_controller.translate.ingress.ingresses import ingress_verdicts, ingresses
from coxswain_controller.translate.inputs import Inputs, Options
from coxswain_controller.translate.policies.coxswain import read_policies
from coxswain_controller.translate.products import Pass
from coxswain_controller.translate.provision.desired import desired_objects
from coxswain_controller.translate.result import TranslateResult
from coxswain_controller.translate.routes.memo import RouteMemo
from coxswain_controller.translate.routes.stage import route_stage
from coxswain_controller.translate.routes.streamroutes import stream_stage
from coxswain_controller.translate.scopes import SHARED_POOL
from coxswain_controller.translate.tables import ScopeTables

__all__ = ["build", "translate"]


def translate(
    inputs: Inputs, options: Options | None = None, memo: RouteMemo | None = None
) -> TranslateResult:
    """Translate `inputs`. `memo` (kept across passes by the publisher) reuses compiled routes
    that nothing they depend on has changed; the result is the same with or without it."""
    # Verdicts and Events come from the kept products, as a patched pass's do: both answer alike.
    return build(inputs, options or Options(), memo).result()


def build(inputs: Inputs, options: Options, memo: RouteMemo | None = None) -> Pass:
    """Every stage, in order, on `inputs`; what each produces is kept in the `Pass`."""
    # ReferenceGrants first: listeners' certificateRefs and routes' backendRefs both consult them.
    grants = Grants(inputs)
    malformed = list(grants.malformed)  # every stage adds the objects it could not read
    # Classes before Gateways: a Gateway is ours only through a claimed class, which may also
    # make it dedicated (its own scope) and, when it cannot be honoured, unserve it.
    classes, class_verdicts = claimed_classes(inputs, options, malformed)
    # Gateways and their listeners before anything attaches: validation decides which listeners
    # are served, and the Gateways come oldest first, the order bind ports are handed out in.
    gateways = gateway_states(inputs, classes, grants, malformed, options)
    # Bind ports before routes: a route's host tables are keyed by the listener's bind port.
    assign_bind_ports(gateways.values(), options)
    # What to provision once listeners and bind ports are final: the Services map declared
    # ports to bind ports. It reads nothing a patch changes, so a patched pass keeps it.
    provision = desired_objects(gateways.values(), inputs, options)
    # Backends resolver before routes and Ingresses: both resolve their backends through it, and
    # it gathers the endpoint sets the snapshots carry.
    resolver = BackendResolver(inputs, grants)
    # The tables the routes fill, the shared pool's from the start: its proxies get a snapshot
    # even when nothing is served.
    tables = ScopeTables(SHARED_POOL)
    # CoxswainPolicies before routes: each HTTPRoute rule gets its policy as it is placed.
    policies = read_policies(inputs, resolver)
    tables.transform = policies.attach
    # HTTPRoutes and GRPCRoutes once every listener is final: attachment reads its port,
    # hostname and allowed kinds, and counts what it attaches; the two kinds run together, since
    # they can contend for one listener's hostnames.
    routes = route_stage(inputs, gateways, resolver, tables, memo)
    # TCPRoutes, TLSRoutes and UDPRoutes: they attach only to stream listeners, which no HTTP
    # kind does, so the order changes nothing either serves; kept apart because they are never
    # patched (a change to one runs every stage).
    streams = stream_stage(inputs, gateways, resolver, tables)
    # Ingresses after HTTPRoutes, on ports of their own (kept out of the bind-port range), so the
    # order changes nothing either serves; a patch re-runs only routes, so the Services Ingresses
    # name are recorded, and a change to one of those runs every stage again.
    ingress_events, ingress_services = ingresses(inputs, options, resolver, tables)
    # Finalize Gateways once the routes are in: listeners and TLS stores read only what the
    # Gateway stage settled, never a route, so a patch keeps them as they are.
    finalize_gateways(gateways.values(), tables)
    # Addresses last: they feed only status (Gateway and Ingress verdicts), never a snapshot.
    addresses = published_addresses(inputs, options, malformed)
    # Ingress verdicts need the addresses: an Ingress's status says where clients reach it.
    verdicts = ingress_verdicts(inputs, options, addresses)
    # Kept rather than assembled: `Pass.result()` builds the verdicts, Events and snapshots, for
    # this pass and for every patch of it.
    return Pass(
        inputs=inputs,
        class_verdicts=class_verdicts,
        gateways=gateways,
        resolver=resolver,
        tables=tables,
        routes=routes.http,
        grpc_routes=routes.grpc,
        stream_routes=streams,
        events=ingress_events + malformed,
        addresses=addresses,
        ingress_verdicts=verdicts,
        ingress_services=ingress_services,
        options=options,
        provision=provision,
        coxswain_policies=policies,
    )
