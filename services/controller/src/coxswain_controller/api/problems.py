"""`/api/v1/problems` and `/api/v1/events`: what is wrong, from the last pass.

A claimed object has a problem when one of its conditions is unhealthy: Accepted, Programmed
or ResolvedRefs False, or Conflicted / OverlappingTLSConfig / PartiallyInvalid True (negative
polarity). Each
problem carries the Warning Events translation raised about the same object (its uid).
`/api/v1/events` lists every Event of the last pass: what the leader records to the API.
"""

from __future__ import annotations

from typing import Any

from coxswain_controller.api.context import Parts
from coxswain_controller.translate.conditions import ConditionType
from coxswain_controller.translate.result import (
    ClassVerdict,
    Condition,
    Event,
    GatewayVerdict,
    ObjectRef,
    RouteVerdict,
)

__all__ = ["events", "problems"]

# Conditions whose True means trouble.
_NEGATIVE = frozenset(
    {
        ConditionType.CONFLICTED,
        ConditionType.OVERLAPPING_TLS_CONFIG,
        ConditionType.PARTIALLY_INVALID,  # a rule dropped while the rest is served
    }
)


def _unhealthy(c: Condition) -> bool:
    return c.status if c.type in _NEGATIVE else not c.status


def _event(e: Event) -> dict[str, Any]:
    return {
        "object": _ref(e.ref),
        "type": e.type,
        "reason": e.reason,
        "message": e.message,
    }


def _ref(ref: ObjectRef) -> dict[str, str]:
    return {"kind": ref.kind, "namespace": ref.namespace, "name": ref.name}


def events(parts: Parts) -> dict[str, Any]:
    result = parts.publisher.result if parts.publisher is not None else None
    return {"events": [_event(e) for e in (result.events if result else ())]}


def problems(parts: Parts) -> dict[str, Any]:
    publisher = parts.publisher
    if publisher is None or publisher.result is None:
        return {"problems": []}
    warnings: dict[str, list[dict[str, Any]]] = {}
    for e in publisher.result.events:
        if e.type == "Warning":
            warnings.setdefault(e.uid, []).append(_event(e))
    found = []
    for v in publisher.gated():
        bad: list[dict[str, Any]] = []
        if isinstance(v, (ClassVerdict, GatewayVerdict)):
            bad += [_condition(c, None) for c in v.conditions if _unhealthy(c)]
        if isinstance(v, GatewayVerdict):
            for lv in v.listeners:
                bad += [
                    _condition(c, f"listener {lv.name}") for c in lv.conditions if _unhealthy(c)
                ]
        if isinstance(v, RouteVerdict):
            for parent in v.parents:
                where = f"parent {parent.parent_ref.get('name', '')}"
                bad += [_condition(c, where) for c in parent.conditions if _unhealthy(c)]
        if bad:
            found.append(
                {
                    "object": _ref(v.ref),
                    "generation": v.generation,
                    "conditions": bad,
                    "events": warnings.get(v.uid, []),
                }
            )
    return {"problems": found}


def _condition(c: Condition, where: str | None) -> dict[str, Any]:
    return {
        "where": where,
        "type": c.type.value,
        "status": c.status,
        "reason": c.reason.value,
        "message": c.message,
    }
