"""managedFields: who owns which fields, kept on every write, and server-side apply on top of it.

Every write records its field manager's ownership as the API server does. An update (create,
PUT, any non-apply PATCH) gives its manager the fields it added or changed, in an entry with
operation `Update`, and takes them from whoever owned them; a field it removes leaves every
manager's set. An apply (`application/apply-patch+yaml`) makes the applied configuration the
manager's whole `Apply` set: the object gets the configuration merged in (maps by key,
associative lists by their keys), and the fields the manager applied before but no longer does
are removed unless another manager also owns them. Applying a value other than the current one
to a field another manager owns is a conflict (409, one cause per field) unless `force=true`,
which moves the field to the applier; as the API server does for `kubectl` moving from
client-side to server-side apply, fields still as the last client-side apply left them are
taken without a conflict. Entries are per (manager, operation, subresource); one whose set
empties goes away; an entry's time moves when its own set changes.

Simplified, and documented in docs/testing.md: maps never own their own existence (no `.` on
a map), the set of lists that are associative (and their keys) is the emulator's table for
built-in kinds and the CRD schema for custom resources, and defaulted fields belong to nobody.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from coxswain_devkit.apiserver import errors
from coxswain_devkit.apiserver import fieldsets as fs

Obj = dict[str, Any]
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"
# Metadata only the server writes: never anybody's field.
_SERVER_METADATA = frozenset(
    {"name", "namespace", "uid", "resourceVersion", "generation", "creationTimestamp",
     "deletionTimestamp", "deletionGracePeriodSeconds", "managedFields", "selfLink"}
)  # fmt: skip


@dataclass(frozen=True, slots=True)
class Write:
    manager: str  # the field manager; "" records no entry (writes from outside any request)
    api_version: str  # the version the write was made at, as entries record it
    subresource: str  # "" or "status"
    now: str  # the entry time for a set that changes
    has_status: bool  # whether status is a subresource (then main writes do not own it)


def scoped(obj: Any, write: Write) -> Obj:
    """The part of an object a write's fields are counted in."""
    if not isinstance(obj, dict):
        return {}
    if write.subresource == "status":
        return {"status": obj["status"]} if obj.get("status") is not None else {}
    out = {k: v for k, v in obj.items() if k not in ("apiVersion", "kind")}
    if write.has_status:
        out.pop("status", None)
    meta = {k: v for k, v in (out.get("metadata") or {}).items() if k not in _SERVER_METADATA}
    if meta:
        out["metadata"] = meta
    else:
        out.pop("metadata", None)
    return out


@dataclass(slots=True)
class _Entry:
    raw: Obj  # the entry as stored, less its fields
    paths: set[fs.Path]
    changed: bool = False

    @property
    def ident(self) -> tuple[str, str, str]:
        return (
            str(self.raw.get("manager", "")),
            str(self.raw.get("operation", "")),
            str(self.raw.get("subresource", "")),
        )


def _entries(raw: Any) -> list[_Entry]:
    out = []
    for entry in raw if isinstance(raw, list) else []:
        if isinstance(entry, dict) and entry.get("manager"):
            fields = entry.get("fieldsV1") or {}
            rest = {k: v for k, v in entry.items() if k != "fieldsV1"}
            out.append(_Entry(rest, fs.from_fields_v1(fields)))
    return out


def _dump(entries: Iterable[_Entry], write: Write) -> list[Obj]:
    out = []
    for e in entries:
        if not e.paths:
            continue
        raw = dict(e.raw)
        if e.changed:
            raw.update(time=write.now, apiVersion=write.api_version)
        raw["fieldsType"] = "FieldsV1"
        raw["fieldsV1"] = fs.to_fields_v1(e.paths)
        out.append(_ordered(raw))
    return out


def _ordered(raw: Obj) -> Obj:
    order = ("manager", "operation", "apiVersion", "time", "fieldsType", "fieldsV1", "subresource")
    first = {k: raw[k] for k in order if raw.get(k)}
    return first | {k: v for k, v in raw.items() if k not in order}


def _mine(entries: list[_Entry], write: Write, operation: str) -> _Entry:
    ident = (write.manager, operation, write.subresource)
    for e in entries:
        if e.ident == ident:
            return e
    entry = _Entry({"manager": write.manager, "operation": operation}, set(), changed=True)
    if write.subresource:
        entry.raw["subresource"] = write.subresource
    entries.append(entry)
    return entry


def _same(a: Any, b: Any) -> bool:
    """Entries equal but for how their times are written (clients re-serialize them)."""

    def norm(raw: Any) -> list[Any]:
        items = raw if isinstance(raw, list) else []
        return [{k: v for k, v in e.items() if k != "time"} for e in items if isinstance(e, dict)]

    return norm(a) == norm(b)


def base_entries(current: Obj | None, sent: Obj) -> Any:
    """The entries a write starts from: the ones the client sent if it changed them (that is
    how managedFields are edited, or reset with `[{}]`), else the stored ones."""
    stored = ((current or {}).get("metadata") or {}).get("managedFields")
    given = (sent.get("metadata") or {}).get("managedFields")
    if isinstance(given, list) and given and not _same(given, stored):
        return given
    return stored


