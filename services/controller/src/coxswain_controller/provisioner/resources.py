"""Where each provisioned kind lives in the API, and which of the cache's objects are ours.

The controller watches Deployments and ServiceAccounts by the managed-by label (sources/kinds)
and every Service, ConfigMap and EndpointSlice anyway (translation reads them); of those, an
object is this controller's when it carries both of its labels and a controller owner reference
to a Gateway.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from coxswain_controller.kube import api as kube
from coxswain_controller.translate.provision import names
from coxswain_controller.translate.provision.model import ObjectKey

__all__ = ["KINDS", "Resource", "gateway_owner", "managed_labels", "path"]


@dataclass(frozen=True, slots=True)
class Resource:
    group: str  # "" for the core group
    version: str
    plural: str


KINDS: Mapping[str, Resource] = {
    "ServiceAccount": Resource("", "v1", "serviceaccounts"),
    "ConfigMap": Resource("", "v1", "configmaps"),
    "Deployment": Resource("apps", "v1", "deployments"),
    "Service": Resource("", "v1", "services"),
    "EndpointSlice": Resource("discovery.k8s.io", "v1", "endpointslices"),
}


def path(key: ObjectKey, *, collection: bool = False) -> str:
    resource = KINDS[key.kind]
    if collection:
        base = kube.object_path(
            resource.group, resource.version, resource.plural, key.namespace, ""
        )
        return base.rstrip("/")
    return kube.object_path(
        resource.group, resource.version, resource.plural, key.namespace, key.name
    )


def managed_labels(controller_name: str) -> dict[str, str]:
    """The labels every object of this controller carries."""
    return {
        names.MANAGED_BY_LABEL: names.MANAGED_BY,
        names.CONTROLLER_LABEL: names.controller_label_value(controller_name),
    }


def gateway_owner(obj: Mapping[str, Any], managed: Mapping[str, str]) -> str | None:
    """The uid of the Gateway controlling `obj` when `obj` is this controller's, else None."""
    metadata = obj.get("metadata") or {}
    labels = metadata.get("labels") or {}
    if any(labels.get(k) != v for k, v in managed.items()):
        return None
    for ref in metadata.get("ownerReferences") or []:
        if ref.get("controller") and ref.get("kind") == "Gateway" and ref.get("uid"):
            return str(ref["uid"])
    return None
