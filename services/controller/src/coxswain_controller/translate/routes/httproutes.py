"""The HTTPRoute stage: attach each route, compile its rules, serve it where it was accepted.

Spec 003 "Status": a parents entry per parentRef naming a claimed Gateway; "Accepted is True
when at least one listener accepted the route, or False with NoMatchingParent,
NotAllowedByListeners, NoMatchingListenerHostname, ... or UnsupportedValue for ... a filter that
cannot be honored ... each of which unserves the whole route. ResolvedRefs is False with
BackendNotFound, InvalidKind, RefNotPermitted or UnsupportedProtocol ... when any backendRef did
not resolve; the route stays attached and the unresolved reference answers with an error."
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from coxswain_controller.translate.backends.resolver import BackendResolver
from coxswain_controller.translate.conditions import ConditionType, Reason
from coxswain_controller.translate.gateways.gateway_states import GatewayState, ListenerState
from coxswain_controller.translate.guard import MALFORMED, malformed_event
from coxswain_controller.translate.inputs import Inputs, Obj, generation, name, namespace, uid
from coxswain_controller.translate.result import (
    Condition,
    Event,
    ObjectRef,
    ParentVerdict,
    RouteVerdict,
)
from coxswain_controller.translate.routes.attach import ParentOutcome, attach
from coxswain_controller.translate.routes.memo import RouteMemo
from coxswain_controller.translate.routes.rules import RouteRules, compile_rules
from coxswain_controller.translate.tables import Placement, ScopeTables

__all__ = ["RouteContribution", "http_route", "http_routes", "withdraw"]

KIND = "HTTPRoute"


@dataclass(frozen=True, slots=True)
class RouteContribution:
    """All one HTTPRoute adds to a pass, kept so that a later pass can withdraw it exactly."""

    route: Obj  # the object translated: identity tells whether it changed since
    verdict: RouteVerdict | None  # None: the route could not be read (see its Event)
    events: tuple[Event, ...]
    placements: tuple[Placement, ...]
    listeners: tuple[ListenerState, ...]  # each listener the route counts as attached once
    services: frozenset[tuple[str, str]] = frozenset()  # the Services its references name


def http_routes(
    inputs: Inputs,
    gateways: Mapping[tuple[str, str], GatewayState],
    resolver: BackendResolver,
    tables: ScopeTables,
    memo: RouteMemo | None = None,
) -> dict[tuple[str, str], RouteContribution]:
    """Every HTTPRoute naming a Gateway of ours, by (namespace, name), in that order; `memo`
    forgets the routes that are gone."""
    found = {}
    for key in sorted(inputs.table(KIND)):
        contribution = http_route(inputs.table(KIND)[key], inputs, gateways, resolver, tables, memo)
        if contribution is not None:
            found[key] = contribution
    if memo is not None:
        memo.keep_only((KIND, ns, n) for ns, n in inputs.table(KIND))
    return found


def http_route(
    route: Obj,
    inputs: Inputs,
    gateways: Mapping[tuple[str, str], GatewayState],
    resolver: BackendResolver,
    tables: ScopeTables,
    memo: RouteMemo | None = None,
) -> RouteContribution | None:
    """Translate one route into `tables`; None when it names no Gateway of ours (not ours to
    translate or status). A route that cannot be read adds nothing and gets a Warning Event."""
    try:
        return _http_route(route, inputs, gateways, resolver, tables, memo)
    except MALFORMED as exc:
        # Everything that reads the route runs before `_serve` touches the tables.
        return RouteContribution(route, None, (malformed_event(KIND, route, exc),), (), ())


def _http_route(
    route: Obj,
    inputs: Inputs,
    gateways: Mapping[tuple[str, str], GatewayState],
    resolver: BackendResolver,
    tables: ScopeTables,
    memo: RouteMemo | None,
) -> RouteContribution | None:
    outcomes = attach(route, KIND, gateways, inputs)
    if not outcomes:
        return None
    if memo is None:
        compiled = compile_rules(route, KIND, resolver)
    else:
        compiled = memo.compile(route, KIND, resolver, inputs)
    ref = ObjectRef(KIND, namespace(route), name(route))
    parents = tuple(ParentVerdict(o.parent_ref, _conditions(o, compiled)) for o in outcomes)
    verdict = RouteVerdict(ref, generation(route), uid(route), parents)
    events = tuple(_events(route, ref, compiled))
    placements: list[Placement] = []
    listeners: list[ListenerState] = []
    if not compiled.refused:
        _serve(outcomes, compiled, tables, placements, listeners)
    return RouteContribution(
        route, verdict, events, tuple(placements), tuple(listeners), compiled.services
    )


def withdraw(contribution: RouteContribution, tables: ScopeTables) -> None:
    """Undo what `http_route` added to `tables` and to its listeners' attached counts."""
    for placement in contribution.placements:
        tables.remove(placement)
    for listener in contribution.listeners:
        listener.attached -= 1


def _serve(
    outcomes: list[ParentOutcome],
    compiled: RouteRules,
    tables: ScopeTables,
    placements: list[Placement],
    listeners: list[ListenerState],
) -> None:
    counted: set[int] = set()
    for outcome in outcomes:
        for attachment in outcome.attachments:
            gateway, listener = attachment.gateway, attachment.listener
            if id(listener) not in counted:
                listener.attached += 1
                counted.add(id(listener))
                listeners.append(listener)
            for host in attachment.hostnames:
                placements.append(
                    tables.add_rules(
                        gateway.scope,
                        table=f"gateway/{gateway.namespace}/{gateway.name}",
                        bind_port=listener.bind_port,
                        host=host,
                        rules=compiled.rules,
                        listener_port=listener.port,
                    )
                )


def _conditions(outcome: ParentOutcome, compiled: RouteRules) -> tuple[Condition, ...]:
    if outcome.refusal is not None:
        accepted = Condition(ConditionType.ACCEPTED, False, *outcome.refusal)
    elif compiled.refused:
        accepted = Condition(
            ConditionType.ACCEPTED, False, Reason.UNSUPPORTED_VALUE, "; ".join(compiled.refused)
        )
    else:
        accepted = Condition(ConditionType.ACCEPTED, True, Reason.ACCEPTED, "accepted")
    if compiled.unresolved:
        reason = compiled.unresolved[0][0]
        message = "; ".join(m for _, m in compiled.unresolved)
        resolved = Condition(ConditionType.RESOLVED_REFS, False, reason, message)
    else:
        resolved = Condition(
            ConditionType.RESOLVED_REFS, True, Reason.RESOLVED_REFS, "all references resolved"
        )
    return (accepted, resolved)


def _events(route: Obj, ref: ObjectRef, compiled: RouteRules) -> list[Event]:
    problems = compiled.refused + [m for _, m in compiled.unresolved] + compiled.notes
    if not problems:
        return []
    return [Event(ref, uid(route), "Warning", "Rejected", "; ".join(problems))]