def update(entries_raw: Any, old: Obj | None, new: Obj, shape: fs.Shape, write: Write) -> list[Obj]:
    """The entries after an update from `old` (None for a create) to `new`."""
    entries = _entries(entries_raw)
    modified, removed = fs.changed(scoped(old, write), scoped(new, write), shape)
    mine = _mine(entries, write, "Update") if write.manager and modified else None
    for e in entries:
        kept = e.paths - removed - (modified if e is not mine else set())
        if e is mine:
            kept |= modified
            e.changed = e.changed or kept != e.paths
        e.paths = kept
    return _dump(entries, write)


# --- server-side apply -----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Conflict:
    manager: str  # who owns the field
    api_version: str  # at which version they wrote it
    subresource: str
    path: fs.Path

    def owner(self) -> str:
        text = f'conflict with "{self.manager}"'
        if self.subresource:
            text += f' with subresource "{self.subresource}"'
        return f"{text} using {self.api_version}" if self.api_version else text


def conflict_error(conflicts: list[Conflict]) -> errors.ApiError:
    """409 as the API server words it: Apply failed with N conflict(s): ..."""
    causes = [
        {"reason": "FieldManagerConflict", "message": c.owner(), "field": fs.describe(c.path)}
        for c in conflicts
    ]
    if len(conflicts) == 1:
        detail = f"{conflicts[0].owner()}: {fs.describe(conflicts[0].path)}"
    else:
        lines = []
        for owner in dict.fromkeys(c.owner() for c in conflicts):
            lines.append(owner.replace("conflict with", "conflicts with", 1) + ":")
            lines += [f"- {fs.describe(c.path)}" for c in conflicts if c.owner() == owner]
        detail = "\n".join(lines)
    plural = "conflict" if len(conflicts) == 1 else "conflicts"
    return errors.ApiError(
        409,
        "Conflict",
        f"Apply failed with {len(conflicts)} {plural}: {detail}",
        details=errors.StatusDetails(causes=causes),
    )


def _conflicts(
    current: Obj, config: Obj, others: list[_Entry], wanted: set[fs.Path]
) -> list[Conflict]:
    out = []
    for path in sorted(p for p in wanted if fs.is_leaf(p)):
        now = fs.value_at(current, path)
        if now is fs.MISSING or now == fs.value_at(config, path):
            continue
        for e in others:
            if path in e.paths:
                manager, _, sub = e.ident
                out.append(Conflict(manager, str(e.raw.get("apiVersion", "")), sub, path))
    return out


def apply(
    entries_raw: Any,
    current: Obj | None,
    config: Obj,
    shape: fs.Shape,
    write: Write,
    *,
    force: bool,
) -> tuple[Obj, list[Obj]]:
    """(the object after applying `config` for `write.manager`, its entries); a conflict
    raises 409 unless `force`, or unless every conflicting field is one `kubectl`'s client-side
    apply left as it last applied it (see `_upgradable`)."""
    entries = _entries(entries_raw)
    mine = _mine(entries, write, "Apply")
    others = [e for e in entries if e is not mine]
    wanted = fs.fieldset(scoped(config, write), shape)
    base = copy.deepcopy(current) if current else {}
    conflicts = _conflicts(scoped(base, write), scoped(config, write), others, wanted)
    upgradable = _upgradable(base, shape, write) if conflicts else set()
    if conflicts and not force and not all(c.path in upgradable for c in conflicts):
        raise conflict_error([c for c in conflicts if c.path not in upgradable])
    for e in others:
        taken = e.paths & {c.path for c in conflicts}
        e.paths -= taken  # its time stays: "does not update when ... another manager took it"
    _remove_dropped(base, mine.paths - wanted, others)
    merged = fs.merge(base, _without_server_fields(config, write), shape)
    mine.changed = mine.changed or mine.paths != wanted or merged != base
    mine.paths = wanted
    return merged, _dump(entries, write)


def _upgradable(current: Obj, shape: fs.Shape, write: Write) -> set[fs.Path]:
    """The API server's lastAppliedManager: when `kubectl` applies server-side an object it
    applied client-side before, a field still at the value of the
    kubectl.kubernetes.io/last-applied-configuration annotation is no conflict (the two applies
    are the same user); other managers (and `--field-manager` names) get no such pass."""
    annotations = (current.get("metadata") or {}).get("annotations") or {}
    text = annotations.get(LAST_APPLIED)
    if write.manager != "kubectl" or not text:
        return set()
    try:
        last = json.loads(text)
    except ValueError:
        return set()
    live, applied = scoped(current, write), scoped(last, write)
    return {
        p for p in fs.fieldset(applied, shape) if fs.value_at(live, p) == fs.value_at(applied, p)
    }


def _remove_dropped(obj: Obj, dropped: set[fs.Path], others: list[_Entry]) -> None:
    """Fields this manager applied before and no longer does, that nobody else owns."""
    owned = set().union(*(e.paths for e in others)) if others else set()
    for path in sorted(dropped, key=len):  # an element before its fields: it goes whole
        if path in owned or any(True for _ in fs.descendants(owned, path)):
            continue
        fs.remove(obj, path)
        fs.prune_empty(obj, path)


def _without_server_fields(config: Obj, write: Write) -> Obj:
    """What of an applied configuration is merged: on the main resource not status (when it is
    a subresource), on the status subresource only status; never server-written metadata."""
    out = copy.deepcopy(config)
    if write.subresource == "status":
        return {k: v for k, v in out.items() if k in ("apiVersion", "kind", "metadata", "status")}
    if write.has_status:
        out.pop("status", None)
    meta = out.get("metadata") or {}
    for key in ("uid", "generation", "creationTimestamp", "managedFields"):
        meta.pop(key, None)
    return out
