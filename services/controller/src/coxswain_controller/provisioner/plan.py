"""Desired against live, for one object: in sync, or the body to write. Pure.

Only the fields the controller owns are compared, and a live object is in sync when it contains
them: the API server adds defaults (a pod template's `terminationMessagePath`, a Service's
`clusterIP` and node ports) and other controllers add their own annotations (a Deployment's
revision), none of which is a difference. A field the controller stopped setting must go, which
containment alone cannot see, so each write records what it owned in an annotation (a hash of
the desired object and the label, annotation and field names set): a desired object whose hash
is not the recorded one is written; one whose hash is, but whose fields someone changed, is
written back. A write starts from the live object and replaces only the owned fields, so
everything else (status, node ports, an HPA's replicas when the parameters set none) is kept.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Mapping
from decimal import Decimal, InvalidOperation
from typing import Any

from coxswain_controller.translate.provision.model import fingerprint

__all__ = [
    "RECORD",
    "contains",
    "created",
    "fingerprint",
    "foreign",
    "in_sync",
    "needs_recreate",
    "owned_fields",
    "updated",
]

RECORD = "coxswain-labs.dev/provisioned"  # the annotation holding what the last write owned

# Per kind, the top-level paths the controller owns (when its desired object sets them).
_OWNED: Mapping[str, tuple[tuple[str, ...], ...]] = {
    "Service": (
        ("spec", "type"),
        ("spec", "selector"),
        ("spec", "ports"),
        ("spec", "loadBalancerIP"),
        ("spec", "clusterIP"),
    ),
    "ServiceAccount": (("automountServiceAccountToken",),),
    "ConfigMap": (("data",),),
    "Deployment": (("spec", "replicas"), ("spec", "selector"), ("spec", "template")),
    "EndpointSlice": (("addressType",), ("endpoints",), ("ports",)),
}
# Fields the API server will not change on an existing object: a new value needs a new object.
_IMMUTABLE: Mapping[str, tuple[tuple[str, ...], ...]] = {
    "Service": (("spec", "clusterIP"),),
    "Deployment": (("spec", "selector"),),
    "EndpointSlice": (("addressType",),),
}
_NODE_PORT_TYPES = ("LoadBalancer", "NodePort")


def owned_fields(body: Mapping[str, Any]) -> list[tuple[str, ...]]:
    """The owned paths `body` sets."""
    return [p for p in _OWNED.get(str(body.get("kind")), ()) if _get(body, p) is not None]


def _record(body: Mapping[str, Any], digest: str | None) -> str:
    metadata = body.get("metadata") or {}
    return json.dumps(
        {
            "hash": digest or fingerprint(body),
            "labels": sorted(metadata.get("labels") or {}),
            "annotations": sorted(metadata.get("annotations") or {}),
            "fields": [".".join(p) for p in owned_fields(body)],
        },
        sort_keys=True,
        separators=(",", ":"),
    )


def _recorded(live: Mapping[str, Any]) -> dict[str, Any]:
    text = ((live.get("metadata") or {}).get("annotations") or {}).get(RECORD)
    try:
        found = json.loads(text) if isinstance(text, str) else {}
    except ValueError:
        return {}
    return found if isinstance(found, dict) else {}


def in_sync(desired: Mapping[str, Any], live: Mapping[str, Any], digest: str | None = None) -> bool:
    """Whether `live` already is what `desired` asks, in every field the controller owns
    (`digest`: `desired`'s fingerprint, when known)."""
    want, have = desired.get("metadata") or {}, live.get("metadata") or {}
    if _recorded(live).get("hash") != (digest or fingerprint(desired)):
        return False
    if not contains(have.get("labels") or {}, want.get("labels") or {}):
        return False
    if not contains(have.get("annotations") or {}, want.get("annotations") or {}):
        return False
    if not _owner_present(have, want):
        return False
    return all(contains(_get(live, p), _get(desired, p)) for p in owned_fields(desired))


def _owner_present(have: Mapping[str, Any], want: Mapping[str, Any]) -> bool:
    refs = have.get("ownerReferences") or []
    return all(any(contains(r, ref) for r in refs) for ref in want.get("ownerReferences") or [])


def needs_recreate(desired: Mapping[str, Any], live: Mapping[str, Any]) -> bool:
    """Whether an immutable field the controller sets differs (a requested cluster IP, the
    Deployment's selector): the object must be deleted and created again."""
    for path in _IMMUTABLE.get(str(desired.get("kind")), ()):
        want = _get(desired, path)
        if want is not None and not contains(_get(live, path), want):
            return True
    return False


def created(desired: Mapping[str, Any], digest: str | None = None) -> dict[str, Any]:
    """The body to create: `desired`, with the record of what it owns."""
    body = copy.deepcopy(dict(desired))
    metadata = body.setdefault("metadata", {})
    record = _record(desired, digest)
    metadata["annotations"] = {**(metadata.get("annotations") or {}), RECORD: record}
    return body


def updated(
    desired: Mapping[str, Any], live: Mapping[str, Any], digest: str | None = None
) -> dict[str, Any]:
    """The body to replace `live` with: live as it is, its owned fields as desired, what the
    last write owned and `desired` no longer sets removed (the live resourceVersion kept, so a
    concurrent change makes the write a 409)."""
    body = copy.deepcopy(dict(live))
    last = _recorded(live)
    want = desired.get("metadata") or {}
    metadata = body.setdefault("metadata", {})
    for part in ("labels", "annotations"):
        kept = {k: v for k, v in (metadata.get(part) or {}).items() if k not in last.get(part, [])}
        metadata[part] = {**kept, **(want.get(part) or {})}
    metadata["annotations"][RECORD] = _record(desired, digest)
    others = [r for r in metadata.get("ownerReferences") or [] if not r.get("controller")]
    metadata["ownerReferences"] = [*others, *copy.deepcopy(want.get("ownerReferences") or [])]
    for dotted in last.get("fields", []):
        path = tuple(str(dotted).split("."))
        if _get(desired, path) is None:
            _delete(body, path)
    for path in owned_fields(desired):
        _set(body, path, copy.deepcopy(_get(desired, path)))
    if desired.get("kind") == "Service":
        _keep_node_ports(body, live)
    return body


def _keep_node_ports(body: dict[str, Any], live: Mapping[str, Any]) -> None:
    """A Service keeps the node ports it was given (changing them would move the load
    balancer's backends), wherever its port and protocol are unchanged."""
    spec = body.get("spec") or {}
    if spec.get("type") not in _NODE_PORT_TYPES:
        return
    given = {
        (p.get("port"), p.get("protocol", "TCP")): p["nodePort"]
        for p in (live.get("spec") or {}).get("ports") or []
        if isinstance(p, Mapping) and p.get("nodePort")
    }
    for port in spec.get("ports") or []:
        node_port = given.get((port.get("port"), port.get("protocol", "TCP")))
        if node_port and "nodePort" not in port:
            port["nodePort"] = node_port


def foreign(live: Mapping[str, Any], desired: Mapping[str, Any], managed: Mapping[str, str]) -> str:
    """Why `live` is not this controller's to replace ("" when it is): it must carry the
    controller's labels (`managed`), and be owned by the desired owner or by no one else but an
    earlier Gateway of the same name (a Gateway deleted and created again)."""
    have = live.get("metadata") or {}
    labels = have.get("labels") or {}
    if any(labels.get(k) != v for k, v in managed.items()):
        return "exists and is not managed by this controller"
    (want,) = (desired.get("metadata") or {}).get("ownerReferences") or [{}]
    for ref in have.get("ownerReferences") or []:
        if ref.get("controller") and (ref.get("kind"), ref.get("name")) != (
            want.get("kind"),
            want.get("name"),
        ):
            return f"exists and is controlled by {ref.get('kind')} {ref.get('name')}"
    return ""


def contains(live: Any, want: Any) -> bool:
    """Whether `live` holds everything `want` does: maps may have more keys, lists must match
    element for element, and an empty map or list matches an absent one (the API server drops
    them). Quantities compare by value ("1000m" is "1")."""
    if isinstance(want, Mapping):
        if not isinstance(live, Mapping):
            return False
        return all(contains(live[k], v) if k in live else _empty(v) for k, v in want.items())
    if isinstance(want, list):
        return (
            isinstance(live, list)
            and len(live) == len(want)
            and all(contains(a, b) for a, b in zip(live, want, strict=True))
        )
    return _same_scalar(live, want)


def _empty(value: Any) -> bool:
    return value in ({}, [], "")


def _same_scalar(live: Any, want: Any) -> bool:
    if isinstance(live, bool) or isinstance(want, bool):
        return live is want
    if live == want and type(live) is type(want):
        return True
    if isinstance(live, str) or isinstance(want, str):
        a, b = _quantity(live), _quantity(want)
        return a is not None and a == b
    return bool(live == want)


_SUFFIXES = {
    "n": Decimal("1e-9"),
    "u": Decimal("1e-6"),
    "m": Decimal("1e-3"),
    "": Decimal(1),
    "k": Decimal("1e3"),
    "M": Decimal("1e6"),
    "G": Decimal("1e9"),
    "T": Decimal("1e12"),
    "P": Decimal("1e15"),
    "E": Decimal("1e18"),
    "Ki": Decimal(2**10),
    "Mi": Decimal(2**20),
    "Gi": Decimal(2**30),
    "Ti": Decimal(2**40),
    "Pi": Decimal(2**50),
    "Ei": Decimal(2**60),
}


_QUANTITY = re.compile(r"^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?([KMGTPE]i|[numkMGTPE])?$")


def _quantity(value: Any) -> Decimal | None:
    """A Kubernetes quantity's value (None when `value` is not one)."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return Decimal(str(value))
    match = _QUANTITY.match(value) if isinstance(value, str) else None
    if match is None:
        return None
    suffix = match.group(4) or ""
    try:
        return Decimal(value[: len(value) - len(suffix)]) * _SUFFIXES[suffix]
    except InvalidOperation:
        return None


def _get(obj: Any, path: tuple[str, ...]) -> Any:
    for part in path:
        if not isinstance(obj, Mapping):
            return None
        obj = obj.get(part)
    return obj


def _set(obj: dict[str, Any], path: tuple[str, ...], value: Any) -> None:
    for part in path[:-1]:
        obj = obj.setdefault(part, {})
    obj[path[-1]] = value


def _delete(obj: dict[str, Any], path: tuple[str, ...]) -> None:
    for part in path[:-1]:
        obj = obj.get(part) or {}
    if isinstance(obj, dict):
        obj.pop(path[-1], None)
