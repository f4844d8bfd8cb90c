"""Background garbage collection: dependents of deleted owners, and terminating namespaces.

kube-controller-manager does this work in the real cluster, after the API call that deleted the
owner has returned; here a sweep is scheduled on the event loop after any change that may need
one, so clients see the same order: the owner's DELETED first, its dependents' shortly after.
A dependent goes once none of its `ownerReferences` names an existing uid. A namespace being
deleted has its contents deleted (finalizers still hold objects open) and is removed once empty.
"""

from __future__ import annotations

import asyncio

from coxswain_devkit.apiserver.machinery import NAMESPACES, Machinery
from coxswain_devkit.apiserver.store import Key


class Collector:
    def __init__(self, machinery: Machinery) -> None:
        self._machinery = machinery
        self._pending: asyncio.Handle | None = None
        machinery.on_change.append(self.schedule)

    def schedule(self) -> None:
        if self._pending is not None:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            self.sweep()  # no loop yet (loading manifests before serving): collect at once
            return
        self._pending = loop.call_soon(self.sweep)

    def sweep(self) -> None:
        self._pending = None
        self._collect_dependents()
        self._finish_namespaces()

    def _delete(self, key: Key) -> None:
        kind = self._machinery.registry.preferred(*key.resource)
        obj = self._machinery.store.get(key)
        if kind is None or obj is None or obj["metadata"].get("deletionTimestamp"):
            return
        self._machinery.delete(kind, key.namespace, key.name)

    def _collect_dependents(self) -> None:
        store = self._machinery.store
        keys = store.all_keys()
        uids = {obj["metadata"].get("uid") for obj in map(store.get, keys) if obj is not None}
        for key in keys:
            obj = store.get(key)
            refs = (obj or {}).get("metadata", {}).get("ownerReferences") or []
            if refs and not any(ref.get("uid") in uids for ref in refs):
                self._delete(key)

    def _finish_namespaces(self) -> None:
        store = self._machinery.store
        for ns in store.items(NAMESPACES):
            meta = ns["metadata"]
            if not meta.get("deletionTimestamp"):
                continue
            contents = [k for k in store.all_keys() if k.namespace == meta["name"]]
            for key in contents:
                self._delete(key)
            if not meta.get("finalizers") and not any(
                k.namespace == meta["name"] for k in store.all_keys()
            ):
                self._machinery.remove(Key("", "namespaces", "", meta["name"]))
