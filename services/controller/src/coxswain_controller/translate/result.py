"""What translation concludes: snapshots per scope, status verdicts, Events.

Verdicts carry only the fields this controller owns (its conditions, its parents entries); the
status writer merges them onto the live object, keeping everything else.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from coxswain_controller.translate.conditions import ConditionType, Reason
from coxswain_controller.translate.provision.model import GatewayProvision
from coxswain_controller.translate.refs import ObjectRef
from coxswain_controller.translate.scopes import GatewayScope, Identity, Scope
from coxswain_routing import Resource

__all__ = [
    "AncestorVerdict",
    "Condition",
    "Event",
    "GatewayVerdict",
    "IngressVerdict",
    "ListenerSetVerdict",
    "ListenerVerdict",
    "ObjectRef",
    "ParentVerdict",
    "PolicyVerdict",
    "RouteVerdict",
    "ClassVerdict",
    "TranslateResult",
    "Verdict",
]


@dataclass(frozen=True, slots=True)
class Condition:
    type: ConditionType
    status: bool
    reason: Reason
    message: str = ""
    # Set only where a condition reports an older generation than the object's: Programmed
    # "stays one behind the current generation" until bind + ack (spec 000).
    observed_generation: int | None = None

    def to_api(self, generation: int) -> dict[str, Any]:
        observed = generation if self.observed_generation is None else self.observed_generation
        return {
            "type": self.type.value,
            "status": "True" if self.status else "False",
            "reason": self.reason.value,
            "message": self.message,
            "observedGeneration": observed,
        }


@dataclass(frozen=True, slots=True)
class ClassVerdict:
    ref: ObjectRef
    generation: int
    uid: str
    conditions: tuple[Condition, ...]
    # status.supportedFeatures: the Gateway API feature names this controller passes, sorted.
    supported_features: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class ListenerVerdict:
    name: str
    supported_kinds: tuple[str, ...]
    attached_routes: int
    conditions: tuple[Condition, ...]


@dataclass(frozen=True, slots=True)
class GatewayVerdict:
    ref: ObjectRef
    generation: int
    uid: str
    conditions: tuple[Condition, ...]  # Programmed here is what translation concluded; the
    # status writer gates a True on bind + ack (spec 000)
    listeners: tuple[ListenerVerdict, ...]
    scope: Scope
    # status.addresses as (type, value): None leaves the field alone (no published Service).
    addresses: tuple[tuple[str, str], ...] | None = None
    # status.attachedListenerSets; None: the Gateway admits none and none names it (withdrawn).
    attached_listener_sets: int | None = None


@dataclass(frozen=True, slots=True)
class ListenerSetVerdict:
    """A ListenerSet's status (GEP-1713): its own conditions and one entry per listener."""

    ref: ObjectRef
    generation: int
    uid: str
    conditions: tuple[Condition, ...]  # Accepted, Programmed
    listeners: tuple[ListenerVerdict, ...]


@dataclass(frozen=True, slots=True)
class ParentVerdict:
    parent_ref: Mapping[str, Any]  # the parentRef as the route wrote it
    conditions: tuple[Condition, ...]


@dataclass(frozen=True, slots=True)
class RouteVerdict:
    ref: ObjectRef
    generation: int
    uid: str
    parents: tuple[ParentVerdict, ...]


@dataclass(frozen=True, slots=True)
class IngressVerdict:
    """An Ingress's status.loadBalancer: where clients reach it (the published Service's)."""

    ref: ObjectRef
    generation: int
    uid: str
    addresses: tuple[tuple[str, str], ...]  # (type, value), as Gateway addresses


@dataclass(frozen=True, slots=True)
class AncestorVerdict:
    """A policy's status for one ancestor (GEP-713: for BackendTLSPolicy, a Gateway)."""

    ancestor_ref: Mapping[str, Any]  # group, kind, namespace, name
    conditions: tuple[Condition, ...]


@dataclass(frozen=True, slots=True)
class PolicyVerdict:
    """A policy's status.ancestors entries of this controller (none: it serves no Gateway of
    ours, and entries an earlier pass wrote are withdrawn)."""

    ref: ObjectRef
    generation: int
    uid: str
    ancestors: tuple[AncestorVerdict, ...]


Verdict = (
    ClassVerdict
    | GatewayVerdict
    | ListenerSetVerdict
    | RouteVerdict
    | IngressVerdict
    | PolicyVerdict
)


@dataclass(frozen=True, slots=True)
class Event:
    ref: ObjectRef
    uid: str
    type: str  # "Normal" or "Warning"
    reason: str
    message: str


@dataclass(frozen=True)
class TranslateResult:
    snapshots: Mapping[Scope, tuple[Resource, ...]]
    verdicts: tuple[Verdict, ...] = ()
    events: tuple[Event, ...] = ()
    gateway_identities: Mapping[GatewayScope, Identity] = field(default_factory=dict)
    # (d) "desired provisioned objects" (design.md): a GatewayProvision (provision/model.py)
    # per Gateway provisioning applies to, for the provisioner to make so.
    provision: tuple[GatewayProvision, ...] = ()
