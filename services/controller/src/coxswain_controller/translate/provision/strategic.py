"""Strategic merge of a podTemplate patch onto a pod template, as `kubectl apply` merges.

Spec 001: "The podTemplate escape hatch is merged onto the rendered Deployment with kubectl apply
strategic-merge semantics — containers merges by name, tolerations by (key, operator),
container-level env by name, and so on — so sidecar injection and env overlays behave the way
operators expect from native K8s tooling."

A pure function of two JSON values. Maps merge key by key (a `null` value deletes the key); a
list with a merge key merges element by element on that key (k8s.io/api's `patchMergeKey`
tags: containers, env, volumes and the rest below); any other list, and every scalar, is
replaced. Tolerations have no merge key in Kubernetes (kubectl replaces them whole); spec 001
merges them by (key, operator), so an overlay can add one without repeating the chart's.
The directives kubectl honours: `$patch: replace` on a map (the map is replaced) or as a list
element (the list is replaced by the other elements), `$patch: delete` on a map (the key is
removed) or a list element (that element is removed), `$retainKeys` and
`$deleteFromPrimitiveList/<field>`. `$setElementOrder` (only ordering, which kubectl emits for
its own three-way patches) and any other `$` key are dropped. A patch never changes its inputs.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

__all__ = ["merge", "merge_key"]

# Field name -> the fields an element is identified by (k8s.io/api `patchMergeKey`).
_MERGE_KEYS: Mapping[str, tuple[str, ...]] = {
    "containers": ("name",),
    "initContainers": ("name",),
    "ephemeralContainers": ("name",),
    "env": ("name",),
    "volumes": ("name",),
    "volumeMounts": ("mountPath",),
    "volumeDevices": ("devicePath",),
    "imagePullSecrets": ("name",),
    "hostAliases": ("ip",),
    "topologySpreadConstraints": ("topologyKey",),
    "resourceClaims": ("name",),
    "tolerations": ("key", "operator"),  # spec 001's rule, not kubectl's
}
_CONTAINERS = frozenset({"containers", "initContainers", "ephemeralContainers"})
_DELETE_FROM = "$deleteFromPrimitiveList/"
_PATCH, _RETAIN = "$patch", "$retainKeys"


def merge_key(path: tuple[str, ...]) -> tuple[str, ...] | None:
    """The fields identifying the elements of the list at `path` (field names from the root),
    or None for a list that is replaced whole."""
    field = path[-1] if path else ""
    if field == "ports" and _CONTAINERS.intersection(path[:-1]):
        return ("containerPort",)  # ContainerPort: patchMergeKey containerPort
    return _MERGE_KEYS.get(field)


def merge(original: Mapping[str, Any], patch: Mapping[str, Any]) -> dict[str, Any]:
    """`patch` strategic-merged onto `original` (a pod template, or any part of one)."""
    merged = _merge_map(original, patch, ())
    return merged if isinstance(merged, dict) else {}


def _merge_map(original: Any, patch: Mapping[str, Any], path: tuple[str, ...]) -> Any:
    directive = patch.get(_PATCH)
    if directive == "delete":
        return None
    base: dict[str, Any] = {}
    if directive != "replace" and isinstance(original, Mapping):
        base = {k: copy.deepcopy(v) for k, v in original.items()}
    for key, value in patch.items():
        # Removals apply to the original list, before the patch's own value of it (if any).
        target = key.removeprefix(_DELETE_FROM)
        if key != target and isinstance(base.get(target), list) and isinstance(value, list):
            base[target] = [v for v in base[target] if v not in value]
    for key, value in patch.items():
        if key.startswith("$"):
            continue
        if value is None:
            base.pop(key, None)
        else:
            merged = _merge_value(base.get(key), value, (*path, key))
            if merged is None:
                base.pop(key, None)  # `$patch: delete` on a nested map
            else:
                base[key] = merged
    retain = patch.get(_RETAIN)
    if isinstance(retain, list):
        base = {k: v for k, v in base.items() if k in retain}
    return base


def _merge_value(current: Any, value: Any, path: tuple[str, ...]) -> Any:
    if isinstance(value, Mapping):
        return _merge_map(current, value, path)
    if isinstance(value, list):
        return _merge_list(current if isinstance(current, list) else [], value, path)
    return copy.deepcopy(value)


def _merge_list(original: list[Any], patch: list[Any], path: tuple[str, ...]) -> list[Any]:
    key = merge_key(path)
    if key is None or not all(isinstance(item, Mapping) for item in patch):
        return [_clean(item) for item in patch]  # atomic: the patch's list replaces it
    if any(item.get(_PATCH) == "replace" for item in patch):
        return [_clean(item) for item in patch if item.get(_PATCH) != "replace"]
    result = [copy.deepcopy(item) for item in original]
    for item in patch:
        result = _merge_element(result, item, key, path)
    return result


# What an identifying field is when an element leaves it out (a toleration's operator).
_ABSENT = {"operator": "Equal"}


def _identity(item: Any, key: tuple[str, ...]) -> tuple[Any, ...] | None:
    if not isinstance(item, Mapping):
        return None
    return tuple(item.get(k, _ABSENT.get(k)) for k in key)


def _merge_element(
    items: list[Any], item: Mapping[str, Any], key: tuple[str, ...], path: tuple[str, ...]
) -> list[Any]:
    wanted = _identity(item, key)
    index = next((i for i, e in enumerate(items) if _identity(e, key) == wanted), None)
    if item.get(_PATCH) == "delete":
        return [e for i, e in enumerate(items) if i != index]
    if index is None:
        return [*items, _merge_map({}, item, path)]
    items[index] = _merge_map(items[index], item, path)
    return items


def _clean(value: Any) -> Any:
    """A patch value taken as it is, less any directives it carries."""
    if isinstance(value, Mapping):
        return {k: _clean(v) for k, v in value.items() if not str(k).startswith("$")}
    if isinstance(value, list):
        return [_clean(v) for v in value]
    return copy.deepcopy(value)
