"""The object store: every object, one global resourceVersion, and a window of recent changes.

Like etcd behind kube-apiserver, each write takes the next value of one counter shared by all
kinds, and the last `window` changes are kept so a watch can resume from a resourceVersion and a
paginated list can serve later pages at the first page's resourceVersion (by rolling the window
back). A resourceVersion older than the window is gone: callers answer 410, which is what makes
clients relist. `compact()` drops the whole window, as a restarted API server does.

The store never copies: callers hand it objects they no longer mutate and copy what it returns
before changing it.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

Obj = dict[str, Any]


@dataclass(frozen=True, slots=True, order=True)
class Key:
    group: str  # the API group ("" for core)
    plural: str  # the resource, e.g. "configmaps"
    namespace: str  # "" for cluster-scoped objects
    name: str  # metadata.name

    @property
    def resource(self) -> tuple[str, str]:
        return (self.group, self.plural)


@dataclass(frozen=True, slots=True)
class Change:
    rv: int  # the resourceVersion this change created
    type: str  # "ADDED", "MODIFIED" or "DELETED", as watch events name them
    key: Key  # which object
    obj: Obj  # the object after the change; for DELETED, the last state with this rv
    prev: Obj | None  # the object before the change; None for ADDED


class Expired(Exception):
    """The requested resourceVersion is older than the retained window."""


class Store:
    def __init__(self, *, window: int = 1000) -> None:
        self._objects: dict[Key, Obj] = {}
        self._rv = 1
        self._window = window
        self._history: deque[Change] = deque()
        # Changes with rv <= _compacted are no longer retained.
        self._compacted = 1
        self._wakeup = asyncio.Event()
        self.pod_logs: dict[tuple[str, str], str] = {}

    @property
    def resource_version(self) -> int:
        return self._rv

    def get(self, key: Key) -> Obj | None:
        return self._objects.get(key)

    def all_keys(self) -> list[Key]:
        return sorted(self._objects)

    def items(self, resource: tuple[str, str], namespace: str | None = None) -> list[Obj]:
        return [self._objects[k] for k in self._matching(self._objects, resource, namespace)]

    def write(self, key: Key, obj: Obj) -> Obj:
        """Store `obj` at the next resourceVersion (set in its metadata) and record the change."""
        self._rv += 1
        obj.setdefault("metadata", {})["resourceVersion"] = str(self._rv)
        prev = self._objects.get(key)
        self._objects[key] = obj
        self._record(Change(self._rv, "MODIFIED" if prev else "ADDED", key, obj, prev))
        return obj

    def remove(self, key: Key) -> Obj:
        prev = self._objects.pop(key)
        self._rv += 1
        gone = {**prev, "metadata": {**prev["metadata"], "resourceVersion": str(self._rv)}}
        self._record(Change(self._rv, "DELETED", key, gone, prev))
        return gone

    def changes_after(self, rv: int) -> list[Change]:
        if rv < self._compacted:
            raise Expired(f"too old resource version: {rv} ({self._compacted})")
        return [c for c in self._history if c.rv > rv]

    def snapshot(self, resource: tuple[str, str], namespace: str | None, rv: int) -> list[Obj]:
        """The objects of `resource` as they were at `rv`, rolled back through the window."""
        state = {k: v for k, v in self._objects.items() if k.resource == resource}
        for change in reversed(self.changes_after(rv)):
            if change.key.resource != resource:
                continue
            if change.prev is None:
                state.pop(change.key, None)
            else:
                state[change.key] = change.prev
        return [state[k] for k in self._matching(state, resource, namespace)]

    def compact(self) -> None:
        """Forget every retained change and move past the current resourceVersion.

        A restarted kube-apiserver fills its watch cache at the cluster's current revision, which
        the cluster's own writes (leases, endpoints) have moved on by then: every resourceVersion
        a client saw before is now too old. Skipping one revision gives the same result.
        """
        self._history.clear()
        self._rv += 1
        self._compacted = self._rv

    def notify(self) -> None:
        """Wake every waiter, changed or not (a watch being closed, a fault cleared)."""
        self._wakeup.set()
        self._wakeup = asyncio.Event()

    async def wait(self, after_rv: int, within: float) -> None:
        """Return once a change past `after_rv` exists, `notify` is called, or `within` passes."""
        if self._rv > after_rv:
            return
        wakeup = self._wakeup
        try:
            async with asyncio.timeout(within):  # cancel-safe on 3.11, unlike wait_for
                await wakeup.wait()
        except TimeoutError:
            return

    def _record(self, change: Change) -> None:
        self._history.append(change)
        while len(self._history) > self._window:
            self._compacted = self._history.popleft().rv
        self.notify()

    @staticmethod
    def _matching(
        objects: dict[Key, Obj], resource: tuple[str, str], namespace: str | None
    ) -> Iterator[Key]:
        for key in sorted(objects):
            if key.resource == resource and namespace in (None, key.namespace):
                yield key
