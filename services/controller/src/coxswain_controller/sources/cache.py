"""The object cache: every watched object, as the API server serves it, per kind.

Reflectors never touch it: they emit `Event`s, and the supervisor's one consumer task applies
them here in order (convention 6), so nothing else writes the cache and no lock is needed.
`handle` says whether the event mattered; a mattered event sets `changed`, which the publisher
awaits (and clears) before it takes a `snapshot()` and translates.

Snapshots are copy-on-write: a snapshot hands out read-only views of the current per-kind
dicts and marks them shared; the next write to a shared kind copies its dict first. Taking a
snapshot is O(kinds), and translation reads a view no later event can change. Objects are
replaced, never mutated, so they are shared between snapshots as they are; readers must not
mutate them either.

`synced` is set once every watched kind has completed its first list ("publish nothing until
every kind has been listed once"). It stays set when Gateway API kinds start later: the
objects listed so far are still true, and the new kinds fill in as their lists arrive.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from prometheus_client import Gauge

from coxswain_controller.kube.api import JSON
from coxswain_controller.sources import kinds, relevance

CACHE_OBJECTS = Gauge(
    "coxswain_controller_cache_objects", "Objects held in the controller's cache.", ["kind"]
)

Key = tuple[str, str]  # (namespace, name); namespace "" for cluster-scoped kinds
Objects = Mapping[Key, JSON]

_EMPTY: Objects = MappingProxyType({})


@dataclass(frozen=True, slots=True)
class Started:
    kind: kinds.Kind  # now watched: synced waits for its first list


@dataclass(frozen=True, slots=True)
class Stopped:
    kind: kinds.Kind  # no longer watched (its CRD went away): its objects go


@dataclass(frozen=True, slots=True)
class Listed:
    kind: kinds.Kind
    items: tuple[JSON, ...]  # the whole collection: replaces what the cache holds
    resource_version: str  # the list's


@dataclass(frozen=True, slots=True)
class Changed:
    kind: kinds.Kind
    type: str  # ADDED, MODIFIED or DELETED
    obj: JSON
    resource_version: str  # the object's


@dataclass(frozen=True, slots=True)
class Progressed:
    kind: kinds.Kind
    resource_version: str  # a BOOKMARK's: the watch has seen everything up to here


Event = Started | Stopped | Listed | Changed | Progressed


def key_of(obj: JSON) -> Key:
    metadata = obj.get("metadata", {})
    return (metadata.get("namespace", ""), metadata.get("name", ""))


@dataclass(frozen=True, slots=True)
class Snapshot:
    objects: Mapping[str, Objects]  # kind name -> (namespace, name) -> object
    served: frozenset[str]  # kinds watched when it was taken (Ingress-only: no Gateway kinds)

    def of(self, kind: str) -> Objects:
        """The objects of `kind`; empty when it is not served."""
        return self.objects.get(kind, _EMPTY)


@dataclass(slots=True)
class _Waiter:
    predicate: Callable[[], bool]
    future: asyncio.Future[None] = field(
        default_factory=lambda: asyncio.get_running_loop().create_future()
    )


class Cache:
    def __init__(self) -> None:
        self._kinds: dict[str, kinds.Kind] = {}  # watched now
        self._objects: dict[str, dict[Key, JSON]] = {}
        self._shared: set[str] = set()  # kinds whose dict a snapshot holds: copy before writing
        self._views: dict[str, tuple[dict[Key, JSON], Objects]] = {}  # the last view per kind
        self._listed: set[str] = set()
        self._versions: dict[str, str] = {}  # kind -> last resourceVersion seen
        self._waiters: list[_Waiter] = []
        self.changed = asyncio.Event()  # set by every event that mattered
        self.synced = asyncio.Event()  # set once every watched kind has been listed

    def handle(self, event: Event) -> bool:
        """Apply one event; True when it can change what translation computes."""
        mattered = self._apply(event)
        if mattered:
            self.changed.set()
        if not self.synced.is_set() and self._kinds and self._listed >= self._kinds.keys():
            self.synced.set()
        CACHE_OBJECTS.labels(kind=event.kind.name).set(len(self._objects.get(event.kind.name, ())))
        self._wake()
        return mattered

    def snapshot(self) -> Snapshot:
        self._shared = set(self._objects)
        views = {name: self._view(name, objects) for name, objects in self._objects.items()}
        return Snapshot(MappingProxyType(views), frozenset(self._kinds))

    def _view(self, name: str, objects: dict[Key, JSON]) -> Objects:
        # The same view while a kind's table is unchanged: translation's memo compares tables
        # by identity to know that nothing of a kind changed since the last pass.
        held = self._views.get(name)
        if held is None or held[0] is not objects:
            held = self._views[name] = (objects, MappingProxyType(objects))
        return held[1]

    def resource_version(self, kind: str) -> str:
        """The last resourceVersion the cache saw for `kind` ("" before its first list)."""
        return self._versions.get(kind, "")

    async def wait_until(self, predicate: Callable[[], bool]) -> None:
        """Return once `predicate()` holds; it is checked after every event."""
        if predicate():
            return
        waiter = _Waiter(predicate)
        self._waiters.append(waiter)
        try:
            await waiter.future
        finally:
            self._waiters.remove(waiter)

    def _wake(self) -> None:
        for waiter in self._waiters:
            if not waiter.future.done() and waiter.predicate():
                waiter.future.set_result(None)

    def _apply(self, event: Event) -> bool:
        name = event.kind.name
        match event:
            case Started(kind):
                self._kinds[name] = kind
                self._objects.setdefault(name, {})
                return False
            case Stopped():
                return self._forget(name)
        if self._kinds.get(name) != event.kind:
            return False  # a straggler from a reflector already replaced or stopped
        match event:
            case Listed(kind, items, resource_version):
                self._versions[name] = resource_version
                self._listed.add(name)
                return self._replace(kind, items)
            case Changed(kind, change, obj, resource_version):
                self._versions[name] = resource_version
                return self._change(kind, change, obj)
            case Progressed(_, resource_version):
                self._versions[name] = resource_version
        return False

    def _forget(self, name: str) -> bool:
        self._kinds.pop(name, None)
        self._listed.discard(name)
        self._versions.pop(name, None)
        self._shared.discard(name)
        return bool(self._objects.pop(name, None))

    def _replace(self, kind: kinds.Kind, items: Iterable[JSON]) -> bool:
        old = self._objects.get(kind.name, {})
        new = {key_of(obj): relevance.stored(kind, obj) for obj in items}
        self._objects[kind.name] = new
        self._shared.discard(kind.name)
        if old.keys() != new.keys():
            return True
        return any(relevance.differs(kind, old[key], obj) for key, obj in new.items())

    def _change(self, kind: kinds.Kind, change: str, obj: JSON) -> bool:
        key = key_of(obj)
        old = self._objects[kind.name].get(key)
        if change == "DELETED":
            if old is None:
                return False
            del self._writable(kind.name)[key]
            return True
        new = relevance.stored(kind, obj)
        self._writable(kind.name)[key] = new
        return old is None or relevance.differs(kind, old, new)

    def _writable(self, name: str) -> dict[Key, JSON]:
        if name in self._shared:
            self._objects[name] = dict(self._objects[name])
            self._shared.discard(name)
        return self._objects[name]
