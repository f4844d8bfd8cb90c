"""The `scale` subresource of Deployments: what `kubectl scale` and the clients' `*_scale` use.

GET answers an autoscaling/v1 `Scale`: `spec.replicas` from the Deployment, `status.replicas`
and `status.selector` (the label selector as a string) from its status and selector. PUT and
PATCH (merge, JSON or strategic) change the Deployment's `spec.replicas` and nothing else,
through the machinery's ordinary update, so `generation` moves and watchers see the change.
"""

from __future__ import annotations

from typing import Any

from coxswain_devkit.apiserver import errors, patch
from coxswain_devkit.apiserver.machinery import Machinery
from coxswain_devkit.apiserver.registry import Kind
from coxswain_devkit.apiserver.store import Obj

__all__ = ["read", "write"]


def _selector(deployment: Obj) -> str:
    labels = ((deployment.get("spec") or {}).get("selector") or {}).get("matchLabels") or {}
    return ",".join(f"{k}={v}" for k, v in sorted(labels.items()))


def read(deployment: Obj) -> Obj:
    meta = deployment["metadata"]
    spec = deployment.get("spec") or {}
    return {
        "kind": "Scale",
        "apiVersion": "autoscaling/v1",
        "metadata": {
            k: meta[k]
            for k in ("name", "namespace", "uid", "resourceVersion", "creationTimestamp")
            if k in meta
        },
        "spec": {"replicas": spec.get("replicas", 1)},
        "status": {
            "replicas": (deployment.get("status") or {}).get("replicas", 0),
            "selector": _selector(deployment),
        },
    }


def write(
    machinery: Machinery, kind: Kind, namespace: str, name: str, body: Any, content_type: str
) -> Obj:
    """Apply a PUT (`content_type` "") or PATCH body to the Scale; answer the new Scale."""
    current = machinery.get(kind, namespace, name)
    scale = read(current)
    wanted = body if not content_type else patch.apply(content_type, scale, body, builtin=True)
    replicas = ((wanted or {}).get("spec") or {}).get("replicas")
    if not isinstance(replicas, int) or replicas < 0:
        raise errors.invalid(
            "Scale", "autoscaling", name, [("spec.replicas", "Invalid value: must be >= 0")]
        )
    changed = {**current, "spec": {**(current.get("spec") or {}), "replicas": replicas}}
    return read(machinery.update(kind, namespace, name, changed, subresource="scale"))
