"""Gateways and their listeners: which are served, on which port, with which certificates.

Coxswain isolates Gateways (spec 002): every Gateway keeps its own listeners and ports; nothing
merges across Gateways. A shared-mode Gateway's listener port is served on a distinct bind port
of the shared proxy (`bind_ports`), a dedicated Gateway's on its own proxy at the declared port.
Within one Gateway, spec 003 "Listeners" applies: "Two listeners on one port must serve one
protocol; where they do not, ... the earlier listener keeps the port and the other is reported
and not served", and "a UDP listener binds in its own port space, so it may share a port number
with a TCP, TLS, HTTP or HTTPS listener". A TLS listener passes TLS through, or terminates it
with its certificates as an HTTPS listener does (issue 16, the Gateway API's
TLSRouteModeTerminate); TLS listeners of either mode share a port, each serving its hostnames
(TLSRouteModeMixed). TCP and UDP listeners carry no hostname. A listener that is not served
is not Accepted, whatever refused it. HTTPS listeners on one port whose hostnames can claim the
same request host are marked OverlappingTLSConfig (the Gateway API's warning about HTTP/2
connection coalescing); they are still served.

ListenerSets (GEP-1713, `listenersets`): "Implementations MUST treat the parent Gateway as having
the merged list of all listeners from itself and attached ListenerSets", so the listeners of
each ListenerSet the Gateway's allowedListeners admits are read like its own (their certificate
references from the ListenerSet's namespace, under ReferenceGrants to the ListenerSet), appended
in merge precedence, and validated with them; each carries its ListenerSet's key, which route
attachment and status read. A Gateway's own listeners come first, so a ListenerSet can take
nothing from them; a ListenerSet whose parent is not accepted keeps none of its listeners.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from coxswain_controller.translate.backends.grants import Grants
from coxswain_controller.translate.conditions import ConditionType, Reason
from coxswain_controller.translate.gateways import listenersets
from coxswain_controller.translate.gateways.certificates import certificate_ref
from coxswain_controller.translate.gateways.classes import ClassState, is_dedicated_ref
from coxswain_controller.translate.gateways.gateway_tls import GatewayTls, read_gateway_tls
from coxswain_controller.translate.gateways.listener_state import ListenerState
from coxswain_controller.translate.gateways.listenersets import ListenerSetState
from coxswain_controller.translate.guard import MALFORMED, guarded
from coxswain_controller.translate.inputs import (
    Inputs,
    Obj,
    Options,
    created,
    name,
    namespace,
    spec,
)
from coxswain_controller.translate.provision.infrastructure import (
    Infrastructure,
    read_infrastructure,
)
from coxswain_controller.translate.result import Condition, Event
from coxswain_controller.translate.scopes import SHARED_POOL, GatewayScope, Scope
from coxswain_routing import TlsMode, hostnames_overlap

__all__ = ["GatewayState", "ListenerState", "gateway_states"]

GATEWAY_GROUP = "gateway.networking.k8s.io"
# The route kinds each served protocol carries. Spec 003 "Listeners": "allowedRoutes.kinds may
# list the kinds the listener's protocol carries: HTTPRoute and GRPCRoute on HTTP and HTTPS,
# TCPRoute on TCP, TLSRoute on TLS and UDPRoute on UDP"; "GRPCRoute": "An HTTP or HTTPS listener
# admits both kinds by default and allowedRoutes.kinds may restrict it to one; supportedKinds
# says which."
ROUTE_KINDS = {
    "HTTP": ("HTTPRoute", "GRPCRoute"),
    "HTTPS": ("HTTPRoute", "GRPCRoute"),
    "TLS": ("TLSRoute",),
    "TCP": ("TCPRoute",),
    "UDP": ("UDPRoute",),
}
# spec.tls is honoured (issue 17: client certificates both ways, `gateway_tls`), and so is
# spec.allowedListeners (ListenerSets, `listenersets`).
IGNORED_FIELDS = ("addresses",)


@dataclass(slots=True, eq=False)
class GatewayState:
    obj: Obj
    cls: ClassState
    scope: Scope
    listeners: list[ListenerState]
    problems: list[Condition] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # fields reported and ignored
    # What it asks of its infrastructure (provision/infrastructure.py); None when nothing is
    # provisioned for it (a shared Gateway without --vip-service-type).
    infrastructure: Infrastructure | None = None
    # spec.tls: client certificate validation per HTTPS port, the backend client certificate.
    tls: GatewayTls = field(default_factory=GatewayTls)
    # The ListenerSets naming it, in merge precedence (attached or not).
    listener_sets: list[ListenerSetState] = field(default_factory=list)
    admits_listener_sets: bool = False  # spec.allowedListeners admits some namespace

    @property
    def namespace(self) -> str:
        return namespace(self.obj)

    @property
    def name(self) -> str:
        return name(self.obj)

    @property
    def served(self) -> bool:
        return self.cls.accepted and not self.problems

    def listener(self, section: str) -> ListenerState | None:
        """Its own listener named `section` (a ListenerSet's are not the Gateway's)."""
        return next(
            (x for x in self.listeners if x.name == section and x.listener_set is None), None
        )

    @property
    def own_listeners(self) -> list[ListenerState]:
        return [x for x in self.listeners if x.listener_set is None]

    def listener_set(self, key: tuple[str, str]) -> ListenerSetState | None:
        return next((x for x in self.listener_sets if x.key == key), None)


def gateway_states(
    inputs: Inputs,
    classes: Mapping[str, ClassState],
    grants: Grants,
    malformed: list[Event],
    options: Options | None = None,
) -> dict[tuple[str, str], GatewayState]:
    """Every claimed Gateway by (namespace, name), oldest first, with its listeners validated;
    one that cannot be read is left out with a Warning Event (guard.py)."""
    claimed = [
        g
        for g, class_name in guarded(
            "Gateway",
            inputs.all("Gateway"),
            lambda g: str(spec(g).get("gatewayClassName")),
            malformed,
        )
        if class_name in classes
    ]
    claimed.sort(key=lambda g: (created(g), namespace(g), name(g)))
    sets = listenersets.by_parent(inputs, malformed)
    return {
        (state.namespace, state.name): state
        for _, state in guarded(
            "Gateway",
            claimed,
            lambda g: _gateway(
                inputs,
                g,
                classes[str(spec(g)["gatewayClassName"])],
                grants,
                options or Options(),
                sets.get((namespace(g), name(g)), []),
            ),
            malformed,
        )
    }


def _gateway(
    inputs: Inputs,
    obj: Obj,
    cls: ClassState,
    grants: Grants,
    options: Options,
    sets: list[Obj],
) -> GatewayState:
    infra = (spec(obj).get("infrastructure") or {}).get("parametersRef")
    dedicated = cls.dedicated or is_dedicated_ref(infra)
    scope: Scope = GatewayScope(namespace(obj), name(obj)) if dedicated else SHARED_POOL
    state = GatewayState(
        obj,
        cls,
        scope,
        [_listener(inputs, obj, raw, grants) for raw in spec(obj).get("listeners") or []],
    )
    if infra and not is_dedicated_ref(infra):
        target = f"{infra.get('kind')} {infra.get('name')}"
        message = f"infrastructure.parametersRef {target} cannot be honored"
        state.problems.append(
            Condition(ConditionType.ACCEPTED, False, Reason.INVALID_PARAMETERS, message)
        )
    ignored: tuple[str, ...] = IGNORED_FIELDS
    # Provisioned Gateways (dedicated, or shared with a VIP Service) honour spec.addresses.
    if dedicated or options.vip_service_type:
        state.infrastructure = read_infrastructure(inputs, obj, cls.parameters, dedicated)
        state.problems += state.infrastructure.problems
        ignored = tuple(k for k in IGNORED_FIELDS if k != "addresses")
    # Spec 003 "Listeners": "Not supported in this release, reported and ignored: spec.addresses
    # ..., spec.tls, and spec.allowedListeners (ListenerSets)." Both are supported since.
    state.notes += [
        f"spec.{key} is not supported in this release and is ignored"
        for key in ignored
        if spec(obj).get(key)
    ]
    _merge_listener_sets(inputs, state, sets, grants)
    _resolve_conflicts(state.listeners)
    # After conflicts, so that only listeners still served have their clients' CAs checked.
    state.tls = read_gateway_tls(inputs, obj, state.listeners, grants)
    _settle_listener_sets(state)
    _overlapping_tls(state.listeners)
    return state


def _merge_listener_sets(
    inputs: Inputs, state: GatewayState, sets: list[Obj], grants: Grants
) -> None:
    """Each ListenerSet naming the Gateway, in merge precedence; the listeners of those its
    allowedListeners admits appended to its own."""
    state.admits_listener_sets = listenersets.admits_any(state.obj)
    for obj in sets:
        entry = ListenerSetState(obj)
        state.listener_sets.append(entry)
        why = listenersets.admits(state.obj, obj, inputs)
        if why is not None:
            entry.refusal = (Reason.NOT_ALLOWED, why)
            continue
        try:
            read = [
                _listener(inputs, obj, raw, grants, owner_kind=listenersets.KIND)
                for raw in listenersets.raw_listeners(obj)
            ]
        except MALFORMED as exc:
            # A set that cannot be read costs itself, never its Gateway (another team's).
            entry.refusal = (Reason.INVALID, f"could not be read: {type(exc).__name__}: {exc}")
            continue
        for listener in read:
            listener.listener_set = entry.key
        entry.listeners = read
        state.listeners += read


def _settle_listener_sets(state: GatewayState) -> None:
    """GEP-1713: a ListenerSet whose parent is not accepted is `ParentNotAccepted`, and none of
    its listeners is served (the Gateway's Accepted reflects its own listeners alone)."""
    if state.served and any(x.served for x in state.own_listeners):
        return
    where = f"Gateway {state.namespace}/{state.name} is not accepted"
    for entry in state.listener_sets:
        if entry.refusal is None:
            entry.refusal = (Reason.PARENT_NOT_ACCEPTED, where)
    state.listeners = state.own_listeners


def _listener(
    inputs: Inputs,
    owner: Obj,
    raw: Mapping[str, Any],
    grants: Grants,
    owner_kind: str = "Gateway",
) -> ListenerState:
    """One listener of `owner` (a Gateway, or a ListenerSet of one), validated."""
    protocol = str(raw.get("protocol", ""))
    tls = raw.get("tls") or {}
    mode = (
        TlsMode.NONE if protocol not in ("HTTPS", "TLS") else TlsMode(tls.get("mode", "Terminate"))
    )
    allowed = raw.get("allowedRoutes") or {}
    listener = ListenerState(
        name=str(raw.get("name", "")),
        port=int(raw.get("port", 0)),
        protocol=protocol,
        hostname=str(raw.get("hostname") or "").lower(),
        tls_mode=mode,
        allowed_routes=allowed,
        supported_kinds=(),
        owner_namespace=namespace(owner),
    )
    if protocol not in ROUTE_KINDS:
        _refuse(listener, Reason.UNSUPPORTED_PROTOCOL, f"protocol {protocol!r} is not supported")
        return listener
    listener.supported_kinds = _kinds(listener, allowed)
    if protocol == "HTTPS" and mode is not TlsMode.TERMINATE:
        _refuse(
            listener,
            Reason.UNSUPPORTED_VALUE,
            "an HTTPS listener must terminate TLS (tls.mode Terminate)",
        )
    elif mode is TlsMode.TERMINATE:
        # HTTPS, and TLS in Terminate mode: the Gateway API's GatewayTLSConfig, "Terminate:
        # The TLS session between the downstream client and the Gateway is terminated at the
        # Gateway. This mode requires certificates to be specified".
        refs = tls.get("certificateRefs") or []
        _certificates(inputs, owner, owner_kind, listener, refs, grants)
    else:
        _stream_rules(listener)
    return listener


def _stream_rules(listener: ListenerState) -> None:
    """What a TCP or UDP listener must be to be served (an HTTP or TLS one has no such rule)."""
    # A TLS listener in Passthrough mode: "The TLS session is NOT terminated by the Gateway
    # ... The certificateRefs field is ignored in this mode" (GatewayTLSConfig), so none is read.
    # Spec 003 "Listeners": "A TCP or UDP listener cannot carry one [a hostname], since nothing
    # in the stream names a host; a listener that declares one is refused with UnsupportedValue."
    if listener.protocol in ("TCP", "UDP") and listener.hostname:
        message = (
            f"a {listener.protocol} listener cannot carry a hostname "
            f"({listener.hostname}): nothing in the stream names a host"
        )
        _refuse(listener, Reason.UNSUPPORTED_VALUE, message)


def _kinds(listener: ListenerState, allowed: Mapping[str, Any]) -> tuple[str, ...]:
    carried = ROUTE_KINDS[listener.protocol]
    listed = allowed.get("kinds")
    if not listed:
        return carried
    # A RouteGroupKind's group defaults to the Gateway API's; an explicit "" is the core group.
    kinds = [k.get("kind") for k in listed if _group(k) == GATEWAY_GROUP]
    unsupported = [
        k.get("kind") for k in listed if k.get("kind") not in carried or _group(k) != GATEWAY_GROUP
    ]
    if unsupported:
        listed_names = ", ".join(map(str, unsupported))
        message = f"route kinds {listed_names} are not supported on {listener.protocol}"
        listener.problems.append(
            Condition(ConditionType.RESOLVED_REFS, False, Reason.INVALID_ROUTE_KINDS, message)
        )
    return tuple(k for k in carried if k in kinds)


def _group(kind: Mapping[str, Any]) -> str:
    group = kind.get("group")
    return GATEWAY_GROUP if group is None else str(group)


def _certificates(
    inputs: Inputs,
    owner: Obj,
    owner_kind: str,
    listener: ListenerState,
    refs: list[Mapping[str, Any]],
    grants: Grants,
) -> None:
    if not refs:
        message = (
            "an HTTPS listener needs tls.certificateRefs"
            if listener.protocol == "HTTPS"
            else "a TLS listener in Terminate mode (the default) needs tls.certificateRefs"
        )
        _refuse(listener, Reason.UNSUPPORTED_VALUE, message)
        listener.problems.append(
            Condition(ConditionType.RESOLVED_REFS, False, Reason.INVALID_CERTIFICATE_REF, message)
        )
        return
    for ref in refs:
        problem = _certificate(inputs, owner, owner_kind, listener, ref, grants)
        if problem is not None:
            # Spec 003: "A reference that merely does not resolve yet is reported and the
            # listener still opens, so that creating the Secret later heals it".
            listener.problems.append(Condition(ConditionType.RESOLVED_REFS, False, *problem))


def _certificate(
    inputs: Inputs,
    owner: Obj,
    owner_kind: str,
    listener: ListenerState,
    ref: Mapping[str, Any],
    grants: Grants,
) -> tuple[Reason, str] | None:
    loaded = certificate_ref(inputs, owner, owner_kind, ref, grants)
    if isinstance(loaded, tuple):
        return loaded
    listener.certificates.append(loaded)
    return None


def _refuse(listener: ListenerState, reason: Reason, message: str) -> None:
    listener.served = False
    listener.problems.append(Condition(ConditionType.ACCEPTED, False, reason, message))


def _conflict(listener: ListenerState, reason: Reason, message: str) -> None:
    # The listener opens nothing, so it is not Accepted either; Conflicted says why, and the
    # Accepted condition repeats the conflict's reason (spec 003: a refused listener "says why").
    listener.served = False
    listener.problems.append(Condition(ConditionType.ACCEPTED, False, reason, message))
    listener.problems.append(Condition(ConditionType.CONFLICTED, True, reason, message))


def _resolve_conflicts(listeners: list[ListenerState]) -> None:
    """Within one Gateway: one protocol per port (UDP apart), one listener per port+hostname."""
    owners: dict[tuple[str, int], ListenerState] = {}
    hostnames: set[tuple[int, str, str]] = set()
    for listener in listeners:
        if not listener.served:
            continue
        space = "udp" if listener.protocol == "UDP" else "tcp"
        owner = owners.setdefault((space, listener.port), listener)
        if owner.protocol != listener.protocol:
            # GEP-1713: report nothing of a listener another resource owns beyond the clash.
            by = f" by listener {owner.name}" if owner.listener_set == listener.listener_set else ""
            message = f"port {listener.port} is already served as {owner.protocol}{by}"
            _conflict(listener, Reason.PROTOCOL_CONFLICT, message)
            continue
        key = (listener.port, space, listener.hostname)
        if key in hostnames:
            host = listener.hostname or "(any)"
            message = f"another listener on port {listener.port} already serves hostname {host}"
            _conflict(listener, Reason.HOSTNAME_CONFLICT, message)
        hostnames.add(key)


def _overlapping_tls(listeners: list[ListenerState]) -> None:
    """Mark served HTTPS listeners sharing a port whose hostnames overlap (no hostname overlaps
    every other): a client may reuse one connection for a host the other listener claims."""
    https = [x for x in listeners if x.served and x.protocol == "HTTPS"]
    for listener in https:
        others = [
            x
            for x in https
            if x is not listener
            and x.port == listener.port
            and hostnames_overlap(x.hostname, listener.hostname)
        ]
        if not others:
            continue
        names = ", ".join(f"{x.name} ({x.hostname or 'any host'})" for x in others)
        message = (
            f"hostname {listener.hostname or '(any)'} overlaps listener(s) {names} "
            f"on port {listener.port}"
        )
        listener.problems.append(
            Condition(
                ConditionType.OVERLAPPING_TLS_CONFIG, True, Reason.OVERLAPPING_HOSTNAMES, message
            )
        )
