"""Gateway and listener verdicts, and the Gateway's Warning Events, from the validated states.

Spec 003 "Status": "Gateway: Accepted is True when every listener is valid, True with reason
ListenersNotValid when only some are, and False when none is. Programmed follows Accepted".
Listeners: "one entry per declared listener, with Accepted, Programmed, ResolvedRefs and
Conflicted, supportedKinds ... and attachedRoutes, which counts only routes that are served."
OverlappingTLSConfig is added to a listener only while it holds (Gateway API: the condition is
never written False).

spec.tls (`gateway_tls`): a Gateway whose spec.tls.backend names a client certificate gets a
ResolvedRefs condition — False with the reference's reason when it is unusable (GatewayBackendTLS:
"the ResolvedRefs condition on the Gateway MUST be set to False with the Reason
InvalidClientCertificateRef"), else False with ListenersNotResolved while a listener's is, else
True. A Gateway with an AllowInsecureFallback port gets InsecureFrontendValidationMode True with
ConfigurationChanged, "removed as soon as FrontendValidationModeType is changed back".
"""

from __future__ import annotations

from coxswain_controller.translate.conditions import ConditionType, Reason
from coxswain_controller.translate.gateways.addresses import AddressOutcome
from coxswain_controller.translate.gateways.gateway_states import GatewayState, ListenerState
from coxswain_controller.translate.gateways.listenersets import ListenerSetState
from coxswain_controller.translate.inputs import generation, uid
from coxswain_controller.translate.result import (
    Condition,
    Event,
    GatewayVerdict,
    ListenerVerdict,
    ObjectRef,
)
from coxswain_routing import TlsMode

__all__ = ["attached", "gateway_events", "gateway_verdict", "listener_verdict", "programmable"]

# Spec 003 "Events": "InvalidCertificate for a TLS Secret that is missing or unusable", "Rejected
# for a translation problem".
_CERTIFICATE_REASONS = {
    Reason.INVALID_CERTIFICATE_REF,
    Reason.REF_NOT_PERMITTED,
    Reason.INVALID_CA_CERTIFICATE_REF,
    Reason.INVALID_CA_CERTIFICATE_KIND,
    Reason.INVALID_CLIENT_CERTIFICATE_REF,
}

_DEFAULTS = {
    ConditionType.ACCEPTED: Condition(
        ConditionType.ACCEPTED, True, Reason.ACCEPTED, "listener accepted"
    ),
    ConditionType.RESOLVED_REFS: Condition(
        ConditionType.RESOLVED_REFS, True, Reason.RESOLVED_REFS, "all references resolved"
    ),
    ConditionType.CONFLICTED: Condition(
        ConditionType.CONFLICTED, False, Reason.NO_CONFLICTS, "no conflicts"
    ),
}


def listener_verdict(
    listener: ListenerState, gateway_served: bool, *, refusal_programmed: bool = False
) -> ListenerVerdict:
    """One listener's status entry. `refusal_programmed`: a refused listener's Programmed
    carries its refusal's reason (a ListenerSet's entries: ListenerSetHostnameConflict has a
    conflicted entry `Programmed: False, HostnameConflict`), rather than Invalid."""
    conditions: dict[ConditionType, Condition] = dict(_DEFAULTS)
    for problem in listener.problems:  # the first problem of each condition type is reported
        if conditions.get(problem.type) is _DEFAULTS.get(problem.type):
            conditions[problem.type] = problem
    usable = listener.tls_mode is not TlsMode.TERMINATE or bool(listener.certificates)
    if programmable(listener) and gateway_served:
        programmed = Condition(
            ConditionType.PROGRAMMED, True, Reason.PROGRAMMED, "listener programmed"
        )
    else:
        why = "no usable certificate" if listener.served and not usable else "listener not served"
        accepted = conditions[ConditionType.ACCEPTED]
        reason = (
            accepted.reason
            if refusal_programmed and not accepted.status and not listener.served
            else Reason.INVALID
        )
        programmed = Condition(ConditionType.PROGRAMMED, False, reason, why)
    ordered: tuple[Condition, ...] = (
        conditions[ConditionType.ACCEPTED],
        programmed,
        conditions[ConditionType.RESOLVED_REFS],
        conditions[ConditionType.CONFLICTED],
    )
    # A negative-polarity condition, present only while True.
    overlapping = conditions.get(ConditionType.OVERLAPPING_TLS_CONFIG)
    if overlapping is not None:
        ordered += (overlapping,)
    return ListenerVerdict(listener.name, listener.supported_kinds, listener.attached, ordered)


