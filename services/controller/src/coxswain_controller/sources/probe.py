"""Which Gateway API resources the API server serves, from its discovery documents.

Asked at start and again whenever a Gateway API CRD changes (the supervisor watches CRDs), so
the controller moves in and out of Ingress-only mode (spec 002: "when Gateway API CRDs are
absent at startup, the controller detects their absence, skips Gateway API reconciliation")
without a restart. Blocking: the supervisor runs it in a worker thread.
"""

from __future__ import annotations

from typing import Any, TypedDict

from coxswain_controller.kube import api as kube
from coxswain_controller.sources import kinds


class GroupVersion(TypedDict):
    groupVersion: str
    version: str


class APIGroup(TypedDict, total=False):
    name: str
    versions: list[GroupVersion]


class APIResource(TypedDict, total=False):
    name: str  # the plural, or "plural/subresource"
    kind: str
    namespaced: bool


def served(
    client: Any, *, timeout: float, group_name: str = kinds.GATEWAY_GROUP
) -> dict[str, frozenset[str]]:
    """Version -> plurals served in an API group (the Gateway API's by default); empty when the
    group is not served."""
    try:
        group: APIGroup = kube.request(client, "GET", f"/apis/{group_name}", timeout=timeout)  # type: ignore[assignment]
    except kube.KubeError as exc:
        if exc.status == 404:
            return {}
        raise
    result: dict[str, frozenset[str]] = {}
    for entry in group.get("versions", []):
        plurals = _plurals(client, entry["groupVersion"], timeout=timeout)
        if plurals is not None:
            result[entry["version"]] = plurals
    return result


def _plurals(client: Any, group_version: str, *, timeout: float) -> frozenset[str] | None:
    try:
        document = kube.request(client, "GET", f"/apis/{group_version}", timeout=timeout)
    except kube.KubeError as exc:
        if exc.status == 404:  # the version went away between the two requests
            return None
        raise
    resources: list[APIResource] = document.get("resources", [])
    return frozenset(r["name"] for r in resources if "/" not in r.get("name", "/"))
