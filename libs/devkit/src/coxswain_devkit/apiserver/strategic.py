"""Strategic merge patch for the built-in kinds, as kubectl's client-side apply sends it.

The real server reads each list's `patchMergeKey` from the Go types; here a small table keyed by
field name stands in for them, covering the lists Coxswain's kinds and kubectl's three-way patches
touch (containers, ports, env, volumes, conditions, ...). A list without a merge key is replaced
whole, as `patchStrategy` "replace" (the default) does. The directives kubectl emits are honoured:
`$patch` (replace, delete), `$retainKeys`, `$setElementOrder/<list>` and
`$deleteFromPrimitiveList/<list>`.
"""

from __future__ import annotations

import copy
from typing import Any

# Field name -> the list's patchMergeKey (k8s.io/api, `patchMergeKey` struct tags).
_MERGE_KEYS = {
    "containers": "name",
    "initContainers": "name",
    "ephemeralContainers": "name",
    "env": "name",
    "volumes": "name",
    "volumeMounts": "mountPath",
    "volumeDevices": "devicePath",
    "conditions": "type",
    "ownerReferences": "uid",
    "imagePullSecrets": "name",
    "hostAliases": "ip",
    "topologySpreadConstraints": "topologyKey",
}
_CONTAINER_LISTS = frozenset({"containers", "initContainers", "ephemeralContainers"})
# Lists of scalars with patchStrategy "merge": a patch adds to them instead of replacing them.
_MERGED_SCALAR_LISTS = frozenset({"finalizers"})

_SET_ORDER = "$setElementOrder/"
_DELETE_FROM = "$deleteFromPrimitiveList/"


def merge_key(path: tuple[str, ...]) -> str | None:
    """The merge key of the list at `path` (field names from the object's root), if any."""
    field = path[-1]
    if field == "ports":
        if _CONTAINER_LISTS.intersection(path[:-1]):
            return "containerPort"
        # Service.spec.ports merges on `port`; other `ports` lists (EndpointSlice) are atomic.
        return "port" if path == ("spec", "ports") else None
    return _MERGE_KEYS.get(field)


def apply(original: dict[str, Any], patch: Any) -> dict[str, Any]:
    if not isinstance(patch, dict):
        return copy.deepcopy(original)
    return _merge_map(original, patch, ())


def _is_directive(key: str) -> bool:
    return key.startswith("$")


def _merge_map(
    original: dict[str, Any], patch: dict[str, Any], path: tuple[str, ...]
) -> dict[str, Any]:
    if patch.get("$patch") == "replace":
        return _merge_map({}, {k: v for k, v in patch.items() if k != "$patch"}, path)
    result = copy.deepcopy(original)
    for key, value in patch.items():
        if key.startswith(_DELETE_FROM):
            field = key[len(_DELETE_FROM) :]
            result[field] = [v for v in result.get(field) or [] if v not in value]
        elif _is_directive(key):
            continue
        elif value is None:
            result.pop(key, None)
        else:
            result[key] = _merge_value(result.get(key), value, (*path, key))
    for key, order in patch.items():
        if key.startswith(_SET_ORDER) and isinstance(result.get(key[len(_SET_ORDER) :]), list):
            field = key[len(_SET_ORDER) :]
            result[field] = _reorder(result[field], order, merge_key((*path, field)))
    if isinstance(patch.get("$retainKeys"), list):
        result = {k: v for k, v in result.items() if k in patch["$retainKeys"]}
    return result


def _merge_value(current: Any, value: Any, path: tuple[str, ...]) -> Any:
    if isinstance(value, dict):
        return _merge_map(current if isinstance(current, dict) else {}, value, path)
    if isinstance(value, list):
        return _merge_list(current if isinstance(current, list) else [], value, path)
    return copy.deepcopy(value)


def _merge_list(original: list[Any], patch: list[Any], path: tuple[str, ...]) -> list[Any]:
    key = merge_key(path)
    if key is None:
        if path[-1] in _MERGED_SCALAR_LISTS:
            return [*original, *(v for v in patch if v not in original)]
        return [_merge_value(None, item, path) for item in patch]
    if any(isinstance(item, dict) and item.get("$patch") == "replace" for item in patch):
        kept = [i for i in patch if not (isinstance(i, dict) and i.get("$patch") == "replace")]
        return [_merge_value(None, item, path) for item in kept]
    result = copy.deepcopy(original)
    for item in patch:
        if isinstance(item, dict):
            result = _merge_element(result, item, key, path)
    return result


def _merge_element(
    items: list[Any], item: dict[str, Any], key: str, path: tuple[str, ...]
) -> list[Any]:
    index = next(
        (i for i, e in enumerate(items) if isinstance(e, dict) and e.get(key) == item.get(key)),
        None,
    )
    if item.get("$patch") == "delete":
        return [e for i, e in enumerate(items) if i != index]
    if index is None:
        return [*items, _merge_map({}, item, path)]
    items[index] = _merge_map(items[index], item, path)
    return items


def _reorder(items: list[Any], order: list[Any], key: str | None) -> list[Any]:
    """`$setElementOrder`: listed elements first, in the given order; the rest keep theirs."""
    identity = [o.get(key) if key and isinstance(o, dict) else o for o in order]

    def ident(item: Any) -> Any:
        return item.get(key) if key and isinstance(item, dict) else item

    ranked = [i for i in items if ident(i) in identity]
    ranked.sort(key=lambda i: identity.index(ident(i)))
    return ranked + [i for i in items if ident(i) not in identity]
