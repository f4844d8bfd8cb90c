"""A TCPRoute's, TLSRoute's or UDPRoute's one rule: its weighted backends, and what refuses it.

Where it sits: `streamroutes.prepare` compiles each stream route here once it is attached, before
`streamclaims` weighs routes contending for one listener or server name. Everything that reads
the route's rules runs here, so a route of the wrong shape is caught before anything is served.

Spec 003 "TCPRoute, TLSRoute and UDPRoute": "Each is served with exactly one rule, since nothing
in a stream selects among rules; a route declaring more is refused with UnsupportedValue. The
rule's backendRefs resolve as an HTTPRoute's do (a Service port, ReferenceGrants for another
namespace), with their weights, and an unresolvable reference keeps its share of the connections
and refuses them". "Backend references": "weight defaults to 1; a weight of 0 sends no traffic
and drops the reference."
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from coxswain_controller.translate.backends.resolver import BackendResolver
from coxswain_controller.translate.conditions import Reason
from coxswain_controller.translate.inputs import Obj, created, name, namespace, spec
from coxswain_controller.translate.routes.attach import ParentOutcome
from coxswain_controller.translate.routes.rules import unroutable_hostnames
from coxswain_routing import Backend, ListenerProtocol, RouteId

__all__ = ["KINDS", "PROTOCOLS", "StreamPrepared", "StreamRule", "compile_stream_rule"]

# The stream route kinds, in the order their verdicts are reported, and the listener protocol
# each attaches to (spec 003: "a TCPRoute attaches only to TCP listeners, a TLSRoute only to TLS
# listeners and a UDPRoute only to UDP listeners"; each listener's supportedKinds says so).
PROTOCOLS = {
    "TCPRoute": ListenerProtocol.TCP,
    "TLSRoute": ListenerProtocol.TLS,
    "UDPRoute": ListenerProtocol.UDP,
}
KINDS = tuple(PROTOCOLS)


@dataclass
class StreamRule:
    id: RouteId  # rule 0: the route's one rule
    backends: tuple[Backend, ...] = ()  # in declared order, weight 0 dropped
    refused: list[str] = field(default_factory=list)  # the route is not served (UnsupportedValue)
    unresolved: list[tuple[Reason, str]] = field(default_factory=list)  # ResolvedRefs False
    # Every Service its references name, resolved or not (a change to one runs every stage).
    services: frozenset[tuple[str, str]] = frozenset()


@dataclass(frozen=True, slots=True)
class StreamPrepared:
    """A stream route attached and compiled, not yet served: what `streamclaims` weighs."""

    route: Obj
    kind: str  # TCPRoute, TLSRoute or UDPRoute
    outcomes: list[ParentOutcome]
    rule: StreamRule
    hostnames: tuple[str, ...]  # the route's own (TLSRoute), lower-cased; () for every name

    @property
    def protocol(self) -> ListenerProtocol:
        return PROTOCOLS[self.kind]

    @property
    def age(self) -> tuple[int, str, str]:
        """Oldest first, then "{namespace}/{name}" (the Gateway API's conflict order)."""
        return (created(self.route), namespace(self.route), name(self.route))

    @property
    def who(self) -> str:
        return f"{self.kind} {namespace(self.route)}/{name(self.route)}"


def compile_stream_rule(route: Obj, kind: str, resolver: BackendResolver) -> StreamRule:
    rules: Sequence[Mapping[str, Any]] = spec(route).get("rules") or [{}]
    first = rules[0]
    rule_name = str(first.get("name") or "")
    out = StreamRule(RouteId(created(route), namespace(route), name(route), kind, 0, rule_name))
    if len(rules) != 1:
        out.refused.append(
            f"rules: a {kind} is served with exactly one rule, since nothing in a stream "
            f"selects among rules; it declares {len(rules)}"
        )
    if kind == "TLSRoute":
        out.refused += unroutable_hostnames(spec(route).get("hostnames") or [])
    backends = []
    with resolver.recording() as named:
        for ref in first.get("backendRefs") or []:
            if int(ref.get("weight", 1)) == 0:
                continue
            resolved = resolver.resolve(ref, route_kind=kind, route_namespace=namespace(route))
            if resolved.problem is not None:
                out.unresolved.append(resolved.problem)
            backends.append(resolved.backend)
    out.backends = tuple(backends)
    out.services = frozenset(named)
    return out