def gateway_verdict(gateway: GatewayState, address: AddressOutcome | None = None) -> GatewayVerdict:
    """`address`: where the Gateway is reached (addresses.py); None reports no address. Its
    listeners are its own: GEP-1713, "`Gateway`'s `Accepted` and `Programmed` top-level
    conditions remain unchanged and reflect the status of the local configuration"."""
    address = address or AddressOutcome(None)
    own = gateway.own_listeners
    listeners = tuple(listener_verdict(x, gateway.served) for x in own)
    valid = sum(1 for x in own if x.served)
    if not gateway.cls.accepted:
        accepted = Condition(
            ConditionType.ACCEPTED,
            False,
            Reason.INVALID_PARAMETERS,
            f"GatewayClass {gateway.cls.name}: {gateway.cls.message}",
        )
    elif gateway.problems:
        accepted = gateway.problems[0]
    elif valid == len(own):
        accepted = Condition(ConditionType.ACCEPTED, True, Reason.ACCEPTED, "accepted")
    elif valid:
        accepted = Condition(
            ConditionType.ACCEPTED,
            True,
            Reason.LISTENERS_NOT_VALID,
            f"{len(own) - valid} listener(s) not valid",
        )
    else:
        accepted = Condition(
            ConditionType.ACCEPTED, False, Reason.LISTENERS_NOT_VALID, "no listener is valid"
        )
    if accepted.status and address.problem is not None:
        programmed = address.problem
    elif accepted.status:
        programmed = Condition(ConditionType.PROGRAMMED, True, Reason.PROGRAMMED, "programmed")
    else:
        programmed = Condition(
            ConditionType.PROGRAMMED, False, Reason.INVALID, "the Gateway is not served"
        )
    ref = ObjectRef("Gateway", gateway.namespace, gateway.name)
    return GatewayVerdict(
        ref,
        generation(gateway.obj),
        uid(gateway.obj),
        (accepted, programmed, *_tls_conditions(gateway, listeners)),
        listeners,
        gateway.scope,
        address.addresses,
        _attached_listener_sets(gateway),
    )


def attached(listener_set: ListenerSetState) -> bool:
    """Gateway API: "A ListenerSet is successfully attached to a Gateway when ... The
    ListenerSet is selected by the Gateway's AllowedListeners field ... has a valid ParentRef
    selecting the Gateway ... status has the condition "Accepted: true"" (some listener valid)."""
    return listener_set.refusal is None and any(programmable(x) for x in listener_set.listeners)


def programmable(listener: ListenerState) -> bool:
    """Served, with a certificate where it terminates TLS: what `Programmed: True` says."""
    return listener.served and (
        listener.tls_mode is not TlsMode.TERMINATE or bool(listener.certificates)
    )


def _attached_listener_sets(gateway: GatewayState) -> int | None:
    """status.attachedListenerSets: written while the Gateway admits ListenerSets (or some name
    it), withdrawn otherwise so a Gateway that never used them reads as it always did."""
    if not gateway.listener_sets and not gateway.admits_listener_sets:
        return None
    return sum(1 for x in gateway.listener_sets if attached(x))


def _tls_conditions(
    gateway: GatewayState, listeners: tuple[ListenerVerdict, ...]
) -> tuple[Condition, ...]:
    """The conditions spec.tls adds to the Gateway's own (none when it asks nothing of them)."""
    found: list[Condition] = []
    resolved = gateway.tls.backend_refs
    if resolved is not None and resolved.status:
        unresolved = [
            x.name
            for x in listeners
            for c in x.conditions
            if c.type is ConditionType.RESOLVED_REFS and not c.status
        ]
        if unresolved:
            message = f"listener(s) {', '.join(unresolved)} have unresolved references"
            resolved = Condition(
                ConditionType.RESOLVED_REFS, False, Reason.LISTENERS_NOT_RESOLVED, message
            )
    if resolved is not None:
        found.append(resolved)
    if gateway.tls.insecure_ports:
        ports = ", ".join(map(str, gateway.tls.insecure_ports))
        message = f"client certificates are not verified on port(s) {ports} (AllowInsecureFallback)"
        found.append(
            Condition(
                ConditionType.INSECURE_FRONTEND_VALIDATION_MODE,
                True,
                Reason.CONFIGURATION_CHANGED,
                message,
            )
        )
    return tuple(found)


def gateway_events(gateway: GatewayState) -> list[Event]:
    """Warning Events for what the pass could not do with this Gateway: its own refusal, its
    listeners' refusals and unresolved references, and fields it ignores."""
    rejected = [p.message for p in gateway.problems] + list(gateway.notes)
    certificates: list[str] = []
    backend = gateway.tls.backend_refs
    if backend is not None and not backend.status:
        certificates.append(backend.message)
    for listener in gateway.own_listeners:
        for problem in listener.problems:
            if problem.status and problem.type is not ConditionType.CONFLICTED:
                continue  # a True condition is a problem only for Conflicted
            line = f"listener {listener.name}: {problem.message}"
            if line in rejected or line in certificates:
                continue
            (certificates if problem.reason in _CERTIFICATE_REASONS else rejected).append(line)
    ref = ObjectRef("Gateway", gateway.namespace, gateway.name)
    events = []
    if rejected:
        events.append(Event(ref, uid(gateway.obj), "Warning", "Rejected", "; ".join(rejected)))
    if certificates:
        message = "; ".join(certificates)
        events.append(Event(ref, uid(gateway.obj), "Warning", "InvalidCertificate", message))
    return events
