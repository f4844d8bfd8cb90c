"""What is published, per scope: the snapshots the discovery server hands to streams.

Where it sits: translation produces, for each scope (SharedPool and every dedicated Gateway),
a set of resources; `publish` encodes each resource once, hashes it, and stamps the round with
a publish sequence number. Streams read `current(scope)` and are told when it changes.

A resource whose model equals the one already published is not encoded again, so a round that
changes one host costs one encoding; translation hands back the very same resource objects (and
the same tuple for an unchanged scope) where nothing changed, so those checks are by identity
first and a round costs little more than what changed. A round that changes nothing publishes
nothing: versions are content hashes, and the sequence number moves only when some scope's
version does.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from coxswain_controller.translate.scopes import GatewayScope, Identity, Scope
from coxswain_proto import discovery as pb
from coxswain_routing import Resource, snapshot_version, to_wire

__all__ = ["Published", "Retained", "SnapshotRegistry"]

# How many published versions of each scope are kept as models, for the operator API to answer
# from the snapshot a proxy acked even when it is a few rounds behind (fleet routes, explain).
RETAINED_VERSIONS = 8
# How many publish rounds' wall-clock times are kept (a proxy's lag in milliseconds).
RETAINED_SEQS = 256


@dataclass(frozen=True, slots=True)
class Published:
    version: str  # snapshot_version of every resource's key and hash
    seq: int  # the publish round this version first appeared in
    messages: Mapping[str, pb.Resource]  # wire messages by key
    hashes: Mapping[str, str]


@dataclass(frozen=True, slots=True)
class Retained:
    """One published version of a scope, as models: what the operator API reads."""

    version: str
    seq: int
    published_at: float  # time.time() of its publish round
    resources: tuple[Resource, ...]


@dataclass(frozen=True, slots=True)
class _Encoded:
    model: Resource
    message: pb.Resource
    hash: str


class SnapshotRegistry:
    def __init__(self) -> None:
        self._seq = 0
        self._published: dict[str, Published] = {}
        self._encoded: dict[str, dict[str, _Encoded]] = {}
        self._staged: dict[str, tuple[object, tuple[str, dict[str, _Encoded]]]] = {}
        self._watchers: dict[str, set[Callable[[], None]]] = {}
        self._gateway_identities: dict[GatewayScope, Identity] = {}
        self._retained: dict[str, dict[str, Retained]] = {}  # scope key -> version -> models
        self._published_at: dict[int, float] = {}  # seq -> time.time(), the last RETAINED_SEQS

    @property
    def seq(self) -> int:
        return self._seq

    def current(self, scope: Scope) -> Published | None:
        return self._published.get(scope.key)

    def publish(self, rounds: Mapping[Scope, Iterable[Resource]]) -> int:
        """Publish every scope's resources; scopes absent from `rounds` are withdrawn.

        Returns the publish sequence number, bumped only if some scope's content changed.
        """
        staged = {
            scope.key: self._encode(scope.key, resources) for scope, resources in rounds.items()
        }
        changed = [key for key, (version, _) in staged.items() if self._version(key) != version]
        withdrawn = [key for key in self._published if key not in staged]
        if not changed and not withdrawn:
            return self._seq
        self._seq += 1
        now = time.time()
        self._published_at[self._seq] = now
        if len(self._published_at) > RETAINED_SEQS:
            del self._published_at[next(iter(self._published_at))]
        for key in changed:
            version, encoded = staged[key]
            self._encoded[key] = encoded
            self._published[key] = Published(
                version,
                self._seq,
                {k: e.message for k, e in encoded.items()},
                {k: e.hash for k, e in encoded.items()},
            )
            self._retain(
                key, Retained(version, self._seq, now, tuple(e.model for e in encoded.values()))
            )
        for key in withdrawn:
            del self._published[key]
            self._staged.pop(key, None)
            self._encoded.pop(key, None)
            self._retained.pop(key, None)
        for key in (*changed, *withdrawn):
            for notify in list(self._watchers.get(key, ())):
                notify()
        return self._seq

    def scopes(self) -> list[str]:
        """The keys of every scope published now."""
        return list(self._published)

    def retained(self, scope_key: str, version: str | None = None) -> Retained | None:
        """`scope_key`'s models at `version` (None: the current one), while still kept."""
        kept = self._retained.get(scope_key, {})
        if version is None:
            current = self._published.get(scope_key)
            version = current.version if current else ""
        return kept.get(version)

    def versions(self, scope_key: str) -> list[Retained]:
        """Every kept version of `scope_key`, oldest first."""
        return list(self._retained.get(scope_key, {}).values())

    def published_at(self, seq: int) -> float | None:
        """When publish round `seq` happened (time.time()), while still kept."""
        return self._published_at.get(seq)

    def _retain(self, key: str, retained: Retained) -> None:
        kept = self._retained.setdefault(key, {})
        kept.pop(retained.version, None)  # a version published again moves to the newest
        kept[retained.version] = retained
        while len(kept) > RETAINED_VERSIONS:
            del kept[next(iter(kept))]

    def watch(self, scope: Scope, notify: Callable[[], None]) -> Callable[[], None]:
        """Call `notify()` whenever `scope`'s published content changes; returns unwatch."""
        watchers = self._watchers.setdefault(scope.key, set())
        watchers.add(notify)
        return lambda: watchers.discard(notify)

    def set_gateway_identities(self, identities: Mapping[GatewayScope, Identity]) -> None:
        """The ServiceAccount each dedicated Gateway's proxy must present (GEP-1762)."""
        self._gateway_identities = dict(identities)

    def expected_identity(self, scope: GatewayScope) -> Identity | None:
        return self._gateway_identities.get(scope)

    def _version(self, key: str) -> str | None:
        published = self._published.get(key)
        return published.version if published else None

    def _encode(self, key: str, resources: Iterable[Resource]) -> tuple[str, dict[str, _Encoded]]:
        last = self._staged.get(key)
        if last is not None and last[0] is resources:  # held there, so the identity is sound
            return last[1]
        previous = self._encoded.get(key, {})
        encoded: dict[str, _Encoded] = {}
        for resource in resources:
            old = previous.get(resource.key)
            if old is not None and (old.model is resource or old.model == resource):
                encoded[resource.key] = old
                continue
            message = to_wire(resource)
            digest = hashlib.sha256(bytes(message)).hexdigest()
            encoded[resource.key] = _Encoded(resource, message, digest)
        staged = snapshot_version({k: e.hash for k, e in encoded.items()}), encoded
        self._staged[key] = (resources, staged)
        return staged
