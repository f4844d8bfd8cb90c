"""One pass's stage products, and the `TranslateResult` they add up to.

Where it sits: `pipeline.build` runs every stage and keeps what each produced in a `Pass`;
`incremental.patch` moves a kept `Pass` to new inputs when only routes, EndpointSlices or
Services changed. Either way `Pass.result()` assembles the verdicts, Events and snapshots, so a
patched pass answers exactly what a fresh one would (incremental_test compares the two on every
golden case and on random edit sequences).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from coxswain_controller.translate import handover
from coxswain_controller.translate.backends.policies import policy_verdicts
from coxswain_controller.translate.backends.resolver import BackendResolver
from coxswain_controller.translate.gateways.addresses import Addresses, gateway_addresses
from coxswain_controller.translate.gateways.classes import class_events
from coxswain_controller.translate.gateways.gateway_states import GatewayState
from coxswain_controller.translate.gateways.gateway_status import gateway_events, gateway_verdict
from coxswain_controller.translate.gateways.listenerset_status import (
    listener_set_events,
    listener_set_verdicts,
)
from coxswain_controller.translate.inputs import Inputs, Options
from coxswain_controller.translate.policies.coxswain import Policies
from coxswain_controller.translate.provision import names
from coxswain_controller.translate.provision.mirror import with_endpoints
from coxswain_controller.translate.provision.model import GatewayProvision
from coxswain_controller.translate.result import (
    ClassVerdict,
    Event,
    IngressVerdict,
    TranslateResult,
    Verdict,
)
from coxswain_controller.translate.routes.httproutes import RouteContribution
from coxswain_controller.translate.scopes import GatewayScope, Identity
from coxswain_controller.translate.tables import ScopeTables

__all__ = ["Pass"]


@dataclass(slots=True, eq=False)
class Pass:
    """One translation's stage products, kept so that the next pass can patch them."""

    inputs: Inputs
    class_verdicts: list[ClassVerdict]
    gateways: dict[tuple[str, str], GatewayState]  # by (namespace, name), oldest first
    resolver: BackendResolver
    tables: ScopeTables
    routes: dict[tuple[str, str], RouteContribution]  # by (namespace, name), in that order
    grpc_routes: dict[tuple[str, str], RouteContribution]  # GRPCRoutes, likewise
    # The Events of what a patch never runs again: Ingresses, and every object found malformed.
    events: list[Event]
    addresses: Addresses
    # Ingresses are not patched: any change to them runs every stage, so these hold.
    ingress_verdicts: list[IngressVerdict]
    ingress_services: frozenset[tuple[str, str]]  # the Services Ingresses name
    options: Options = field(default_factory=Options)
    # What should exist for each Gateway (provision/desired.py): it reads nothing a patch moves.
    provision: tuple[GatewayProvision, ...] = ()
    # (EndpointSlice table, provision, mirrored): the last `with_endpoints`, kept while neither
    # changed, so a pass with no endpoint churn hands the provisioner the very same objects.
    mirrored: tuple[object, object, tuple[GatewayProvision, ...]] | None = None
    # TCPRoutes, TLSRoutes and UDPRoutes by (kind, namespace, name): never patched, only kept.
    stream_routes: dict[tuple[str, str, str], RouteContribution] = field(default_factory=dict)
    # CoxswainPolicies: read once per full pass; their ancestors are what the rules reached.
    coxswain_policies: Policies | None = None

    def result(self) -> TranslateResult:
        gateways = self.gateways.values()
        events = [
            *class_events(self.class_verdicts),
            *(e for g in gateways for e in gateway_events(g)),
            *(e for g in gateways for e in listener_set_events(g)),
            *(e for c in self.routes.values() for e in c.events),
            *(e for c in self.grpc_routes.values() for e in c.events),
            *(e for c in self.stream_routes.values() for e in c.events),
            *self.events,
            *self.resolver.events,  # slices and policies it could not read
        ]
        # Each Gateway's address is its Service's, read from the current inputs: a Service's
        # status changing (a load balancer assigning an address) is a patch.
        gateway_verdicts = [
            gateway_verdict(g, gateway_addresses(g, self.inputs, self.options, self.addresses))
            for g in gateways
        ]
        verdicts: list[Verdict] = [
            *self.class_verdicts,
            *gateway_verdicts,
            # ListenerSets after their Gateways: a set's Programmed follows its parent's.
            *(
                v
                for g, parent in zip(gateways, gateway_verdicts, strict=True)
                for v in listener_set_verdicts(g, parent)
            ),
            *(c.verdict for c in self.routes.values() if c.verdict is not None),
            *(c.verdict for c in self.grpc_routes.values() if c.verdict is not None),
            *(c.verdict for c in self.stream_routes.values() if c.verdict is not None),
            *self.ingress_verdicts,
            # BackendTLSPolicies: their ancestors are the Gateways serving the routes above.
            *policy_verdicts(
                self.inputs,
                self.resolver.policies,
                [*self.routes.values(), *self.grpc_routes.values()],
            ),
            # CoxswainPolicies: their ancestors are the Gateways whose tables hold their rules.
            *(
                self.coxswain_policies.verdicts(self.tables.resources(self.resolver.endpoint_sets))
                if self.coxswain_policies is not None
                else ()
            ),
        ]
        # Services, Deployments and EndpointSlices tell how far a mode switch has come.
        handing_over = handover.phases(gateways, self.inputs, self.options)
        snapshots = self.tables.resources(self.resolver.endpoint_sets)
        return TranslateResult(
            snapshots=handover.serve_from_shared(snapshots, self.gateways, handing_over),
            verdicts=tuple(verdicts),
            events=tuple(sorted(events, key=lambda e: (e.ref, e.reason, e.message))),
            gateway_identities={
                g.scope: Identity(g.namespace, names.dedicated_service_account(g.name, g.cls.name))
                for g in gateways
                if isinstance(g.scope, GatewayScope)
            },
            provision=handover.provision_during(
                self._provision(), self.gateways, handing_over, self.options
            ),
        )

    def _provision(self) -> tuple[GatewayProvision, ...]:
        # The mirrored shared-proxy endpoints follow EndpointSlices, which a patch moves.
        slices = self.inputs.table("EndpointSlice")
        held = self.mirrored
        if held is None or held[0] is not slices or held[1] is not self.provision:
            mirrored = with_endpoints(self.provision, self.gateways, self.inputs, self.options)
            held = self.mirrored = (slices, self.provision, mirrored)
        return held[2]
