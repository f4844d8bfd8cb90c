"""Resource URLs, parsed the way kube-apiserver lays them out.

    /api/v1[/namespaces/<ns>]/<plural>[/<name>[/<subresource>]]
    /apis/<group>/<version>[/namespaces/<ns>]/<plural>[/<name>[/<subresource>]]

`/api/v1/namespaces/<name>/status` is the Namespace's own status, not a resource "status" in
namespace <name>: a namespaced path needs a plural after the namespace, and Namespace's
subresources (status, finalize) are not plurals.
"""

from __future__ import annotations

from dataclasses import dataclass

_NAMESPACE_SUBRESOURCES = frozenset({"status", "finalize"})


@dataclass(frozen=True, slots=True)
class Target:
    group: str  # "" for the core group
    version: str  # e.g. "v1"
    namespace: str | None  # None when the URL names no namespace
    plural: str  # the resource, e.g. "configmaps"
    name: str  # "" for collection URLs
    subresource: str  # "" for the object itself


def parse(path: str) -> Target | None:
    """The resource a URL names, or None when it names no resource (discovery, or nothing)."""
    segments = [s for s in path.split("/") if s]
    if segments[:2] == ["api", "v1"]:
        group, version, rest = "", "v1", segments[2:]
    elif len(segments) >= 3 and segments[0] == "apis":
        group, version, rest = segments[1], segments[2], segments[3:]
    else:
        return None
    namespace = None
    if (
        len(rest) >= 3
        and rest[0] == "namespaces"
        and not (len(rest) == 3 and rest[2] in _NAMESPACE_SUBRESOURCES)
    ):
        namespace, rest = rest[1], rest[2:]
    if not 1 <= len(rest) <= 3:
        return None
    rest += [""] * (3 - len(rest))
    return Target(group, version, namespace, rest[0], rest[1], rest[2])
