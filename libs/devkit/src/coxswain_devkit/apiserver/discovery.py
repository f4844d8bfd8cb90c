"""Discovery documents: how clients and kubectl learn which resources exist.

These are the legacy (unaggregated) documents: `/api`, `/apis`, `/api/v1`, `/apis/<group>` and
`/apis/<group>/<version>`. kubectl asks `/apis` for aggregated discovery first and falls back
to these when the answer's Content-Type says plain JSON, so the emulator need not speak the
aggregated format. Everything is computed from the registry on each request, so a CRD applied
or deleted shows up at once.
"""

from __future__ import annotations

from typing import Any

from coxswain_devkit.apiserver.registry import Kind, Registry

VERSION_INFO = {
    "major": "1",
    "minor": "32",
    "gitVersion": "v1.32.0-coxswain-devkit",
    "gitCommit": "0000000000000000000000000000000000000000",
    "gitTreeState": "clean",
    "buildDate": "2025-01-01T00:00:00Z",
    "goVersion": "go1.23.0",
    "compiler": "gc",
    "platform": "linux/amd64",
}

_STATUS_VERBS = ["get", "patch", "update"]


def api_versions(server_address: str) -> dict[str, Any]:
    return {
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [
            {"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}
        ],
    }


def _group(name: str, versions: list[str]) -> dict[str, Any]:
    listed = [{"groupVersion": f"{name}/{v}", "version": v} for v in versions]
    return {"name": name, "versions": listed, "preferredVersion": listed[0]}


def api_group_list(registry: Registry) -> dict[str, Any]:
    groups = [_group(g, vs) for g, vs in sorted(registry.groups().items()) if g]
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}


def api_group(registry: Registry, name: str) -> dict[str, Any] | None:
    versions = registry.groups().get(name)
    if not name or not versions:
        return None
    return {"kind": "APIGroup", "apiVersion": "v1", **_group(name, versions)}


def _resource(kind: Kind) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "name": kind.plural,
        "singularName": kind.singular,
        "namespaced": kind.namespaced,
        "kind": kind.kind,
        "verbs": list(kind.verbs),
    }
    if kind.short_names:
        entry["shortNames"] = list(kind.short_names)
    if kind.categories:
        entry["categories"] = list(kind.categories)
    return entry


def _subresources(kind: Kind) -> list[dict[str, Any]]:
    base = {"singularName": "", "namespaced": kind.namespaced, "kind": kind.kind}
    entries = []
    if kind.status:
        entries.append({**base, "name": f"{kind.plural}/status", "verbs": _STATUS_VERBS})
    if "log" in kind.subresources:
        entries.append({**base, "name": f"{kind.plural}/log", "verbs": ["get"]})
    if "scale" in kind.subresources:
        entries.append(
            {
                **base,
                "name": f"{kind.plural}/scale",
                "group": "autoscaling",
                "version": "v1",
                "kind": "Scale",
                "verbs": ["get", "patch", "update"],
            }
        )
    if "token" in kind.subresources:
        entries.append(
            {
                **base,
                "name": f"{kind.plural}/token",
                "group": "authentication.k8s.io",
                "version": "v1",
                "kind": "TokenRequest",
                "verbs": ["create"],
            }
        )
    return entries


def api_resource_list(registry: Registry, group: str, version: str) -> dict[str, Any] | None:
    kinds = sorted(registry.in_group_version(group, version), key=lambda k: k.plural)
    if not kinds:
        return None
    resources = [entry for k in kinds for entry in (_resource(k), *_subresources(k))]
    group_version = f"{group}/{version}" if group else version
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": group_version,
        "resources": resources,
    }
