"""Which listeners accept a route, and what each parentRef is told.

Spec 003: "A parentRef selects a claimed Gateway, optionally narrowed by sectionName or port.
The route attaches to each selected listener whose allowedRoutes admit it and whose hostname
intersects the route's". "A parentRef naming a Gateway this controller does not claim is
another controller's business and draws no complaint" — it gets no status entry at all.

Which refusal a parentRef gets follows the Gateway API's reasons: NoMatchingParent when its
sectionName or port names no listener the Gateway declares; NotAllowedByListeners when the
listeners it names exist but none admits the route (not served, the kind not among its
supportedKinds, the namespace not allowed); NoMatchingListenerHostname when some admit it but no
hostname intersects.

A parentRef may name a ListenerSet instead (GEP-1713 "Route Attachment"): "If a Route has a
parentRef that is a ListenerSet, then the ListenerSet is the direct Parent", and "Routes attach
to all relevant Listeners in their direct Parent object" — so a Gateway parentRef selects only
the Gateway's own listeners ("MUST NOT not attach to any listeners in the child ListenerSets"),
and a ListenerSet parentRef only that set's, by sectionName and port as for a Gateway. A
ListenerSet naming no Gateway of ours is not ours either; one its Gateway has not attached
(NotAllowed, ParentNotAccepted) refuses its routes with NoMatchingParent.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from coxswain_controller.translate.conditions import Reason
from coxswain_controller.translate.gateways import listenersets
from coxswain_controller.translate.gateways.gateway_states import GatewayState, ListenerState
from coxswain_controller.translate.gateways.listenersets import ListenerSetState
from coxswain_controller.translate.inputs import Inputs, Obj, namespace
from coxswain_routing import claiming_hostname, intersect_hostnames

__all__ = ["Attachment", "ParentOutcome", "attach"]

GATEWAY_GROUP = "gateway.networking.k8s.io"
HTTP_PROTOCOLS = ("HTTP", "HTTPS")


@dataclass(frozen=True, slots=True)
class Attachment:
    gateway: GatewayState
    listener: ListenerState
    hostnames: tuple[str, ...]  # "" for every host


@dataclass(frozen=True, slots=True)
class ParentOutcome:
    parent_ref: Mapping[str, Any]
    attachments: tuple[Attachment, ...]
    refusal: tuple[Reason, str] | None  # why no listener accepted the route


def attach(
    route: Obj,
    kind: str,
    gateways: Mapping[tuple[str, str], GatewayState],
    inputs: Inputs,
) -> list[ParentOutcome]:
    outcomes = []
    hostnames = [str(h).lower() for h in (route.get("spec") or {}).get("hostnames") or []]
    for ref in (route.get("spec") or {}).get("parentRefs") or []:
        if (ref.get("group") or GATEWAY_GROUP) != GATEWAY_GROUP:
            continue
        key = (ref.get("namespace") or namespace(route), str(ref.get("name", "")))
        parent_kind = ref.get("kind") or "Gateway"
        if parent_kind == "Gateway":
            gateway = gateways.get(key)
            if gateway is not None:
                outcomes.append(_outcome(route, kind, ref, gateway, None, hostnames, inputs))
        elif parent_kind == listenersets.KIND:
            found = _listener_set(key, gateways, inputs)
            if found is not None:
                gateway, entry = found
                outcomes.append(_outcome(route, kind, ref, gateway, entry, hostnames, inputs))
    return outcomes


def _listener_set(
    key: tuple[str, str], gateways: Mapping[tuple[str, str], GatewayState], inputs: Inputs
) -> tuple[GatewayState, ListenerSetState] | None:
    """The ListenerSet `key` names and its Gateway, when that Gateway is ours."""
    obj = inputs.get(listenersets.KIND, *key)
    if obj is None:
        return None
    try:
        parent = listenersets.parent_key(obj)
    except TypeError:
        return None  # unreadable: its own Event says so (listenersets.by_parent)
    gateway = gateways.get(parent) if parent is not None else None
    entry = gateway.listener_set(key) if gateway is not None else None
    return (gateway, entry) if gateway is not None and entry is not None else None


def _outcome(
    route: Obj,
    kind: str,
    ref: Mapping[str, Any],
    gateway: GatewayState,
    entry: ListenerSetState | None,
    hostnames: Sequence[str],
    inputs: Inputs,
) -> ParentOutcome:
    if not gateway.cls.accepted:
        # Spec 003: "every HTTPRoute naming it is refused with NoMatchingParent and the class's
        # reason".
        return ParentOutcome(
            ref,
            (),
            (Reason.NO_MATCHING_PARENT, f"GatewayClass {gateway.cls.name}: {gateway.cls.message}"),
        )
    if gateway.problems:
        return ParentOutcome(ref, (), (Reason.NO_MATCHING_PARENT, gateway.problems[0].message))
    if entry is not None and entry.refusal is not None:
        why = f"ListenerSet {entry.namespace}/{entry.name} is not attached: {entry.refusal[1]}"
        return ParentOutcome(ref, (), (Reason.NO_MATCHING_PARENT, why))
    owner = entry.key if entry is not None else None
    selected = [
        x
        for x in gateway.listeners
        if x.listener_set == owner
        and (not ref.get("sectionName") or x.name == ref["sectionName"])
        and (ref.get("port") is None or x.port == ref["port"])
    ]
    if not selected:
        return ParentOutcome(
            ref, (), (Reason.NO_MATCHING_PARENT, _no_listener(ref, gateway, entry))
        )
    allowed = [
        x
        for x in selected
        if x.served and kind in x.supported_kinds and _namespace_allowed(x, route, inputs)
    ]
    if not allowed:
        why = _not_allowed(selected, kind, namespace(route))
        return ParentOutcome(ref, (), (Reason.NOT_ALLOWED_BY_LISTENERS, why))
    attachments = tuple(
        Attachment(gateway, x, _isolated(x, gateway, names))
        for x in allowed
        if (names := intersect_hostnames(x.hostname, hostnames))
    )
    if not attachments:
        return ParentOutcome(
            ref,
            (),
            (
                Reason.NO_MATCHING_LISTENER_HOSTNAME,
                "no selected listener's hostname intersects the route's hostnames",
            ),
        )
    return ParentOutcome(ref, attachments, None)


def _isolated(listener: ListenerState, gateway: GatewayState, names: list[str]) -> tuple[str, ...]:
    """The hostnames `listener` serves the route for, less those another listener claims.

    Listener isolation (GatewayHTTPListenerIsolation): "if Listeners are defined for
    "foo.example.com" and "*.example.com", a request to "foo.example.com" SHOULD only be routed
    using routes attached to the "foo.example.com" Listener". A route on the wildcard listener
    naming foo.example.com is attached there all the same (its status says Accepted); it is
    served only for the hosts its listener claims. The matcher settles the hosts a wildcard
    pattern covers that a more specific listener claims (coxswain_routing `Claims`).
    """
    if listener.protocol not in HTTP_PROTOCOLS:
        return tuple(names)
    claiming = {
        x.hostname
        for x in gateway.listeners
        if x.served and x.protocol in HTTP_PROTOCOLS and x.port == listener.port
    }
    return tuple(n for n in names if claiming_hostname(n, claiming) == listener.hostname)


def _no_listener(
    ref: Mapping[str, Any], gateway: GatewayState, entry: ListenerSetState | None
) -> str:
    where = f"Gateway {gateway.namespace}/{gateway.name}"
    if entry is not None:
        where = f"ListenerSet {entry.namespace}/{entry.name}"
    named = f" named {ref['sectionName']}" if ref.get("sectionName") else ""
    port = f" on port {ref['port']}" if ref.get("port") is not None else ""
    return f"{where} has no listener{named}{port}"


def _not_allowed(selected: Sequence[ListenerState], kind: str, route_namespace: str) -> str:
    served = [x for x in selected if x.served]
    if not served:
        names = ", ".join(x.name for x in selected)
        return f"the selected listener(s) {names} are not served"
    if not any(kind in x.supported_kinds for x in served):
        # Spec 003: a stream route "naming a listener of another protocol is refused with
        # NotAllowedByListeners"; so is any kind a listener's supportedKinds leaves out.
        carried = ", ".join(
            f"{x.name} ({x.protocol}) carries {' and '.join(x.supported_kinds) or 'no route kind'}"
            for x in served
        )
        return f"no selected listener carries {kind}: {carried}"
    return f"no selected listener carrying {kind} admits routes from namespace {route_namespace}"


def _namespace_allowed(listener: ListenerState, route: Obj, inputs: Inputs) -> bool:
    """allowedRoutes.namespaces; "Same" is the listener's owner's namespace (its Gateway's, or
    its ListenerSet's: GEP-1713 "A listener on a ListenerSet allows routes from the same
    namespace as the ListenerSet")."""
    namespaces = listener.allowed_routes.get("namespaces") or {}
    source = namespaces.get("from") or "Same"
    if source == "All":
        return True
    if source == "Same":
        return namespace(route) == listener.owner_namespace
    if source == "Selector":
        ns_obj = inputs.get("Namespace", "", namespace(route))
        labels = ((ns_obj or {}).get("metadata") or {}).get("labels") or {}
        return listenersets.label_selector_matches(namespaces.get("selector") or {}, labels)
    return False
