"""ListenerSets (GEP-1713): which attach to which Gateway, in which order, and why not.

Where it sits: `gateway_states` reads the ListenerSets naming each claimed Gateway, in the
precedence the API fixes for merging them ("1. "parent" Gateway 2. ListenerSet ordered by
creation time (oldest first) 3. ListenerSet ordered alphabetically by "{namespace}/{name}""),
asks `admits` whether the Gateway's `spec.allowedListeners` lets each one in, and merges the
listeners of those it admits after its own, so that one conflict pass over the merged list keeps
every earlier listener and refuses a later one (`_resolve_conflicts`). The parent's own listeners
always come first, so no ListenerSet can take a port or a hostname from them.

GatewaySpec.allowedListeners: "The default value is to allow no ListenerSets"; its namespaces
`from` is "Same: Only ListenerSets in the same namespace ... Selector: ListenerSets in
namespaces selected by the selector ... All ... None: Only listeners defined in the Gateway's
spec are allowed". A ListenerSet a Gateway does not admit is `Accepted: False, NotAllowed`; one
whose parent is not accepted is `Accepted: False, ParentNotAccepted` and its listeners are not
served (`listenerset_status` writes both). A ListenerSet naming no Gateway of ours is another
controller's business and gets no status at all.

This module reads objects only; it builds no listener (that is `gateway_states`' job, so that a
ListenerSet's listeners are validated exactly as a Gateway's are).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from coxswain_controller.translate.conditions import Reason
from coxswain_controller.translate.gateways.listener_state import ListenerState
from coxswain_controller.translate.guard import guarded
from coxswain_controller.translate.inputs import Inputs, Obj, created, name, namespace, spec
from coxswain_controller.translate.result import Event

__all__ = [
    "KIND",
    "ListenerSetState",
    "admits",
    "admits_any",
    "by_parent",
    "label_selector_matches",
    "parent_key",
]

KIND = "ListenerSet"
GATEWAY_GROUP = "gateway.networking.k8s.io"

Key = tuple[str, str]  # (namespace, name)


@dataclass(slots=True, eq=False)
class ListenerSetState:
    """One ListenerSet naming a Gateway of ours, and what became of it."""

    obj: Obj
    # Its listeners, validated as a Gateway's are (listener_set set to this one's key); empty
    # when the Gateway does not admit it.
    listeners: list[ListenerState] = field(default_factory=list)
    # Why it is not attached (NotAllowed, ParentNotAccepted) and the message; None: attached.
    refusal: tuple[Reason, str] | None = None

    @property
    def namespace(self) -> str:
        return namespace(self.obj)

    @property
    def name(self) -> str:
        return name(self.obj)

    @property
    def key(self) -> Key:
        return (self.namespace, self.name)


def parent_key(obj: Obj) -> Key | None:
    """The Gateway a ListenerSet's spec.parentRef names (ParentGatewayReference: group
    defaults to the Gateway API's, kind to Gateway, namespace to the ListenerSet's own)."""
    ref = spec(obj).get("parentRef") or {}
    if not isinstance(ref, Mapping):
        raise TypeError("spec.parentRef is not an object")
    if (ref.get("group") or GATEWAY_GROUP) != GATEWAY_GROUP or (
        ref.get("kind") or "Gateway"
    ) != "Gateway":
        return None
    return (str(ref.get("namespace") or namespace(obj)), str(ref.get("name", "")))


def by_parent(inputs: Inputs, malformed: list[Event]) -> dict[Key, list[Obj]]:
    """Every ListenerSet by the Gateway it names, each Gateway's in merge precedence (oldest
    first, then by namespace/name); one that cannot be read gets a Warning Event instead."""
    found: dict[Key, list[Obj]] = {}
    for obj, key in guarded(KIND, inputs.all(KIND), _read, malformed):
        if key is not None:
            found.setdefault(key, []).append(obj)
    for sets in found.values():
        sets.sort(key=lambda o: (created(o), namespace(o), name(o)))
    return found


def _read(obj: Obj) -> Key | None:
    listeners = spec(obj).get("listeners") or []
    if not isinstance(listeners, list) or not all(isinstance(x, Mapping) for x in listeners):
        raise TypeError("spec.listeners is not a list of objects")
    return parent_key(obj)


def _allowed(gateway: Obj) -> Mapping[str, Any]:
    allowed = spec(gateway).get("allowedListeners") or {}
    if not isinstance(allowed, Mapping):
        raise TypeError("spec.allowedListeners is not an object")
    namespaces = allowed.get("namespaces") or {}
    if not isinstance(namespaces, Mapping):
        raise TypeError("spec.allowedListeners.namespaces is not an object")
    return namespaces


def admits_any(gateway: Obj) -> bool:
    """Whether `gateway`'s spec.allowedListeners admits ListenerSets from anywhere at all."""
    return (_allowed(gateway).get("from") or "None") != "None"


def admits(gateway: Obj, listener_set: Obj, inputs: Inputs) -> str | None:
    """None when `gateway`'s spec.allowedListeners admits `listener_set`; else why not."""
    allowed = _allowed(gateway)
    source = allowed.get("from") or "None"
    theirs = namespace(listener_set)
    where = f"Gateway {namespace(gateway)}/{name(gateway)}"
    if source == "All":
        return None
    if source == "Same":
        if theirs == namespace(gateway):
            return None
        return f"{where} admits ListenerSets from its own namespace only"
    if source == "Selector":
        ns_obj = inputs.get("Namespace", "", theirs)
        labels = ((ns_obj or {}).get("metadata") or {}).get("labels") or {}
        if label_selector_matches(allowed.get("selector") or {}, labels):
            return None
        return f"{where} admits no ListenerSet from namespace {theirs} (allowedListeners selector)"
    return f"{where} admits no ListenerSets (spec.allowedListeners)"


def label_selector_matches(selector: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    """metav1.LabelSelector: every matchLabels pair and every matchExpression must hold (an
    empty selector selects every namespace); one the API would refuse selects none."""
    if any(labels.get(k) != v for k, v in (selector.get("matchLabels") or {}).items()):
        return False
    return all(_holds(expr, labels) for expr in selector.get("matchExpressions") or [])


def _holds(expr: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    # LabelSelectorRequirement: "If the operator is In or NotIn, the values array must be
    # non-empty. If the operator is Exists or DoesNotExist, the values array must be empty."
    key, op, values = str(expr.get("key", "")), expr.get("operator"), expr.get("values") or []
    present = key in labels
    if op in ("In", "NotIn") and values:
        return (present and labels[key] in values) == (op == "In")
    if op in ("Exists", "DoesNotExist") and not values:
        return present == (op == "Exists")
    return False


def raw_listeners(obj: Obj) -> Iterable[Mapping[str, Any]]:
    return spec(obj).get("listeners") or []
