"""The write path: create, update, patch and delete, with the API server's rules.

Handlers parse HTTP and call here; the manifest loader, the garbage collector and the token
endpoints call here too, so every write follows the same rules: uid and creationTimestamp on
create, a fresh resourceVersion on every stored change, `generation` moved by desired-state
changes only, the status subresource split (status writes touch only status; main writes never
touch it), optimistic concurrency on resourceVersion, finalizers holding a deletion open with
`deletionTimestamp`, and no write at all when an update changes nothing (as the real server
skips no-op updates, which keeps resourceVersions and watches quiet).
"""

from __future__ import annotations

import copy
import secrets
import string
import uuid
from collections.abc import Callable
from typing import Any

from coxswain_devkit.apiserver import errors, fieldsets, managed, options, patch, validation
from coxswain_devkit.apiserver.defaults import Defaulter
from coxswain_devkit.apiserver.listing import present
from coxswain_devkit.apiserver.meta import (
    Clock,
    desired_state,
    label_problems,
    name_problems,
    timestamp,
    without_resource_version,
)
from coxswain_devkit.apiserver.registry import Kind, Registry, crd_kinds
from coxswain_devkit.apiserver.selection import Selector
from coxswain_devkit.apiserver.store import Key, Obj, Store

CRDS = ("apiextensions.k8s.io", "customresourcedefinitions")
NAMESPACES = ("", "namespaces")
INITIAL_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")
# Metadata only the server sets: a write cannot change these.
_SERVER_OWNED = (
    "uid",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "generation",
)


