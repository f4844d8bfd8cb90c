"""`/api/v1/fleet` and `/api/v1/fleet/proxies/{name}/routes`: the connected proxies and what
each one serves.

A proxy's table is answered from the controller's own snapshot at the version that proxy
acked (the registry keeps the last few versions of each scope), so it shows what the proxy
serves, not what the controller would like it to serve.
"""

from __future__ import annotations

import time
from typing import Any

from aiohttp import web

from coxswain_controller.api import tables
from coxswain_controller.api.context import Parts, error, rfc3339, send
from coxswain_controller.discovery.nodes import Node

__all__ = ["proxy_json", "proxy_routes", "fleet"]


def proxy_json(parts: Parts, node: Node, now: float) -> dict[str, Any]:
    registry = parts.registry
    current = registry.current(node.scope)
    behind = current is not None and current.version != node.acked_version
    lag_seqs, lag_ms = 0, 0
    if behind and current is not None:
        lag_seqs = current.seq - node.acked_seq
        # Behind since the first version it has not acked was published.
        unacked = [r.seq for r in registry.versions(node.scope.key) if r.seq > node.acked_seq]
        since = registry.published_at(min(unacked) if unacked else current.seq)
        lag_ms = round((now - since) * 1000) if since is not None else 0
    nack = node.last_nack
    return {
        "nodeId": node.node_id,
        "identity": str(node.identity),
        "serviceAccount": {
            "namespace": node.identity.namespace,
            "name": node.identity.service_account,
        },
        "scope": str(node.scope),
        "scopeKey": node.scope.key,
        "acked": {"version": node.acked_version, "seq": node.acked_seq},
        "current": {"version": current.version, "seq": current.seq} if current else None,
        "lag": {"seqs": lag_seqs, "ms": lag_ms, "upToDate": not behind},
        "bound": [{"port": port, "protocol": proto} for port, proto in node.bound],
        "connectedAt": rfc3339(node.connected_at),
        "lastNack": (
            {"version": nack.version, "reason": nack.detail, "at": rfc3339(nack.at)}
            if nack is not None
            else None
        ),
    }


def fleet(parts: Parts) -> dict[str, Any]:
    now = time.time()
    nodes = sorted(parts.nodes.all(), key=lambda n: n.node_id)
    return {"seq": parts.registry.seq, "proxies": [proxy_json(parts, n, now) for n in nodes]}


def proxy_routes(parts: Parts, name: str) -> web.Response:
    node = parts.nodes.get(name)
    if node is None:
        return error(404, "NotConnected", f"no proxy {name!r} is connected")
    if not node.acked_version:
        return error(404, "NotAcked", f"proxy {name!r} has not acked a snapshot yet")
    retained = parts.registry.retained(node.scope.key, node.acked_version)
    if retained is None:
        return error(
            404,
            "AgedOut",
            f"proxy {name!r} serves version {node.acked_version} (seq {node.acked_seq}) of "
            f"{node.scope}, which the controller no longer keeps (it keeps the last few "
            "versions of each scope)",
        )
    return send(
        {
            "nodeId": node.node_id,
            "scope": str(node.scope),
            "version": retained.version,
            "seq": retained.seq,
            "publishedAt": rfc3339(retained.published_at),
            **tables.served_table(retained.resources),
        }
    )
