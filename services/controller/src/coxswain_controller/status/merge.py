"""Merging a verdict onto a live object's status, keeping what is not ours.

Spec 003 "Status": "Conditions of other types and other controllers' entries are kept, and an
object whose status already says what the pass concluded is not written at all". A condition
keeps its lastTransitionTime while its status stays the same (Kubernetes API conventions). A
negative-polarity type of ours (OverlappingTLSConfig) is never written False: a verdict without
it withdraws it.
Pure: live status and verdict fragment in, the status to write (or None: nothing to do) out.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["merge_status"]

Status = dict[str, Any]

# Condition types this controller owns but writes only while they hold: when a verdict leaves
# one out, the live one is ours to withdraw, not a foreign type to keep. OverlappingTLSConfig,
# InsecureFrontendValidationMode and a route's PartiallyInvalid are negative polarity (written
# only while True); a Gateway's own ResolvedRefs is written only while its spec.tls.backend
# names a certificate (everywhere else this controller writes ResolvedRefs, it writes it on
# every pass).
WRITTEN_ONLY_WHILE_TRUE = frozenset(
    {"OverlappingTLSConfig", "InsecureFrontendValidationMode", "PartiallyInvalid", "ResolvedRefs"}
)


def _merge_conditions(
    live: Sequence[Mapping[str, Any]], ours: Sequence[Mapping[str, Any]], now: str
) -> list[dict[str, Any]]:
    previous = {c.get("type"): c for c in live}
    owned = {c["type"] for c in ours} | WRITTEN_ONLY_WHILE_TRUE
    merged = [dict(c) for c in live if c.get("type") not in owned]  # foreign types kept
    for condition in ours:
        old = previous.get(condition["type"])
        stamp = (
            old.get("lastTransitionTime")
            if old and old.get("status") == condition["status"]
            else None
        )
        merged.append({**condition, "lastTransitionTime": stamp or now})
    return merged


def _listeners(
    live: Sequence[Mapping[str, Any]], ours: Sequence[Mapping[str, Any]], now: str
) -> list[dict[str, Any]]:
    previous = {x.get("name"): x for x in live}
    return [
        {
            **x,
            "conditions": _merge_conditions(
                (previous.get(x["name"]) or {}).get("conditions") or [], x["conditions"], now
            ),
        }
        for x in ours
    ]


def _parents(
    live: Sequence[Mapping[str, Any]],
    ours: Sequence[Mapping[str, Any]],
    controller: str,
    now: str,
    ref: str = "parentRef",
) -> list[dict[str, Any]]:
    """A route's `parents` (or, with `ref="ancestorRef"`, a policy's `ancestors`)."""
    foreign = [dict(p) for p in live if p.get("controllerName") != controller]
    mine = {_ref_key(p.get(ref) or {}): p for p in live if p.get("controllerName") == controller}
    merged = []
    for entry in ours:
        old = mine.get(_ref_key(entry[ref])) or {}
        merged.append(
            {
                **entry,
                "conditions": _merge_conditions(
                    old.get("conditions") or [], entry["conditions"], now
                ),
            }
        )
    return foreign + merged


def _ref_key(ref: Mapping[str, Any]) -> tuple[Any, ...]:
    return tuple(ref.get(k) for k in ("group", "kind", "namespace", "name", "sectionName", "port"))


def _without_times(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: _without_times(v) for k, v in value.items() if k != "lastTransitionTime"}
    if isinstance(value, list):
        return [_without_times(v) for v in value]
    return value


def merge_status(
    live: Mapping[str, Any] | None, fragment: Mapping[str, Any], *, controller: str, now: str
) -> Status | None:
    """The status to write, or None when the live status already says it."""
    current: Status = copy.deepcopy(dict(live or {}))
    merged = copy.deepcopy(current)
    if "conditions" in fragment:
        merged["conditions"] = _merge_conditions(
            current.get("conditions") or [], fragment["conditions"], now
        )
    if "addresses" in fragment:
        # Ours alone (the published Service's): replaced whole, and dropped when there is none.
        if fragment["addresses"]:
            merged["addresses"] = list(fragment["addresses"])
        else:
            merged.pop("addresses", None)
    if "supportedFeatures" in fragment:
        # A GatewayClass's: ours alone, replaced whole (GEP-2162).
        merged["supportedFeatures"] = list(fragment["supportedFeatures"])
    if "loadBalancer" in fragment:
        # An Ingress's addresses: ours alone, replaced whole.
        merged["loadBalancer"] = fragment["loadBalancer"]
    if "listeners" in fragment:
        merged["listeners"] = _listeners(current.get("listeners") or [], fragment["listeners"], now)
        # A Gateway's count of attached ListenerSets: ours alone, dropped when not given.
        if "attachedListenerSets" in fragment:
            merged["attachedListenerSets"] = fragment["attachedListenerSets"]
        else:
            merged.pop("attachedListenerSets", None)
    if "parents" in fragment:
        merged["parents"] = _parents(
            current.get("parents") or [], fragment["parents"], controller, now
        )
    if "ancestors" in fragment:
        # A policy's, keyed by ancestorRef like a route's parents; none left drops the field.
        ancestors = _parents(
            current.get("ancestors") or [], fragment["ancestors"], controller, now, "ancestorRef"
        )
        if ancestors:
            merged["ancestors"] = ancestors
        else:
            merged.pop("ancestors", None)
    if _without_times(merged) == _without_times(current):
        return None
    return merged
