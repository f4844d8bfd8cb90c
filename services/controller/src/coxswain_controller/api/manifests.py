"""`/api/v1/manifests/{kind}/{namespace}/{name}`: one object as the controller's cache holds it.

Secret data never leaves: a Secret is shown without `data` and `stringData`, and without the
last-applied annotation (which carries the data as kubectl applied it). Cluster-scoped kinds
are addressed with the namespace `_`.
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from coxswain_controller.api.context import Parts, error, send

__all__ = ["manifest", "redact"]

LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"


def redact(kind: str, obj: dict[str, Any]) -> dict[str, Any]:
    if kind != "Secret":
        return obj
    shown = {k: v for k, v in obj.items() if k not in ("data", "stringData")}
    metadata = dict(shown.get("metadata") or {})
    annotations = {
        k: v for k, v in (metadata.get("annotations") or {}).items() if k != LAST_APPLIED
    }
    if "annotations" in metadata:
        metadata["annotations"] = annotations
    shown["metadata"] = metadata
    return shown


def manifest(parts: Parts, kind: str, namespace: str, name: str) -> web.Response:
    sources = parts.sources
    if sources is None:
        return error(503, "NoCache", "the controller has no Kubernetes API, so no cache")
    snapshot = sources.cache.snapshot()
    if kind not in snapshot.served:
        return error(404, "KindNotWatched", f"the controller does not watch {kind!r}")
    obj = snapshot.of(kind).get(("" if namespace == "_" else namespace, name))
    if obj is None:
        return error(404, "NotFound", f"no {kind} {namespace}/{name} in the controller's cache")
    return send(redact(kind, dict(obj)))
