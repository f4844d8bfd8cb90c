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

A kind's table may be fed by several watches (`kinds.Kind` is the watch, `Kind.name` the
table): the TLS Secrets of the whole cluster and each Secret basic auth names, watched alone by
name (`kinds.referenced_secret`). Their selectors never select the same object, so each object
of a table comes from exactly one watch, and a watch's list, deletes and stop touch only the
objects it delivered. A watch started with `hold` (a Secret just referenced) holds back
`changed` until its first list lands, so the pass that first sees a new reference also sees
the Secret it names, rather than refusing the Ingress for a moment with a Warning Event that
the Secret is missing; `Released` ends the wait when that list is late (neither `changed` nor
`synced` wait for it then).

`follow`, given to the constructor, sees every event once it is applied and answers with the
events that follow from it (the supervisor starts and stops those Secret watches as references
come and go); they are applied in the same step, before `changed` and `synced` are decided.
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
    hold: bool = False  # changes wait for its first list (or Released) before they count


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


@dataclass(frozen=True, slots=True)
class Released:
    kind: kinds.Kind  # a held watch's first list is late: changes and `synced` stop waiting


Event = Started | Stopped | Listed | Changed | Progressed | Released


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


# Given an event just applied and the tables as they are now, the events that follow from it.
Follow = Callable[[Event, Callable[[str], Objects]], Iterable[Event]]


class Cache:
    def __init__(self, follow: Follow | None = None) -> None:
        self._follow = follow
        self._watches: dict[kinds.Kind, set[Key]] = {}  # watched now -> the keys it delivered
        self._objects: dict[str, dict[Key, JSON]] = {}  # kind name -> the table
        self._shared: set[str] = set()  # kinds whose dict a snapshot holds: copy before writing
        self._views: dict[str, tuple[dict[Key, JSON], Objects]] = {}  # the last view per kind
        self._settled: set[kinds.Kind] = set()  # listed once, or released before that
        self._holding: set[kinds.Kind] = set()  # started with hold, not listed yet
        self._withheld = False  # a change happened while holding: announce it once released
        self._versions: dict[str, str] = {}  # kind -> last resourceVersion seen
        self._waiters: list[_Waiter] = []
        self.changed = asyncio.Event()  # set by every event that mattered
        self.synced = asyncio.Event()  # set once every watched kind has been listed

    def handle(self, event: Event) -> bool:
        """Apply one event, and those `follow` answers with; True when they can change what
        translation computes."""
        mattered = self._apply(event)
        for derived in self._follow(event, self.table) if self._follow is not None else ():
            mattered = self._apply(derived) or mattered
        self._announce(mattered)
        if not self.synced.is_set() and self._watches and self._settled >= self._watches.keys():
            self.synced.set()
        CACHE_OBJECTS.labels(kind=event.kind.name).set(len(self._objects.get(event.kind.name, ())))
        self._wake()
        return mattered

    def _announce(self, mattered: bool) -> None:
        self._withheld = self._withheld or mattered
        if self._withheld and not self._holding:
            self._withheld = False
            self.changed.set()

    def snapshot(self) -> Snapshot:
        self._shared = set(self._objects)
        views = {name: self._view(name, objects) for name, objects in self._objects.items()}
        return Snapshot(MappingProxyType(views), self._served())

    def table(self, kind: str) -> Objects:
        """The objects of `kind` now, read-only, for the consumer's own bookkeeping between
        two events (`follow`); translation takes a `snapshot`, which no later event changes."""
        objects = self._objects.get(kind)
        return _EMPTY if objects is None else MappingProxyType(objects)

    def _served(self) -> frozenset[str]:
        return frozenset(kind.name for kind in self._watches)

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
        kind = event.kind
        match event:
            case Started(_, hold):
                self._watches.setdefault(kind, set())
                self._objects.setdefault(kind.name, {})
                if hold:
                    self._holding.add(kind)
                return False
            case Stopped():
                return self._stop(kind)
        if kind not in self._watches:
            return False  # a straggler from a reflector already replaced or stopped
        match event:
            case Listed(_, items, resource_version):
                self._versions[kind.name] = resource_version
                self._settled.add(kind)
                self._holding.discard(kind)
                return self._replace(kind, items)
            case Changed(_, change, obj, resource_version):
                self._versions[kind.name] = resource_version
                return self._change(kind, change, obj)
            case Progressed(_, resource_version):
                self._versions[kind.name] = resource_version
            case Released():
                # Its list keeps failing: neither changes nor `synced` wait for it any longer.
                self._holding.discard(kind)
                self._settled.add(kind)
        return False

    def _stop(self, kind: kinds.Kind) -> bool:
        delivered = self._watches.pop(kind, set())
        self._settled.discard(kind)
        self._holding.discard(kind)
        if kind.name not in self._served():
            return self._forget(kind.name)
        if not delivered:
            return False
        table = self._writable(kind.name)
        for key in delivered:
            del table[key]
        return True

    def _forget(self, name: str) -> bool:
        self._versions.pop(name, None)
        self._shared.discard(name)
        return bool(self._objects.pop(name, None))

    def _replace(self, kind: kinds.Kind, items: Iterable[JSON]) -> bool:
        new = {key_of(obj): relevance.stored(kind, obj) for obj in items}
        delivered, self._watches[kind] = self._watches[kind], set(new)
        if sum(1 for watch in self._watches if watch.name == kind.name) > 1:
            return self._merge(kind, delivered, new)
        old = self._objects.get(kind.name, {})
        mattered = old.keys() != new.keys()
        for key, obj in new.items():
            was = old.get(key)
            if was is not None and not relevance.differs(kind, was, obj):
                new[key] = was  # as for a watch event: the object the last pass read, kept
            else:
                mattered = True
        self._objects[kind.name] = new
        self._shared.discard(kind.name)
        return mattered

    def _merge(self, kind: kinds.Kind, delivered: set[Key], new: dict[Key, JSON]) -> bool:
        """One watch's list into a table other watches feed too: only its own objects."""
        table = self._objects[kind.name]
        gone = delivered - new.keys()
        changed = {
            key: obj
            for key, obj in new.items()
            if key not in table or relevance.differs(kind, table[key], obj)
        }
        if not gone and not changed:
            return False
        table = self._writable(kind.name)
        for key in gone:
            del table[key]
        table.update(changed)
        return True

    def _change(self, kind: kinds.Kind, change: str, obj: JSON) -> bool:
        key = key_of(obj)
        delivered = self._watches[kind]
        old = self._objects[kind.name].get(key)
        if change == "DELETED":
            if key not in delivered:
                return False
            delivered.discard(key)
            del self._writable(kind.name)[key]
            return True
        new = relevance.stored(kind, obj)
        delivered.add(key)
        if old is not None and not relevance.differs(kind, old, new):
            # A new resourceVersion alone (our own status write coming back): the object kept
            # is the one the last pass read, so the two are one in memory, not two copies.
            return False
        self._writable(kind.name)[key] = new
        return True

    def _writable(self, name: str) -> dict[Key, JSON]:
        if name in self._shared:
            self._objects[name] = dict(self._objects[name])
            self._shared.discard(name)
        return self._objects[name]
