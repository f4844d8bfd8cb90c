"""The stream routes stage: every TCPRoute, TLSRoute and UDPRoute, attached, weighed and served.

Where it sits: `pipeline.build` runs it after the HTTP routes stage, once every listener is
final; the two never meet, since a stream listener carries no HTTP kind and an HTTP one no
stream kind. Like the HTTP stage it runs in three steps: each route is attached (`attach`, the
same parentRef selection, allowedRoutes and hostname intersection as an HTTPRoute's) and its
one rule compiled (`streamrules`); then the routes contending for a listener or a server name
are weighed (`streamclaims`); then each is statused and served into the tables, one
`StreamMatch` per port and server name. Stream routes are not patched: a change to any of them,
or to a Service one names, runs every stage (`incremental.py`).

Spec 003 "TCPRoute, TLSRoute and UDPRoute": "The stream route kinds attach as an HTTPRoute does,
through a parentRef naming a claimed Gateway, narrowed by sectionName or port and subject to the
listener's allowedRoutes; a TCPRoute attaches only to TCP listeners, a TLSRoute only to TLS
listeners and a UDPRoute only to UDP listeners, and one naming a listener of another protocol is
refused with NotAllowedByListeners." "Their status is written as an HTTPRoute's is."
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from coxswain_controller.translate.backends.resolver import BackendResolver
from coxswain_controller.translate.conditions import ConditionType, Reason
from coxswain_controller.translate.gateways.gateway_states import GatewayState, ListenerState
from coxswain_controller.translate.guard import MALFORMED, malformed_event
from coxswain_controller.translate.inputs import Inputs, Obj, generation, name, namespace, spec, uid
from coxswain_controller.translate.result import (
    Condition,
    Event,
    ObjectRef,
    ParentVerdict,
    RouteVerdict,
)
from coxswain_controller.translate.routes.attach import Attachment, ParentOutcome, attach
from coxswain_controller.translate.routes.httproutes import RouteContribution
from coxswain_controller.translate.routes.streamclaims import Lost, owned, weigh
from coxswain_controller.translate.routes.streamrules import (
    KINDS,
    StreamPrepared,
    compile_stream_rule,
)
from coxswain_controller.translate.tables import ScopeTables
from coxswain_routing import ListenerProtocol, StreamMatch, TlsMode

__all__ = ["KINDS", "StreamRoutes", "stream_stage"]

# By (kind, namespace, name), in that order.
StreamRoutes = dict[tuple[str, str, str], RouteContribution]


@dataclass(frozen=True, slots=True)
class _Weighed:
    """A parentRef's outcome once contenders are weighed, and what it lost on the way."""

    outcome: ParentOutcome
    lost: tuple[str, ...]  # why each lost listener or server name is not served here


def stream_stage(
    inputs: Inputs,
    gateways: Mapping[tuple[str, str], GatewayState],
    resolver: BackendResolver,
    tables: ScopeTables,
) -> StreamRoutes:
    """Every stream route naming a Gateway of ours, served into `tables`."""
    found: StreamRoutes = {}
    pending: list[tuple[tuple[str, str, str], StreamPrepared]] = []
    for kind in KINDS:
        table = inputs.table(kind)
        for ns, route_name in sorted(table):
            prepared = prepare(table[(ns, route_name)], kind, inputs, gateways, resolver)
            if isinstance(prepared, StreamPrepared):
                pending.append(((kind, ns, route_name), prepared))
            elif prepared is not None:
                found[(kind, ns, route_name)] = prepared  # could not be read: its Event alone
    lost = weigh([p for _, p in pending])
    for (where, ready), lost_here in zip(pending, lost, strict=True):
        found[where] = finish(ready, tables, lost_here)
    return dict(sorted(found.items()))


def prepare(
    route: Obj,
    kind: str,
    inputs: Inputs,
    gateways: Mapping[tuple[str, str], GatewayState],
    resolver: BackendResolver,
) -> StreamPrepared | RouteContribution | None:
    """Attach and compile one stream route; None when it names no Gateway of ours. A route that
    cannot be read is a contribution adding nothing but its Warning Event."""
    try:
        outcomes = attach(route, kind, gateways, inputs)
        if not outcomes:
            return None
        rule = compile_stream_rule(route, kind, resolver)
        hostnames = tuple(str(h).lower() for h in spec(route).get("hostnames") or [])
    except MALFORMED as exc:
        return RouteContribution(route, None, (malformed_event(kind, route, exc),), (), ())
    return StreamPrepared(route, kind, outcomes, rule, hostnames if kind == "TLSRoute" else ())


