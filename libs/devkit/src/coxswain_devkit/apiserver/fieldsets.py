"""Field sets: which fields of an object a set of paths names, in `managedFields` terms.

A path is a tuple of elements as `fieldsV1` writes them: `f:<name>` for a member of a map,
`k:<json>` for the element of an associative list with those key values, `v:<json>` for an
element of a set. The members of an object's set are its leaves (scalars, empty maps, atomic
lists and atomic structs, each owned whole) and the elements of its associative lists and
sets (owned for their existence); maps are not members themselves, their fields are. This is
structured-merge-diff's model, simplified: maps never own their own existence (no `.` for a
map), and which lists are associative, with which keys, comes from a `Shape` (built-in kinds:
the merge keys kubectl and the API server use; custom resources: their CRD schema's
`x-kubernetes-list-type` and `x-kubernetes-list-map-keys`).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterable, Iterator
from typing import Any, Protocol

from coxswain_devkit.apiserver import strategic

Path = tuple[str, ...]
_MISSING = object()
# Server-side apply's keys where they differ from strategic merge patch's single merge key, and
# the defaults filled in for a key the element leaves out ("protocol" is TCP when unset).
_MULTI_KEYS = {"ports": ("port", "protocol"), "topologySpreadConstraints": ("topologyKey",
               "whenUnsatisfiable")}  # fmt: skip
_KEY_DEFAULTS = {"protocol": "TCP"}
# Fields of the built-in kinds whose value is owned whole (+structType=atomic, +mapType=atomic).
_ATOMIC_BUILTIN = frozenset(
    {"selector", "nodeSelector", "labelSelector", "namespaceSelector", "fieldRef",
     "resourceFieldRef", "configMapKeyRef", "secretKeyRef", "targetRef", "involvedObject",
     "regarding", "related", "boundObjectRef"}
)  # fmt: skip
_SET_BUILTIN = frozenset({"finalizers"})


class Shape(Protocol):
    """How a kind's lists and maps merge and are owned, by field-name path from the root."""

    def list_kind(self, names: tuple[str, ...]) -> tuple[str, tuple[str, ...]]:
        """("atomic", ()), ("set", ()) or ("map", keys) for the list at `names`."""
        ...

    def atomic(self, names: tuple[str, ...]) -> bool:
        """Whether the map or struct at `names` is owned whole."""
        ...


class BuiltinShape:
    def list_kind(self, names: tuple[str, ...]) -> tuple[str, tuple[str, ...]]:
        if not names:
            return ("atomic", ())
        if names[-1] in _SET_BUILTIN:
            return ("set", ())
        key = strategic.merge_key(names)
        if key is None:
            return ("atomic", ())
        if names[-1] == "ports":
            return ("map", ("containerPort", "protocol") if key == "containerPort" else
                    _MULTI_KEYS["ports"])  # fmt: skip
        return ("map", _MULTI_KEYS.get(names[-1], (key,)))

    def atomic(self, names: tuple[str, ...]) -> bool:
        return bool(names) and names[-1] in _ATOMIC_BUILTIN


class SchemaShape:
    """A custom resource's shape, read from its structural schema (openAPIV3Schema)."""

    def __init__(self, schema: dict[str, Any]) -> None:
        self._schema = schema or {}

    def _at(self, names: tuple[str, ...]) -> dict[str, Any]:
        node = self._schema
        for name in names:
            if node.get("type") == "array":
                node = node.get("items") or {}
            properties = node.get("properties") or {}
            extra = node.get("additionalProperties")
            node = properties.get(name) or (extra if isinstance(extra, dict) else {})
        return node

    def list_kind(self, names: tuple[str, ...]) -> tuple[str, tuple[str, ...]]:
        node = self._at(names)
        kind = node.get("x-kubernetes-list-type", "atomic")
        keys = tuple(node.get("x-kubernetes-list-map-keys") or ())
        if kind == "map" and keys:
            return ("map", keys)
        return ("set", ()) if kind == "set" else ("atomic", ())

    def atomic(self, names: tuple[str, ...]) -> bool:
        node = self._at(names)
        return node.get("x-kubernetes-map-type") == "atomic"


def _names(path: Path) -> tuple[str, ...]:
    return tuple(e[2:] for e in path if e.startswith("f:"))


def _json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def item_key(item: dict[str, Any], keys: tuple[str, ...]) -> str:
    return "k:" + _json({k: item.get(k, _KEY_DEFAULTS.get(k)) for k in keys})


def fieldset(value: Any, shape: Shape, prefix: Path = ()) -> set[Path]:
    """Every member path of `value` (an object's JSON, or part of it at `prefix`)."""
    names = _names(prefix)
    if isinstance(value, dict) and value and not shape.atomic(names):
        out: set[Path] = set()
        for key, child in value.items():
            if child is not None:
                out |= fieldset(child, shape, (*prefix, f"f:{key}"))
        return out
    if isinstance(value, list) and value:
        kind, keys = shape.list_kind(names)
        if kind == "map" and all(isinstance(i, dict) for i in value):
            return _map_items(value, keys, shape, prefix)
        if kind == "set":
            return {(*prefix, f"v:{_json(item)}") for item in value}
    return {prefix} if prefix else set()


def _map_items(items: list[Any], keys: tuple[str, ...], shape: Shape, prefix: Path) -> set[Path]:
    out: set[Path] = set()
    for item in items:
        at = (*prefix, item_key(item, keys))
        out.add(at)
        for key, child in item.items():
            if child is not None:
                out |= fieldset(child, shape, (*at, f"f:{key}"))
    return out


