"""`GET .../pods/<name>/log`: proxied to the kubelet of the Pod's node, as kube-apiserver does.

The real server looks up the Node named by the Pod's `spec.nodeName`, and forwards the request
to `https://<address>:<kubeletEndpoint port>/containerLogs/<ns>/<pod>/<container>` with
`follow`, `previous`, `tailLines`, `limitBytes`, `sinceSeconds` and `timestamps`, streaming the
answer back. Here the devkit node agent registers that Node with its plain-HTTP log endpoint
(`coxswain_devkit.node.logs`). A Pod on no node with a kubelet endpoint is answered with the text
a test set through `ApiServer.set_pod_log` (empty if none), so seeded Pods keep working.
The container is checked first, with kube-apiserver's wording: it must be named when the Pod
has several, and must be one of them.
"""

from __future__ import annotations

from typing import Any

import aiohttp
from aiohttp import web

from coxswain_devkit.apiserver import errors
from coxswain_devkit.apiserver.machinery import Machinery
from coxswain_devkit.apiserver.store import Key, Obj

__all__ = ["serve"]

_PASSED = ("follow", "previous", "tailLines", "limitBytes", "sinceSeconds", "timestamps")
_CONNECT = aiohttp.ClientTimeout(total=None, sock_connect=5)


def _container(pod: Obj, asked: str) -> str:
    names = [str(c.get("name")) for c in (pod.get("spec") or {}).get("containers") or []]
    name = pod["metadata"]["name"]
    if not asked:
        if len(names) > 1:
            raise errors.bad_request(
                f"a container name must be specified for pod {name}, choose one of: "
                f"[{' '.join(names)}]"
            )
        return names[0] if names else ""
    if names and asked not in names:
        raise errors.bad_request(f"container {asked} is not valid for pod {name}")
    return asked


def _kubelet(machinery: Machinery, pod: Obj) -> str | None:
    """The base URL of the kubelet of the Pod's node, if it has one."""
    node_name = (pod.get("spec") or {}).get("nodeName")
    node = machinery.store.get(Key("", "nodes", "", str(node_name))) if node_name else None
    status: dict[str, Any] = (node or {}).get("status") or {}
    port = ((status.get("daemonEndpoints") or {}).get("kubeletEndpoint") or {}).get("Port")
    addresses = [a for a in status.get("addresses") or [] if a.get("type") == "InternalIP"]
    if not port or not addresses:
        return None
    return f"http://{addresses[0]['address']}:{port}"


async def serve(machinery: Machinery, pod: Obj, request: web.Request) -> web.StreamResponse:
    meta = pod["metadata"]
    container = _container(pod, request.query.get("container", ""))
    kubelet = _kubelet(machinery, pod)
    if kubelet is None:
        return web.Response(
            text=machinery.store.pod_logs.get((meta["namespace"], meta["name"]), "")
        )
    url = f"{kubelet}/containerLogs/{meta['namespace']}/{meta['name']}/{container}"
    params = {k: v for k, v in request.query.items() if k in _PASSED}
    async with aiohttp.ClientSession(timeout=_CONNECT) as session:
        try:
            upstream = await session.get(url, params=params)
        except aiohttp.ClientError as err:
            raise errors.ApiError(
                500, "InternalError", f"error trying to reach the kubelet at {kubelet}: {err}"
            ) from err
        async with upstream:
            if upstream.status != 200:
                raise errors.bad_request((await upstream.text()).strip())
            return await _relay(upstream, request)


async def _relay(upstream: aiohttp.ClientResponse, request: web.Request) -> web.StreamResponse:
    response = web.StreamResponse(headers={"Content-Type": "text/plain"})
    await response.prepare(request)
    try:
        async for chunk in upstream.content.iter_any():
            await response.write(chunk)
        await response.write_eof()
    except (aiohttp.ClientError, ConnectionError):
        pass  # the kubelet or the reader went away: the stream simply ends
    return response
