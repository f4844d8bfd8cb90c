"""One route of the HTTP kinds: attach it, compile its rules, serve it where it was accepted.

Where it sits: `stage.route_stage` runs this for every HTTPRoute and GRPCRoute in two steps,
`prepare` (attach and compile) and `finish` (status and serve), so that an HTTPRoute and a
GRPCRoute contending for one listener can be weighed in between (`conflicts`); `http_route` is
both steps at once, for a patch that no GRPCRoute can conflict with (`incremental.patch`).

Spec 003 "Status": a parents entry per parentRef naming a claimed Gateway; "Accepted is True
when at least one listener accepted the route, or False with NoMatchingParent,
NotAllowedByListeners, NoMatchingListenerHostname, ... or UnsupportedValue for ... a filter that
cannot be honored ... each of which unserves the whole route. ResolvedRefs is False with
BackendNotFound, InvalidKind, RefNotPermitted or UnsupportedProtocol ... when any backendRef did
not resolve; the route stays attached and the unresolved reference answers with an error."

A rule whose ExternalAuth filter cannot ask its auth service is dropped: it fails closed, every
request it matches answered 500, none of its other filters or backendRefs ever applied. While
other rules of the route are served, the route is also PartiallyInvalid (the Gateway API's
RouteConditionPartiallyInvalid, the "Drop Rule(s)" approach; the upstream
HTTPRouteExternalAuthPartiallyInvalid test). A backendRef that does not resolve drops nothing:
its rule is served, and the reference's share of requests is the API's 500.
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

__all__ = ["KIND", "Prepared", "RouteContribution", "finish", "http_route", "prepare", "withdraw"]

KIND = "HTTPRoute"


@dataclass(frozen=True, slots=True)
class RouteContribution:
    """All one route adds to a pass, kept so that a later pass can withdraw it exactly."""

    route: Obj  # the object translated: identity tells whether it changed since
    verdict: RouteVerdict | None  # None: the route could not be read (see its Event)
    events: tuple[Event, ...]
    placements: tuple[Placement, ...]
    listeners: tuple[ListenerState, ...]  # each listener the route counts as attached once
    services: frozenset[tuple[str, str]] = frozenset()  # the Services its references name


@dataclass(frozen=True, slots=True)
class Prepared:
    """A route attached and compiled but not yet served: what `conflicts` weighs."""

    route: Obj
    kind: str  # HTTPRoute or GRPCRoute
    outcomes: list[ParentOutcome]
    compiled: RouteRules


def http_route(
    route: Obj,
    inputs: Inputs,
    gateways: Mapping[tuple[str, str], GatewayState],
    resolver: BackendResolver,
    tables: ScopeTables,
    memo: RouteMemo | None = None,
) -> RouteContribution | None:
    """Translate one HTTPRoute into `tables`, where no GRPCRoute can conflict with it (see
    `incremental.patch`); None when it names no Gateway of ours."""
    prepared = prepare(route, KIND, inputs, gateways, resolver, memo)
    return prepared if not isinstance(prepared, Prepared) else finish(prepared, tables)


def prepare(
    route: Obj,
    kind: str,
    inputs: Inputs,
    gateways: Mapping[tuple[str, str], GatewayState],
    resolver: BackendResolver,
    memo: RouteMemo | None = None,
) -> Prepared | RouteContribution | None:
    """Attach and compile one route of `kind`; None when it names no Gateway of ours (not ours
    to translate or status). A route that cannot be read is a contribution adding nothing but
    its Warning Event."""
    try:
        outcomes = attach(route, kind, gateways, inputs)
        if not outcomes:
            return None
        if memo is None:
            compiled = compile_rules(route, kind, resolver)
        else:
            compiled = memo.compile(route, kind, resolver, inputs)
    except MALFORMED as exc:
        # Everything that reads the route runs here, before `finish` touches the tables.
        return RouteContribution(route, None, (malformed_event(kind, route, exc),), (), ())
    return Prepared(route, kind, outcomes, compiled)


def finish(
    prepared: Prepared, tables: ScopeTables, lost: Mapping[ListenerState, str] | None = None
) -> RouteContribution:
    """Status and serve a prepared route; `lost` names the listeners an older route of the
    other kind keeps (`conflicts.route_conflicts`), and why."""
    route, kind, compiled = prepared.route, prepared.kind, prepared.compiled
    outcomes = [_without(o, lost) for o in prepared.outcomes] if lost else prepared.outcomes
    ref = ObjectRef(kind, namespace(route), name(route))
    parents = tuple(ParentVerdict(o.parent_ref, _conditions(o, compiled)) for o in outcomes)
    verdict = RouteVerdict(ref, generation(route), uid(route), parents)
    events = tuple(_events(route, ref, compiled, lost))
    placements: list[Placement] = []
    listeners: list[ListenerState] = []
    if not compiled.refused:
        _serve(outcomes, compiled, tables, placements, listeners)
    return RouteContribution(
        route, verdict, events, tuple(placements), tuple(listeners), compiled.services
    )


def _without(outcome: ParentOutcome, lost: Mapping[ListenerState, str]) -> ParentOutcome:
    """`outcome` without the attachments it lost; refused with RouteConflict when none is left.

    Spec 003 "GRPCRoute": "An HTTPRoute and a GRPCRoute attached to one listener with
    intersecting hostnames cannot both be served: the older is, and the newer is refused with
    Accepted: False and reason RouteConflict"."""
    kept = tuple(a for a in outcome.attachments if a.listener not in lost)
    if len(kept) == len(outcome.attachments):
        return outcome
    if kept:
        return ParentOutcome(outcome.parent_ref, kept, None)
    reasons = sorted({lost[a.listener] for a in outcome.attachments})
    return ParentOutcome(outcome.parent_ref, (), (Reason.ROUTE_CONFLICT, "; ".join(reasons)))


def withdraw(contribution: RouteContribution, tables: ScopeTables) -> None:
    """Undo what `finish` added to `tables` and to its listeners' attached counts."""
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
    partial = _partially_invalid(compiled) if accepted.status else None
    return (accepted, resolved) if partial is None else (accepted, resolved, partial)


def _partially_invalid(compiled: RouteRules) -> Condition | None:
    """PartiallyInvalid, True, while some rules are dropped and others served; None otherwise.

    Gateway API RouteConditionPartiallyInvalid: the "Drop Rule(s)" approach, its message
    starting "Dropped Rule" and naming the rules dropped, Accepted True; "This condition MUST
    NOT be set if a Route is fully valid, fully invalid, or not accepted", so it is only ever
    written True (status.merge withdraws it)."""
    dropped = compiled.dropped
    if not dropped or len(dropped) >= len(compiled.rules):
        return None
    labels = ", ".join(dropped)
    head = (
        f"Dropped Rule {labels}: its requests are answered 500"
        if len(dropped) == 1
        else f"Dropped Rules {labels}: their requests are answered 500"
    )
    why = "; ".join(m for messages in dropped.values() for m in messages)
    return Condition(
        ConditionType.PARTIALLY_INVALID, True, Reason.UNSUPPORTED_VALUE, f"{head}: {why}"
    )


def _events(
    route: Obj, ref: ObjectRef, compiled: RouteRules, lost: Mapping[ListenerState, str] | None
) -> list[Event]:
    problems = compiled.refused + [m for _, m in compiled.unresolved] + compiled.notes
    problems += sorted(set((lost or {}).values()))
    if not problems:
        return []
    return [Event(ref, uid(route), "Warning", "Rejected", "; ".join(problems))]
