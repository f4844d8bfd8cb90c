"""The proxies connected to this controller: who they are, what they acked, what they bound.

The status writer reads this to gate a Gateway's Programmed condition on bind + ack (spec 000);
the operator API reads it for the fleet view. A node is one live stream under one `node_id`,
registered only once its Subscribe has passed every check (`validate`).

Listeners run inside whichever stream changed a node. One that raises is logged and counted
and the others still run: a bug on the status side must not end the stream that happened to
trigger it, nor leave the node it was registering half there.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from prometheus_client import Counter

from coxswain_controller.translate.scopes import Identity, Scope

log = logging.getLogger(__name__)

__all__ = ["Nack", "Node", "NodeConflict", "NodeRegistry"]

LISTENER_ERRORS = Counter(
    "coxswain_discovery_node_listener_errors_total",
    "Failures of code told of node changes (the Programmed gate); the streams carried on.",
)


class NodeConflict(Exception):
    """A node_id already streaming under another identity."""


@dataclass(frozen=True, slots=True)
class Nack:
    """A snapshot the proxy refused, and why (its own words, already validated as text)."""

    version: str
    detail: str
    at: float = field(default_factory=time.time)


@dataclass(slots=True, eq=False)
class Node:
    node_id: str
    identity: Identity
    scope: Scope
    close: Callable[[str], None]  # ends this node's stream, saying why
    connected_at: float = field(default_factory=time.time)
    acked_version: str = ""
    acked_seq: int = 0
    bound: tuple[tuple[int, str], ...] = ()  # (port, protocol), as its last NodeStatus said
    last_nack: Nack | None = None  # the fleet view shows it: why the proxy refused a snapshot


class NodeRegistry:
    def __init__(self) -> None:
        self._nodes: dict[str, Node] = {}
        self._listeners: list[Callable[[], None]] = []

    def subscribe(self, listener: Callable[[], None]) -> None:
        """Call `listener()` whenever a node connects, leaves, acks or reports binds."""
        self._listeners.append(listener)

    def changed(self) -> None:
        for listener in list(self._listeners):
            try:
                listener()
            except Exception:
                LISTENER_ERRORS.inc()
                log.exception("a node-change listener failed")

    def register(self, node: Node) -> None:
        """Add `node`; a live stream with its id and identity is closed (a reconnect)."""
        live = self._nodes.get(node.node_id)
        if live is not None:
            if live.identity != node.identity:
                raise NodeConflict(
                    f"node_id {node.node_id!r} is already streaming as {live.identity}"
                )
            live.close("superseded by a new stream from the same node")
        self._nodes[node.node_id] = node
        self.changed()

    def unregister(self, node: Node) -> None:
        if self._nodes.get(node.node_id) is node:
            del self._nodes[node.node_id]
            self.changed()

    def get(self, node_id: str) -> Node | None:
        return self._nodes.get(node_id)

    def in_scope(self, scope: Scope) -> list[Node]:
        return [n for n in self._nodes.values() if n.scope == scope]

    def all(self) -> list[Node]:
        return list(self._nodes.values())
