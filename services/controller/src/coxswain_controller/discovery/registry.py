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
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from coxswain_controller.translate.scopes import GatewayScope, Identity, Scope
from coxswain_proto import discovery as pb
from coxswain_routing import Resource, snapshot_version, to_wire

__all__ = ["Published", "SnapshotRegistry"]


@dataclass(frozen=True, slots=True)
class Published:
    version: str  # snapshot_version of every resource's key and hash
    seq: int  # the publish round this version first appeared in
    messages: Mapping[str, pb.Resource]  # wire messages by key
    hashes: Mapping[str, str]


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
        for key in changed:
            version, encoded = staged[key]
            self._encoded[key] = encoded
            self._published[key] = Published(
                version,
                self._seq,
                {k: e.message for k, e in encoded.items()},
                {k: e.hash for k, e in encoded.items()},
            )
        for key in withdrawn:
            del self._published[key]
            self._staged.pop(key, None)
            self._encoded.pop(key, None)
        for key in (*changed, *withdrawn):
            for notify in list(self._watchers.get(key, ())):
                notify()
        return self._seq

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
