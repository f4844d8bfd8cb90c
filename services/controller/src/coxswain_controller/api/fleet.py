"""`/api/v1/fleet` and `/api/v1/fleet/proxies/{name}/routes`: the connected proxies and what
each one serves.

A proxy's table is answered from the controller's own snapshot at the version that proxy
acked (the registry keeps the last few versions of each scope), so it shows what the proxy
serves, not what the controller would like it to serve.

Proxies that left are listed too, under `disconnected` (`Departures`): the node registry
forgets a stream when it ends, but an operator asking "where did my proxy go" needs to see
that it was here, what it last acked and when it left. The list is this controller's memory
(the last DEPARTED_KEPT, for at most DEPARTED_SECONDS), so it starts empty after a restart.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from aiohttp import web

from coxswain_controller.api import tables
from coxswain_controller.api.context import Parts, error, rfc3339, send
from coxswain_controller.discovery.nodes import Node, NodeRegistry

__all__ = ["Departures", "proxy_json", "proxy_routes", "fleet"]

DEPARTED_KEPT = 32
DEPARTED_SECONDS = 3600.0


class Departures:
    """The proxies whose streams ended, told by the node registry's change callback.

    Every register and unregister calls back, so a departure is always seen as the count of
    nodes going down; acks and binds (the common calls) cost one length check. (A proxy that
    reconnected under its id and then left is shown as its first stream last was.)"""

    def __init__(self, nodes: NodeRegistry, clock: Callable[[], float] = time.time) -> None:
        self._nodes = nodes
        self._clock = clock
        self._known: dict[str, Node] = {}
        self._gone: dict[str, tuple[Node, float]] = {}  # node id -> (its last state, left at)
        nodes.subscribe(self._changed)

    def _changed(self) -> None:
        live = self._nodes.all()
        if len(live) == len(self._known):  # an ack, a bind, or a stream superseding its own id
            return
        now = self._clock()
        current = {n.node_id: n for n in live}
        for node_id, node in self._known.items():
            if node_id not in current:
                self._gone[node_id] = (node, now)
        for node_id in current:
            self._gone.pop(node_id, None)
        self._known = current
        while len(self._gone) > DEPARTED_KEPT:
            del self._gone[next(iter(self._gone))]

    def departed(self, now: float) -> list[tuple[Node, float]]:
        """The proxies that left, most recent first (those gone longer than DEPARTED_SECONDS
        are dropped)."""
        for node_id, (_, at) in list(self._gone.items()):
            if now - at > DEPARTED_SECONDS:
                del self._gone[node_id]
        return sorted(self._gone.values(), key=lambda item: -item[1])


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


def fleet(parts: Parts, departures: Departures | None = None) -> dict[str, Any]:
    now = time.time()
    nodes = sorted(parts.nodes.all(), key=lambda n: n.node_id)
    gone = departures.departed(now) if departures is not None else []
    return {
        "seq": parts.registry.seq,
        "proxies": [proxy_json(parts, n, now) for n in nodes],
        "disconnected": [_departed(n, at) for n, at in gone],
    }


def _departed(node: Node, at: float) -> dict[str, Any]:
    return {
        "nodeId": node.node_id,
        "identity": str(node.identity),
        "scope": str(node.scope),
        "acked": {"version": node.acked_version, "seq": node.acked_seq},
        "connectedAt": rfc3339(node.connected_at),
        "disconnectedAt": rfc3339(at),
    }


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
