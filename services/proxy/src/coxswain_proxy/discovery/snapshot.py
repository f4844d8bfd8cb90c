"""Staging a pushed snapshot into a new routing state: pure, never touching the held one.

Where it sits: the discovery client receives a `Snapshot`, calls `stage(held, snapshot)` and, if
it returns, swaps the result in with one assignment (`holder.RoutingHolder`) and Acks; if it
raises a `SnapshotRejected`, it keeps `held` and Nacks with the error's text.

Why the shape: docs/discovery.md, "The proxy's side": "stage the new resource set, decode and
validate it, check the version, build the router, then swap one reference. Any failure keeps
the last good snapshot and sends a Nack." Every step below builds new values; `RoutingState` is
frozen and its mappings are read-only views, so a failure half way leaves nothing to undo.

Staging costs what the delta carries, not what the snapshot holds: only the resources a delta
carries are decoded, hashed and compiled (each `HostRoutes` through the matcher, so one it
cannot build is refused here); unchanged ones are reused as held, the same objects. The router
itself is built once, by the data plane (`dataplane.tables`), before the Ack: from those same
objects it rebuilds only the host tables the delta touched.

A value that would break an HTTP head if written (a header value with CR LF, say) is refused
twice over, each naming the resource and the field: by `from_wire` (the routing model's rules)
and by the data plane's own compile-time check (`dataplane.tables.check_routes`), so a bug in
one still leaves the other and such a snapshot is Nacked whoever made it.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType

from coxswain_proto import discovery as pb
from coxswain_proxy.dataplane import framing, tables
from coxswain_proxy.discovery import failures
from coxswain_routing import (
    HostRoutes,
    Resource,
    UnsafeValue,
    WireError,
    compile_router,
    from_wire,
    resource_hash,
    snapshot_version,
)


@dataclass(frozen=True, slots=True)
class RoutingState:
    """One applied snapshot: what the request path reads, behind a single reference."""

    resources: Mapping[str, Resource]  # by key; a read-only view
    hashes: Mapping[str, str]  # key -> resource_hash, to recompute the version after a delta
    version: str  # snapshot_version(hashes), equal to the version the controller sent
    publish_seq: int  # the controller's publish sequence this version came from


def stage(held: RoutingState | None, snapshot: pb.Snapshot) -> RoutingState:
    """The state `snapshot` leads to from `held`, or a `SnapshotRejected` naming why not."""
    base = _base(held, snapshot)
    changed = _decode(snapshot.resources)
    _compiles(changed.values())
    removed = set(snapshot.removed)
    resources = {k: v for k, v in base.resources.items() if k not in removed}
    hashes = {k: v for k, v in base.hashes.items() if k not in removed}
    for key, resource in changed.items():
        resources[key] = resource
        hashes[key] = resource_hash(resource)
    version = snapshot_version(hashes)
    # docs/discovery.md, "Versions": "The proxy recomputes it after applying a snapshot and
    # refuses a mismatch."
    if version != snapshot.version:
        kind = "full snapshot" if snapshot.full else "delta"
        raise failures.VersionMismatch(
            f"{kind} claims version {snapshot.version!r} but its resources hash to {version!r}"
        )
    return RoutingState(
        resources=MappingProxyType(resources),
        hashes=MappingProxyType(hashes),
        version=version,
        publish_seq=snapshot.publish_seq,
    )


_EMPTY = RoutingState(MappingProxyType({}), MappingProxyType({}), "", 0)


def _base(held: RoutingState | None, snapshot: pb.Snapshot) -> RoutingState:
    if snapshot.full:
        # docs/discovery.md, "Deltas": `removed` lists "the keys that disappeared"; a full
        # snapshot replaces everything, so a non-empty list there means a confused sender.
        if snapshot.removed:
            raise failures.MalformedSnapshot("a full snapshot lists removed keys")
        return _EMPTY
    # "everything else is unchanged from the version last acked": without one, no base.
    if held is None:
        raise failures.DeltaWithoutBase("a delta arrived before any full snapshot was applied")
    return held


def _decode(messages: Iterable[pb.Resource]) -> dict[str, Resource]:
    decoded: dict[str, Resource] = {}
    for message in messages:
        if message.key in decoded:
            raise failures.MalformedSnapshot(f"resource {message.key!r} appears twice")
        try:
            resource = from_wire(message)
        except UnsafeValue as exc:
            # It decodes, but holds a value no head may carry; the text names where.
            raise failures.InvalidResource(str(exc)) from exc
        except WireError as exc:
            raise failures.UndecodableResource(f"undecodable resource: {exc}") from exc
        _validate(resource)
        decoded[message.key] = resource
    return decoded


def _validate(resource: Resource) -> None:
    if not isinstance(resource, HostRoutes):
        return
    for rule in resource.rules:
        problems = rule.validate()
        if problems:
            found = "; ".join(f"{p.field}: {p.message}" for p in problems)
            raise failures.InvalidResource(f"resource {resource.key!r}, {rule.id}: {found}")


def _compiles(resources: Collection[Resource]) -> None:
    """Refuse what the matcher or the data plane cannot build. A host table only buckets and
    orders the candidates of its resources, so compiling each changed one alone is the whole
    check; so is planning each changed rule."""
    try:
        compile_router(resources)
    except (re.error, ValueError, KeyError, TypeError) as exc:
        # A regular expression the matcher cannot compile, say: the model let it through.
        raise failures.InvalidResource(f"the router could not be built: {exc}") from exc
    for resource in resources:
        if isinstance(resource, HostRoutes):
            try:
                tables.check_routes(resource)
            except framing.UnsafeField as exc:
                raise failures.InvalidResource(str(exc)) from exc
