"""Label and field selectors, parsed once per request and matched against each object.

The grammar is the API server's (`k8s.io/apimachinery/pkg/labels` and `.../fields`): a
comma-separated list of requirements, all of which must hold. Field selectors support only the
fields the real server indexes for the kinds Coxswain uses; any other field is a 400, as there.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from coxswain_devkit.apiserver import errors

Obj = dict[str, Any]

# Fields every kind can be selected by, and the extra ones some kinds add (group, plural).
_COMMON_FIELDS = ("metadata.name", "metadata.namespace")
# An Event's reference to the object it is about, every field of it selectable: `kubectl
# describe <kind> <name>` lists core Events by involvedObject.name, .namespace, .kind and .uid.
_REFERENCE = ("kind", "name", "namespace", "uid", "apiVersion", "resourceVersion", "fieldPath")
_KIND_FIELDS: Mapping[tuple[str, str], tuple[str, ...]] = {
    ("", "secrets"): ("type",),
    ("", "pods"): ("spec.nodeName", "status.phase"),
    ("", "events"): (
        *(f"involvedObject.{f}" for f in _REFERENCE),
        "reason",
        "reportingComponent",
        "source",
        "type",
    ),
    ("events.k8s.io", "events"): (
        *(f"regarding.{f}" for f in _REFERENCE),
        "reason",
        "reportingController",
        "type",
    ),
}
# Field labels that name another path in the object: a core Event's `source` is its component.
_FIELD_PATHS: Mapping[str, str] = {"source": "source.component"}

_SET_RE = re.compile(r"^\s*([^\s!=()]+)\s+(in|notin)\s*\(([^)]*)\)\s*$")
_OP_RE = re.compile(r"^\s*([^\s!=]+)\s*(==|=|!=)\s*([^\s,]*)\s*$")
_KEY_RE = re.compile(r"^\s*(!?)\s*([^\s!=()]+)\s*$")


@dataclass(frozen=True, slots=True)
class Requirement:
    key: str  # the label key or field path
    op: str  # one of "=", "!=", "in", "notin", "exists", "!"
    values: frozenset[str]  # the operand values; empty for exists and not-exists

    def matches(self, labels: Mapping[str, str]) -> bool:
        present = self.key in labels
        value = labels.get(self.key)
        if self.op in ("=", "in"):
            return present and value in self.values
        if self.op in ("!=", "notin"):
            # "!=" and "notin" also select objects that do not carry the label at all.
            return not present or value not in self.values
        if self.op == "exists":
            return present
        return not present


def _split(text: str) -> list[str]:
    """Split on commas outside parentheses: `a in (x,y),b` is two requirements."""
    parts, depth, start = [], 0, 0
    for i, char in enumerate(text):
        depth += {"(": 1, ")": -1}.get(char, 0)
        if char == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return [p for p in parts if p.strip()]


def _parse_one(text: str) -> Requirement:
    if m := _SET_RE.match(text):
        values = frozenset(v.strip() for v in m.group(3).split(",") if v.strip())
        return Requirement(m.group(1), m.group(2), values)
    if m := _OP_RE.match(text):
        op = "=" if m.group(2) == "==" else m.group(2)
        return Requirement(m.group(1), op, frozenset({m.group(3)}))
    if m := _KEY_RE.match(text):
        return Requirement(m.group(2), "!" if m.group(1) else "exists", frozenset())
    raise errors.bad_request(f"unable to parse requirement: {text!r}")


def parse_labels(text: str | None) -> tuple[Requirement, ...]:
    return tuple(_parse_one(part) for part in _split(text or ""))


def parse_fields(text: str | None, group: str, plural: str) -> tuple[Requirement, ...]:
    allowed = _COMMON_FIELDS + _KIND_FIELDS.get((group, plural), ())
    requirements = []
    for part in _split(text or ""):
        m = _OP_RE.match(part)
        if m is None:
            raise errors.bad_request(f"invalid field selector: {part!r}")
        if m.group(1) not in allowed:
            raise errors.bad_request(f"field label not supported: {m.group(1)}")
        op = "=" if m.group(2) == "==" else m.group(2)
        requirements.append(Requirement(m.group(1), op, frozenset({m.group(3)})))
    return tuple(requirements)


def _field(obj: Obj, label: str) -> str:
    value: Any = obj
    for part in _FIELD_PATHS.get(label, label).split("."):
        value = value.get(part) if isinstance(value, dict) else None
    return "" if value is None else str(value)


@dataclass(frozen=True, slots=True)
class Selector:
    labels: tuple[Requirement, ...]  # every label requirement must hold
    fields: tuple[Requirement, ...]  # every field requirement must hold

    def matches(self, obj: Obj) -> bool:
        meta = obj.get("metadata", {})
        labels = meta.get("labels") or {}
        if not all(r.matches(labels) for r in self.labels):
            return False
        return all(r.matches({r.key: _field(obj, r.key)}) for r in self.fields)


def parse(label_text: str | None, field_text: str | None, *, group: str, plural: str) -> Selector:
    return Selector(parse_labels(label_text), parse_fields(field_text, group, plural))