def _matches(item: dict[str, Any], keys: dict[str, Any]) -> bool:
    return all(item.get(k, _KEY_DEFAULTS.get(k)) == v for k, v in keys.items())


def _find(items: list[Any], element: str) -> int | None:
    kind, text = element[:2], element[2:]
    wanted = json.loads(text)
    for index, item in enumerate(items):
        if kind == "v:" and item == wanted:
            return index
        if kind == "k:" and isinstance(item, dict) and _matches(item, wanted):
            return index
    return None


def value_at(obj: Any, path: Path) -> Any:
    """The value `path` names in `obj`, or `MISSING`."""
    node = obj
    for element in path:
        if element.startswith("f:") and isinstance(node, dict) and element[2:] in node:
            node = node[element[2:]]
        elif element[:2] in ("k:", "v:") and isinstance(node, list):
            index = _find(node, element)
            if index is None:
                return _MISSING
            node = node[index]
        else:
            return _MISSING
    return node


MISSING = _MISSING


def remove(obj: Any, path: Path) -> None:
    """Delete what `path` names from `obj` (in place), if it is there."""
    parent = value_at(obj, path[:-1])
    last = path[-1]
    if last.startswith("f:") and isinstance(parent, dict):
        parent.pop(last[2:], None)
    elif isinstance(parent, list):
        index = _find(parent, last)
        if index is not None:
            del parent[index]


def prune_empty(obj: Any, path: Path) -> None:
    """After a removal at `path`, drop the maps and lists it left empty on the way up."""
    for depth in range(len(path) - 1, 0, -1):
        parent = value_at(obj, path[:depth])
        if parent in ({}, []):
            remove(obj, path[:depth])
        else:
            return


def merge(base: Any, config: Any, shape: Shape, names: tuple[str, ...] = ()) -> Any:
    """`config` merged into `base` the way an apply merges: maps by key, associative lists by
    their keys, sets by value; scalars, atomic lists and atomic structs replaced."""
    if isinstance(config, dict) and isinstance(base, dict) and not shape.atomic(names):
        out = copy.deepcopy(base)
        for key, value in config.items():
            if value is None:
                out.pop(key, None)
            else:
                out[key] = merge(base.get(key), value, shape, (*names, key))
        return out
    if isinstance(config, list) and isinstance(base, list):
        kind, keys = shape.list_kind(names)
        if kind == "map":
            return _merge_items(base, config, keys, shape, names)
        if kind == "set":
            return copy.deepcopy(base) + [copy.deepcopy(v) for v in config if v not in base]
    return copy.deepcopy(config)


def _merge_items(
    base: list[Any], config: list[Any], keys: tuple[str, ...], shape: Shape, names: tuple[str, ...]
) -> list[Any]:
    out = copy.deepcopy(base)
    for item in config:
        if not isinstance(item, dict):
            out.append(copy.deepcopy(item))
            continue
        index = _find(out, item_key(item, keys))
        if index is None:
            out.append(copy.deepcopy(item))
        else:
            out[index] = merge(out[index], item, shape, names)
    return out


def changed(old: Any, new: Any, shape: Shape) -> tuple[set[Path], set[Path]]:
    """(the members `new` adds or changes against `old`, the members it no longer has)."""
    before, after = fieldset(old, shape), fieldset(new, shape)
    modified = {
        p
        for p in after
        if p not in before or (not _is_item(p) and value_at(old, p) != value_at(new, p))
    }
    return modified, before - after


def _is_item(path: Path) -> bool:
    return bool(path) and path[-1][:2] in ("k:", "v:")


def is_leaf(path: Path) -> bool:
    return not _is_item(path)


def descendants(paths: Iterable[Path], prefix: Path) -> Iterator[Path]:
    n = len(prefix)
    return (p for p in paths if len(p) > n and p[:n] == prefix)


# --- fieldsV1 --------------------------------------------------------------------------------


def to_fields_v1(paths: Iterable[Path]) -> dict[str, Any]:
    tree: dict[str, Any] = {}
    for path in sorted(paths):
        node = tree
        for element in path:
            node = node.setdefault(element, {})
        if _is_item(path):
            node.setdefault(".", {})
    return _tidy(tree)


def _tidy(node: dict[str, Any]) -> dict[str, Any]:
    """A member that has children keeps `.`; a member with none is `{}` (a leaf)."""
    out = {k: _tidy(v) for k, v in node.items()}
    if list(out) == ["."]:
        return {}
    return out


def from_fields_v1(tree: Any, prefix: Path = ()) -> set[Path]:
    if not isinstance(tree, dict):
        return set()
    if not tree:
        return {prefix} if prefix else set()
    out: set[Path] = {prefix} if "." in tree and prefix else set()
    for key, child in tree.items():
        if key != ".":
            out |= from_fields_v1(child, (*prefix, key))
    return out


def describe(path: Path) -> str:
    """A path as structured-merge-diff prints it: .spec.containers[name="app"].image."""
    out = []
    for element in path:
        kind, text = element[:2], element[2:]
        if kind == "f:":
            out.append(f".{text}")
        elif kind == "k:":
            pairs = ",".join(f"{k}={_json(v)}" for k, v in json.loads(text).items())
            out.append(f"[{pairs}]")
        else:
            out.append(f"[={text}]")
    return "".join(out)
