"""ListenerSet verdicts and Events, from the parent Gateway's validated state.

GEP-1713 "ListenerSet Conditions": "The `Accepted` condition MUST be set on every `ListenerSet`
... Valid reasons for `Accepted` being `False` are: `NotAllowed` - the `parentRef` doesn't allow
attachment; `ParentNotAccepted` - the `parentRef` isn't accepted; `ListenersNotValid` - one or
more listeners in the set are invalid". "The `Programmed` condition MUST be set on every
`ListenerSet` and have a similar meaning to the Gateway `Programmed` condition but only reflect
the listeners in this `ListenerSet`", and "`ListenerSets` MUST NOT have their parent
`Gateway`'s' listeners in the associated `status.listeners`".

So, as for a Gateway (`gateway_status`): Accepted True when every listener is valid, True with
ListenersNotValid when only some are, False with ListenersNotValid when none is; Programmed
follows, False with ParentNotProgrammed while the parent's is. A listener is valid when it can
be programmed: served, and holding a certificate where it terminates TLS (ListenerSetReferenceGrant:
a set whose only listener's certificate is not permitted is `Accepted: False,
ListenersNotValid`). A conflicted or refused entry's Programmed carries the refusal's reason, as
ListenerSetHostnameConflict expects. A ListenerSet not attached (NotAllowed, ParentNotAccepted)
lists no listener entries: none of them is the Gateway's.
"""

from __future__ import annotations

from coxswain_controller.translate.conditions import ConditionType, Reason
from coxswain_controller.translate.gateways.gateway_states import GatewayState
from coxswain_controller.translate.gateways.gateway_status import (
    listener_verdict,
    programmable,
)
from coxswain_controller.translate.gateways.listenersets import KIND, ListenerSetState
from coxswain_controller.translate.inputs import generation, uid
from coxswain_controller.translate.result import (
    Condition,
    Event,
    GatewayVerdict,
    ListenerSetVerdict,
    ObjectRef,
)

__all__ = ["listener_set_events", "listener_set_verdicts"]

_CERTIFICATE_REASONS = {Reason.INVALID_CERTIFICATE_REF, Reason.REF_NOT_PERMITTED}


def listener_set_verdicts(
    gateway: GatewayState, parent: GatewayVerdict
) -> list[ListenerSetVerdict]:
    """Every ListenerSet naming `gateway`, in merge precedence; `parent` is the Gateway's
    verdict (its Programmed as translation concluded it)."""
    programmed = next(c for c in parent.conditions if c.type is ConditionType.PROGRAMMED)
    return [_verdict(gateway, entry, programmed.status) for entry in gateway.listener_sets]


def _verdict(
    gateway: GatewayState, entry: ListenerSetState, parent_programmed: bool
) -> ListenerSetVerdict:
    ref = ObjectRef(KIND, entry.namespace, entry.name)
    if entry.refusal is not None:
        reason, message = entry.refusal
        conditions = (
            Condition(ConditionType.ACCEPTED, False, reason, message),
            Condition(ConditionType.PROGRAMMED, False, reason, message),
        )
        return ListenerSetVerdict(ref, generation(entry.obj), uid(entry.obj), conditions, ())
    listeners = tuple(
        listener_verdict(x, gateway.served, refusal_programmed=True) for x in entry.listeners
    )
    valid = sum(1 for x in entry.listeners if programmable(x))
    accepted = _accepted(valid, len(entry.listeners))
    if not accepted.status:
        programmed = Condition(ConditionType.PROGRAMMED, False, accepted.reason, accepted.message)
    elif not parent_programmed:
        where = f"Gateway {gateway.namespace}/{gateway.name} is not programmed"
        programmed = Condition(ConditionType.PROGRAMMED, False, Reason.PARENT_NOT_PROGRAMMED, where)
    else:
        programmed = Condition(ConditionType.PROGRAMMED, True, Reason.PROGRAMMED, "programmed")
    return ListenerSetVerdict(
        ref, generation(entry.obj), uid(entry.obj), (accepted, programmed), listeners
    )


def _accepted(valid: int, total: int) -> Condition:
    if total and valid == total:
        return Condition(ConditionType.ACCEPTED, True, Reason.ACCEPTED, "accepted")
    if valid:
        message = f"{total - valid} listener(s) not valid"
        return Condition(ConditionType.ACCEPTED, True, Reason.LISTENERS_NOT_VALID, message)
    return Condition(
        ConditionType.ACCEPTED, False, Reason.LISTENERS_NOT_VALID, "no listener is valid"
    )


def listener_set_events(gateway: GatewayState) -> list[Event]:
    """Warning Events on each ListenerSet naming `gateway`: why it is not attached, its
    refused or conflicted listeners (`Rejected`), its certificates (`InvalidCertificate`)."""
    return [e for entry in gateway.listener_sets for e in _events(entry)]


def _events(entry: ListenerSetState) -> list[Event]:
    rejected = [entry.refusal[1]] if entry.refusal is not None else []
    certificates: list[str] = []
    for listener in entry.listeners:
        for problem in listener.problems:
            if problem.status and problem.type is not ConditionType.CONFLICTED:
                continue  # a True condition is a problem only for Conflicted
            line = f"listener {listener.name}: {problem.message}"
            if line in rejected or line in certificates:
                continue
            (certificates if problem.reason in _CERTIFICATE_REASONS else rejected).append(line)
    ref, obj_uid = ObjectRef(KIND, entry.namespace, entry.name), uid(entry.obj)
    events = []
    if rejected:
        events.append(Event(ref, obj_uid, "Warning", "Rejected", "; ".join(rejected)))
    if certificates:
        message = "; ".join(certificates)
        events.append(Event(ref, obj_uid, "Warning", "InvalidCertificate", message))
    return events
