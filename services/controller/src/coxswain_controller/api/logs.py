"""`/api/v1/pods/{namespace}/{name}/logs`: a pod's log through the API server.

Bounded: `tailLines` (default 500, at most 5000) and at most 1 MiB, so one request cannot make
the controller hold a whole log. `container` and `previous` pass through.
"""

from __future__ import annotations

import asyncio
from typing import Any

from aiohttp import web

from coxswain_controller.api.context import Parts, error, send
from coxswain_controller.kube import api as kube

__all__ = ["logs"]

DEFAULT_TAIL = 500
MAX_TAIL = 5000
LIMIT_BYTES = 1 << 20


async def logs(parts: Parts, request: web.Request) -> web.Response:
    client = parts.client
    if client is None:
        return error(503, "NoKubernetesAPI", "the controller has no Kubernetes API")
    ns, name = request.match_info["namespace"], request.match_info["name"]
    try:
        tail = min(int(request.query.get("tailLines", DEFAULT_TAIL)), MAX_TAIL)
    except ValueError:
        return error(400, "BadRequest", "tailLines must be a number")
    query = [("tailLines", str(max(tail, 0))), ("limitBytes", str(LIMIT_BYTES))]
    container = request.query.get("container", "")
    if container:
        query.append(("container", container))
    if request.query.get("previous") == "true":
        query.append(("previous", "true"))
    path = kube.object_path("", "v1", "pods", ns, name, sub="log")
    try:
        text = await asyncio.to_thread(kube.request_text, client, path, query=query)
    except kube.KubeError as err:
        status = err.status if err.status in (400, 403, 404) else 502
        return error(status, "LogsUnavailable", err.message)
    return send(_document(ns, name, container, text))


def _document(ns: str, name: str, container: str, text: str) -> dict[str, Any]:
    return {
        "namespace": ns,
        "name": name,
        "container": container or None,
        "lines": text.splitlines(),
    }