class Machinery:
    def __init__(self, store: Store, registry: Registry, *, clock: Clock) -> None:
        self.store = store
        self.registry = registry
        self.clock = clock
        self._defaults = Defaulter(registry)
        # Called after changes the garbage collector must look at (deletions, owner references).
        self.on_change: list[Callable[[], None]] = []

    def bootstrap(self) -> None:
        namespaces = self.registry.preferred(*NAMESPACES)
        assert namespaces is not None
        for name in INITIAL_NAMESPACES:
            if self.store.get(Key("", "namespaces", "", name)) is None:
                self.create(namespaces, "", {"metadata": {"name": name}})

    def key(self, kind: Kind, namespace: str, name: str) -> Key:
        return Key(kind.group, kind.plural, namespace if kind.namespaced else "", name)

    def current(self, kind: Kind, namespace: str, name: str) -> Obj:
        obj = self.store.get(self.key(kind, namespace, name))
        if obj is None:
            raise errors.not_found(kind.plural, kind.group, name)
        return obj

    def get(self, kind: Kind, namespace: str, name: str) -> Obj:
        return present(kind, self.current(kind, namespace, name))

    def create(
        self,
        kind: Kind,
        namespace: str,
        body: Any,
        *,
        keep_status: bool = False,
        entries: list[Obj] | None = None,
    ) -> Obj:
        obj = _checked_body(kind, body)
        meta = obj["metadata"]
        if not meta.get("name") and meta.get("generateName"):
            suffix = "".join(
                secrets.choice(string.ascii_lowercase + string.digits) for _ in range(5)
            )
            meta["name"] = f"{meta['generateName']}{suffix}"
        _place(kind, meta, namespace)
        name = str(meta.get("name", ""))
        segment = kind.group == "rbac.authorization.k8s.io"  # e.g. ClusterRole system:discovery
        problems = name_problems(
            name, label=kind.resource == NAMESPACES, segment=segment
        ) + label_problems(meta.get("labels"))
        if problems:
            raise errors.invalid(kind.kind, kind.group, name, problems)
        if kind.namespaced:
            self._check_namespace(kind, namespace, name)
        key = self.key(kind, namespace, name)
        if self.store.get(key) is not None:
            raise errors.already_exists(kind.plural, kind.group, name)
        for field in (*_SERVER_OWNED, "resourceVersion"):
            meta.pop(field, None)
        meta.update(uid=str(uuid.uuid4()), creationTimestamp=timestamp(self.clock), generation=1)
        if kind.status and not keep_status:
            obj.pop("status", None)
        self._defaults.on_create(kind, obj)
        self._validate(kind, obj)
        if entries is None:
            entries = managed.update(
                managed.base_entries(None, obj), None, obj, self.shape(kind), self._write(kind, "")
            )
        _set_entries(obj, entries)
        return self._store(kind, key, obj)

    def update(
        self, kind: Kind, namespace: str, name: str, body: Any, *, subresource: str = ""
    ) -> Obj:
        current = self.current(kind, namespace, name)
        new = _checked_body(kind, body)
        if new["metadata"].get("name", name) != name:
            raise errors.bad_request(
                f"the name of the object ({new['metadata']['name']}) does not match the name on "
                f"the URL ({name})"
            )
        return self._commit(kind, current, new, subresource)

    def patch(
        self,
        kind: Kind,
        namespace: str,
        name: str,
        body: Any,
        *,
        content_type: str,
        subresource: str = "",
    ) -> Obj:
        if content_type.split(";")[0].strip() == patch.APPLY:
            return self.apply(kind, namespace, name, body, subresource=subresource)
        current = self.current(kind, namespace, name)
        patched = patch.apply(content_type, present(kind, current), body, builtin=kind.builtin)
        new = _checked_body(kind, patched)
        new["metadata"]["name"] = name
        return self._commit(kind, current, new, subresource)

    def apply(
        self, kind: Kind, namespace: str, name: str, body: Any, *, subresource: str = ""
    ) -> Obj:
        """Server-side apply: create or merge `body` as the request's field manager's (see
        `managed`); 409 on a conflict with another manager's field unless force=true."""
        opts = options.current()
        if not opts.manager_given:
            raise errors.bad_request("PATCH, fieldManager is required for apply requests")
        config = _applied_config(kind, body, name)
        current = self.store.get(self.key(kind, namespace, name))
        if current is None and subresource:
            raise errors.not_found(kind.plural, kind.group, name)
        old = present(kind, current) if current is not None else None
        merged, entries = managed.apply(
            managed.base_entries(current, {}),
            old,
            config,
            self.shape(kind),
            self._write(kind, subresource),
            force=opts.force,
        )
        if current is None:
            return self.create(kind, namespace, merged, entries=entries)
        merged["metadata"]["name"] = name
        return self._commit(kind, current, merged, subresource, entries=entries)

    def shape(self, kind: Kind) -> fieldsets.Shape:
        """How `kind`'s lists merge and are owned: the built-in table, or the CRD schema."""
        if kind.builtin:
            return fieldsets.BuiltinShape()
        return fieldsets.SchemaShape(self._crd_schema(kind))

    def _crd_schema(self, kind: Kind) -> dict[str, Any]:
        crd = self.store.get(Key(*CRDS, "", self.registry.owner_of(kind.group, kind.plural) or ""))
        for version in ((crd or {}).get("spec") or {}).get("versions") or []:
            if version.get("name") == kind.version:
                return dict((version.get("schema") or {}).get("openAPIV3Schema") or {})
        return {}

    def _validate(self, kind: Kind, obj: Obj) -> None:
        """fieldValidation for custom resources (see `validation`); built-in kinds pass."""
        opts = options.current()
        if kind.builtin or not opts.validation:
            return
        schema = self._crd_schema(kind)
        opts.warnings.extend(
            validation.check(obj, schema, opts.validation, kind.kind, kind.version)
        )

    def _write(self, kind: Kind, subresource: str) -> managed.Write:
        return managed.Write(
            manager=options.current().manager,
            api_version=kind.api_version,
            subresource=subresource,
            now=timestamp(self.clock),
            has_status=kind.status,
        )

    def delete(self, kind: Kind, namespace: str, name: str, options: Any = None) -> Obj:
        current = self.current(kind, namespace, name)
        options = options if isinstance(options, dict) else {}
        _check_preconditions(kind, current, options.get("preconditions") or {})
        if options.get("propagationPolicy") == "Orphan":
            self._orphan_dependents(current["metadata"]["uid"])
        key = self.key(kind, namespace, name)
        if not _held_open(current):
            return present(kind, self.remove(key))
        if current["metadata"].get("deletionTimestamp"):
            return present(kind, current)
        terminating = copy.deepcopy(current)
        terminating["metadata"].update(
            deletionTimestamp=timestamp(self.clock), deletionGracePeriodSeconds=0
        )
        if kind.resource == NAMESPACES:
            terminating.setdefault("status", {})["phase"] = "Terminating"
        return self._store(kind, key, terminating)

    def delete_collection(self, kind: Kind, namespace: str | None, selector: Selector) -> list[Obj]:
        matching = [o for o in self.store.items(kind.resource, namespace) if selector.matches(o)]
        return [
            self.delete(kind, o["metadata"].get("namespace", ""), o["metadata"]["name"])
            for o in matching
        ]

    def remove(self, key: Key) -> Obj:
        """Delete for good, with what follows: a CRD takes its resources and objects with it."""
        if options.current().dry_run:
            return copy.deepcopy(self.store.get(key) or {"metadata": {}})
        gone = self.store.remove(key)
        if key.resource == ("", "pods"):
            self.store.pod_logs.pop((key.namespace, key.name), None)
        if key.resource == CRDS:
            for kind in self.registry.unregister_crd(key.name):
                for obj_key in [k for k in self.store.all_keys() if k.resource == kind.resource]:
                    self.store.remove(obj_key)
        self._changed()
        return gone

    def _commit(
        self,
        kind: Kind,
        current: Obj,
        new: Obj,
        subresource: str,
        *,
        entries: list[Obj] | None = None,
    ) -> Obj:
        meta, old_meta = new["metadata"], current["metadata"]
        _place(kind, meta, old_meta.get("namespace", ""))
        if meta.get("resourceVersion") not in (None, "", old_meta["resourceVersion"]):
            raise errors.conflict(kind.plural, kind.group, old_meta["name"])
        if subresource == "status":
            new = {**copy.deepcopy(current), "status": new.get("status")}
        elif kind.status:
            new["status"] = copy.deepcopy(current.get("status"))
        if new.get("status") is None:
            new.pop("status", None)
        new["metadata"] = _carry_server_metadata(new["metadata"], old_meta)
        self._defaults.on_update(kind, new, old_meta["name"])
        problems = label_problems(new["metadata"].get("labels"))
        if problems:
            raise errors.invalid(kind.kind, kind.group, old_meta["name"], problems)
        if desired_state(new) != desired_state(current):
            new["metadata"]["generation"] = old_meta.get("generation", 1) + 1
        self._validate(kind, new)
        if entries is None:
            write = self._write(kind, subresource)
            base = managed.base_entries(current, new)
            entries = managed.update(base, present(kind, current), new, self.shape(kind), write)
        _set_entries(new, entries)
        key = self.key(kind, old_meta.get("namespace", ""), old_meta["name"])
        if without_resource_version(present(kind, new)) == without_resource_version(
            present(kind, current)
        ):
            return present(kind, current)
        if kind.resource == CRDS:
            self._defaults.check_crd(new)
        if meta.get("deletionTimestamp") and not _held_open(new):
            return present(kind, self.remove(key))
        return self._store(kind, key, new)

    def _store(self, kind: Kind, key: Key, obj: Obj) -> Obj:
        if options.current().dry_run:  # dryRun=All: everything but the write
            return _dry(kind, obj, self.store.get(key))
        stored = self.store.write(key, present(kind, obj))
        if key.resource == CRDS:
            self.registry.register_crd(key.name, crd_kinds(stored))
        if stored["metadata"].get("ownerReferences") or stored["metadata"].get("deletionTimestamp"):
            self._changed()
        return present(kind, stored)

    def _check_namespace(self, kind: Kind, namespace: str, name: str) -> None:
        ns = self.store.get(Key("", "namespaces", "", namespace))
        if ns is None:
            raise errors.not_found("namespaces", "", namespace)
        if ns["metadata"].get("deletionTimestamp"):
            raise errors.forbidden(
                f'{kind.plural} "{name}" is forbidden: unable to create new content in namespace '
                f"{namespace} because it is being terminated"
            )

    def _orphan_dependents(self, uid: str) -> None:
        for key in self.store.all_keys():
            obj = self.store.get(key)
            refs = (obj or {}).get("metadata", {}).get("ownerReferences") or []
            if obj is not None and any(r.get("uid") == uid for r in refs):
                kept = copy.deepcopy(obj)
                kept["metadata"]["ownerReferences"] = [r for r in refs if r.get("uid") != uid]
                self.store.write(key, kept)

    def _changed(self) -> None:
        for hook in self.on_change:
            hook()


