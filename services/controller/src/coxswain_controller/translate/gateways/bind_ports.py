"""Bind ports: where the proxy listens for each Gateway listener.

Spec 002: a shared-mode Gateway's VIP Service "maps each of the Gateway's advertised listener
ports (e.g. :443) to its own distinct internal targetPort on that pod", and the proxy "uses the
local port a connection arrived on to decide which Gateway's routing/TLS tables apply".

A port is derived from a hash of (namespace, name, port), probing upward past ports already
taken, with Gateways visited oldest first: a new Gateway never moves an older Gateway's port,
so adding a Gateway never disturbs traffic to the others. A dedicated Gateway's own proxy binds
the declared port; it still holds its place in the shared range (`shared_bind_port`), where the
shared pool goes on serving it while it moves to its own proxies (translate/handover.py) and
where it lands again if it moves back.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

from coxswain_controller.translate.gateways.gateway_states import GatewayState
from coxswain_controller.translate.inputs import Options
from coxswain_controller.translate.scopes import SharedPool

__all__ = ["assign_bind_ports"]


def _slot(namespace: str, name: str, port: int, span: int) -> int:
    digest = hashlib.sha256(f"{namespace}/{name}/{port}".encode()).digest()
    return int.from_bytes(digest[:4], "big") % span


def assign_bind_ports(gateways: Iterable[GatewayState], options: Options) -> None:
    """Set `bind_port` and `shared_bind_port` on every listener (`gateways` must be oldest
    first)."""
    taken = {options.ingress_http_port, options.ingress_https_port}
    for gateway in gateways:
        chosen: dict[int, int] = {}
        shared = isinstance(gateway.scope, SharedPool)
        for listener in gateway.listeners:
            if listener.port not in chosen:
                chosen[listener.port] = _free(
                    gateway.namespace, gateway.name, listener.port, taken, options
                )
            listener.shared_bind_port = chosen[listener.port]
            listener.bind_port = listener.shared_bind_port if shared else listener.port


def _free(namespace: str, name: str, port: int, taken: set[int], options: Options) -> int:
    slot = _slot(namespace, name, port, options.shared_port_span)
    for step in range(options.shared_port_span):
        candidate = options.shared_port_base + (slot + step) % options.shared_port_span
        if candidate not in taken:
            taken.add(candidate)
            return candidate
    raise ValueError("no free bind port left for shared Gateways")
