"""The echo backend's HTTP side: every request answered with JSON describing it.

The body has the shape the Gateway API conformance suite's echo server returns (`path` is the
request URI with its query, `headers` maps each name to its list of values, plus `namespace`,
`pod` and friends), so conformance-style assertions work against it; `query` and `protocol` are
added for Coxswain's own tests. A request asking to upgrade to WebSocket gets a WebSocket that
echoes every message. `X-Echo-Set-Header: Name: value` (repeatable) adds response headers, as the
conformance echo server does, so tests can check response-header filters.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from aiohttp import WSMsgType, web


@dataclass(frozen=True, slots=True)
class Identity:
    namespace: str  # the namespace this backend says it runs in
    pod: str  # the pod name it reports
    service: str = ""  # the Service it stands behind, if known


def describe(request: web.Request, identity: Identity, *, protocol: str) -> dict[str, Any]:
    headers: dict[str, list[str]] = {}
    for name, value in request.headers.items():
        headers.setdefault(name, []).append(value)
    query: dict[str, list[str]] = {}
    for name, value in request.query.items():
        query.setdefault(name, []).append(value)
    return {
        "path": str(request.rel_url),
        "host": request.host,
        "method": request.method,
        "proto": protocol,
        "protocol": protocol,
        "headers": headers,
        "query": query,
        "namespace": identity.namespace,
        "ingress": "",
        "service": identity.service,
        "pod": identity.pod,
    }


def _extra_headers(request: web.Request) -> dict[str, str]:
    extra = {}
    for spec in request.headers.getall("X-Echo-Set-Header", []):
        for item in spec.split(","):
            name, _, value = item.partition(":")
            if name.strip():
                extra[name.strip()] = value.strip()
    return extra


def application(identity: Identity) -> web.Application:
    async def echo(request: web.Request) -> web.StreamResponse:
        if request.headers.get("Upgrade", "").lower() == "websocket":
            return await _websocket(request)
        await request.read()
        protocol = f"HTTP/{request.version.major}.{request.version.minor}"
        body = describe(request, identity, protocol=protocol)
        return web.json_response(body, headers=_extra_headers(request))

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", echo)
    return app


async def _websocket(request: web.Request) -> web.WebSocketResponse:
    ws = web.WebSocketResponse()
    await ws.prepare(request)
    async for message in ws:
        if message.type == WSMsgType.TEXT:
            await ws.send_str(message.data)
        elif message.type == WSMsgType.BINARY:
            await ws.send_bytes(message.data)
    return ws