def _checked_body(kind: Kind, body: Any) -> Obj:
    if not isinstance(body, dict) or not isinstance(body.get("metadata", {}), dict):
        raise errors.bad_request("the body of the request must be a JSON object with metadata")
    obj = copy.deepcopy(body)
    api_version, sent_kind = obj.get("apiVersion"), obj.get("kind")
    if sent_kind and sent_kind != kind.kind:
        raise errors.bad_request(
            f"the kind in the data ({sent_kind}) does not match the expected kind ({kind.kind})"
        )
    if api_version and str(api_version).rpartition("/")[0] != kind.group:
        raise errors.bad_request(
            f"the API version in the data ({api_version}) does not match the expected API "
            f"version ({kind.api_version})"
        )
    obj.setdefault("metadata", {})
    return obj


def _applied_config(kind: Kind, body: Any, name: str) -> Obj:
    config = _checked_body(kind, body)
    for field in ("apiVersion", "kind"):
        if not config.get(field):
            raise errors.bad_request(f"{field} must be set in an applied configuration")
    sent = config["metadata"].get("name")
    if sent != name:
        raise errors.bad_request(
            f"the name of the object ({sent}) does not match the name on the URL ({name})"
        )
    return config


def _dry(kind: Kind, obj: Obj, current: Obj | None) -> Obj:
    dry = present(kind, copy.deepcopy(obj))
    dry["metadata"].pop("resourceVersion", None)
    if current is not None:
        dry["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
    return dry


def _set_entries(obj: Obj, entries: list[Obj]) -> None:
    if entries:
        obj["metadata"]["managedFields"] = entries
    else:
        obj["metadata"].pop("managedFields", None)


def _place(kind: Kind, meta: dict[str, Any], namespace: str) -> None:
    if not kind.namespaced:
        meta.pop("namespace", None)
        return
    if meta.get("namespace") and meta["namespace"] != namespace:
        raise errors.bad_request(
            "the namespace of the provided object does not match the namespace sent on the request"
        )
    meta["namespace"] = namespace


def _carry_server_metadata(meta: dict[str, Any], old: dict[str, Any]) -> dict[str, Any]:
    kept = {k: v for k, v in meta.items() if k not in _SERVER_OWNED}
    kept.update({k: old[k] for k in _SERVER_OWNED if k in old})
    kept["resourceVersion"] = old["resourceVersion"]
    return kept


def _held_open(obj: Obj) -> bool:
    """Finalizers keep a deleted object; a namespace also waits for its `spec.finalizers`."""
    if obj["metadata"].get("finalizers"):
        return True
    return obj.get("kind") == "Namespace" and bool((obj.get("spec") or {}).get("finalizers"))


def _check_preconditions(kind: Kind, current: Obj, preconditions: dict[str, Any]) -> None:
    meta = current["metadata"]
    for field in ("uid", "resourceVersion"):
        if preconditions.get(field) and preconditions[field] != meta.get(field):
            raise errors.conflict(kind.plural, kind.group, meta["name"])