def finish(prepared: StreamPrepared, tables: ScopeTables, lost: Lost) -> RouteContribution:
    """Status and serve a prepared route, without what `lost` says older routes keep."""
    route, rule = prepared.route, prepared.rule
    weighed = [_without(prepared, o, lost) for o in prepared.outcomes]
    ref = ObjectRef(prepared.kind, namespace(route), name(route))
    parents = tuple(ParentVerdict(w.outcome.parent_ref, _conditions(w, prepared)) for w in weighed)
    verdict = RouteVerdict(ref, generation(route), uid(route), parents)
    problems = rule.refused + [m for _, m in rule.unresolved] + sorted(set(lost.values()))
    events = (Event(ref, uid(route), "Warning", "Rejected", "; ".join(problems)),)
    listeners: list[ListenerState] = []
    if not rule.refused:
        _serve(prepared, [w.outcome for w in weighed], tables, listeners)
    return RouteContribution(
        route, verdict, events if problems else (), (), tuple(listeners), rule.services
    )


def _without(prepared: StreamPrepared, outcome: ParentOutcome, lost: Lost) -> _Weighed:
    """`outcome` without the listeners and server names other routes keep; refused with
    RouteConflict when nothing is left of it. An attachment every name of which a more precise
    listener of the port owns (`streamclaims.owned`) serves nothing but stays attached (and
    counted) beside what the route does serve, or alone when it lost nothing to a route."""
    kept: list[Attachment] = []  # in the outcome's order
    serving = False  # some attachment of `kept` serves a name
    why: list[str] = []
    for attachment in outcome.attachments:
        names = _names(prepared, attachment)
        gone = [lost[(attachment.listener, n)] for n in names if (attachment.listener, n) in lost]
        left = tuple(n for n in names if (attachment.listener, n) not in lost)
        why += gone
        if not gone:
            kept.append(attachment)
            serving = serving or bool(names)
        elif left:
            kept.append(Attachment(attachment.gateway, attachment.listener, left))
            serving = True
    lost_here = tuple(sorted(set(why)))
    if serving or not why:
        return _Weighed(ParentOutcome(outcome.parent_ref, tuple(kept), outcome.refusal), lost_here)
    refusal = (Reason.ROUTE_CONFLICT, "; ".join(lost_here))
    return _Weighed(ParentOutcome(outcome.parent_ref, (), refusal), lost_here)


def _serve(
    prepared: StreamPrepared,
    outcomes: Sequence[ParentOutcome],
    tables: ScopeTables,
    listeners: list[ListenerState],
) -> None:
    """One match per port and server name, however many listeners and parentRefs reach it
    (spec 003: "a route admitted by a wildcard listener and a precise one on the same port is
    served once there"); each listener it is served through counts it once."""
    served: set[tuple[object, int, str]] = set()
    rule = prepared.rule
    for outcome in outcomes:
        for attachment in outcome.attachments:
            gateway, listener = attachment.gateway, attachment.listener
            if listener not in listeners:
                listener.attached += 1
                listeners.append(listener)
            # The listener that owns a name says how its connections are served (issue 16:
            # "terminate with the listener's certificate and relay TCP").
            terminate = listener.tls_mode is TlsMode.TERMINATE
            for server_name in _names(prepared, attachment):
                where = (gateway.scope, listener.bind_port, server_name)
                if where in served:
                    continue
                served.add(where)
                match = StreamMatch(rule.id, rule.backends, server_name, terminate)
                tables.add_stream(gateway.scope, prepared.protocol, listener.bind_port, match)


def _names(prepared: StreamPrepared, attachment: Attachment) -> tuple[str, ...]:
    """The server names an attachment serves: those of its hostnames its TLS listener owns on
    the port (`streamclaims.owned`); "" (every connection) on a TCP or UDP one, where nothing
    names a host."""
    if prepared.protocol is ListenerProtocol.TLS:
        return owned(attachment, attachment.hostnames)
    return ("",)


def _conditions(weighed: _Weighed, prepared: StreamPrepared) -> tuple[Condition, ...]:
    outcome, rule = weighed.outcome, prepared.rule
    if outcome.refusal is not None:
        accepted = Condition(ConditionType.ACCEPTED, False, *outcome.refusal)
    elif rule.refused:
        message = "; ".join(rule.refused)
        accepted = Condition(ConditionType.ACCEPTED, False, Reason.UNSUPPORTED_VALUE, message)
    else:
        # Spec 003: a route that names some names already served "is served for the rest and
        # told which it lost".
        message = "accepted" + (", except: " + "; ".join(weighed.lost) if weighed.lost else "")
        accepted = Condition(ConditionType.ACCEPTED, True, Reason.ACCEPTED, message)
    if rule.unresolved:
        message = "; ".join(m for _, m in rule.unresolved)
        resolved = Condition(ConditionType.RESOLVED_REFS, False, rule.unresolved[0][0], message)
    else:
        resolved = Condition(
            ConditionType.RESOLVED_REFS, True, Reason.RESOLVED_REFS, "all references resolved"
        )
    return (accepted, resolved)
