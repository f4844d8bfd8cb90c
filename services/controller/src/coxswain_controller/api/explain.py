"""`/api/v1/explain`: why a request goes where it goes, from the snapshot a proxy serves.

Given a Gateway (`gateway=ns/name`, its advertised `port`) or a proxy (`proxy=node id`, a bound
`port`), a host, a method, a path, headers and a query string, it compiles the routes of that
snapshot with `coxswain_routing.compile_router` and asks `coxswain_routing.explain`: the
winning route and rule (or the 404/500 and why), its backends, the listener that claimed the
request (`claimedBy`, listener isolation), and every other candidate with the reason it lost.
For a Gateway, the snapshot is the one a connected proxy of its scope acked (the controller's
current one when none is connected).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from coxswain_controller.api import tables
from coxswain_controller.api.context import Parts, error, send
from coxswain_controller.discovery.registry import Retained
from coxswain_controller.translate.scopes import SHARED_POOL, GatewayScope, Scope
from coxswain_routing import Candidate, GatewayListeners, Router, compile_router, explain

__all__ = ["Explainer", "Question"]

_ROUTERS_KEPT = 16


@dataclass(frozen=True, slots=True)
class Question:
    gateway: str  # "ns/name", or ""
    proxy: str  # a node id, or ""
    port: int
    host: str
    method: str
    path: str
    headers: Mapping[str, str]
    query: str

    @classmethod
    def parse(cls, data: Mapping[str, Any], headers: Mapping[str, str]) -> Question:
        return cls(
            gateway=str(data.get("gateway", "")),
            proxy=str(data.get("proxy", "")),
            port=int(data.get("port", 0)),
            host=str(data.get("host", "")),
            method=str(data.get("method", "GET")).upper(),
            path=str(data.get("path", "/")),
            headers={k.lower(): str(v) for k, v in headers.items()},
            query=str(data.get("query", "")),
        )


class Explainer:
    def __init__(self, parts: Parts) -> None:
        self._parts = parts
        self._routers: dict[tuple[str, str], Router] = {}  # (scope, version) -> compiled

    def answer(self, q: Question) -> web.Response:
        found = self._snapshot(q)
        if isinstance(found, web.Response):
            return found
        scope, retained = found
        listener, bind_port = self._listener(scope, retained, q)
        if bind_port is None:
            return error(404, "NoListener", f"{scope} has no listener on port {q.port}")
        verdict = explain(
            self._router(scope, retained), bind_port, q.host, q.method, q.path, q.headers, q.query
        )
        return send(
            {
                "scope": str(scope),
                "version": retained.version,
                "seq": retained.seq,
                "listener": listener,
                # Listener isolation: the one listener whose routes may answer the request.
                "claimedBy": _claimed(verdict.listener, verdict.listener_hostname),
                "bindPort": bind_port,
                "path": verdict.path,
                "outcome": _outcome(verdict.outcome),
                "candidates": [
                    {
                        "route": tables.route_id(c.route),
                        "matchIndex": c.match_index,
                        "host": c.host or "*",
                        "verdict": c.verdict,
                    }
                    for c in verdict.candidates
                ],
            }
        )

    def _snapshot(self, q: Question) -> tuple[Scope, Retained] | web.Response:
        nodes, registry = self._parts.nodes, self._parts.registry
        if q.proxy:
            node = nodes.get(q.proxy)
            if node is None:
                return error(404, "NotConnected", f"no proxy {q.proxy!r} is connected")
            kept = registry.retained(node.scope.key, node.acked_version)
            if kept is None:
                return error(404, "AgedOut", f"proxy {q.proxy!r}'s snapshot is no longer kept")
            return node.scope, kept
        ns, _, name = q.gateway.partition("/")
        if not ns or not name:
            return error(400, "BadRequest", "give gateway=namespace/name or proxy=node id")
        scope = self._scope_of(ns, name)
        if scope is None:
            return error(404, "NotFound", f"no Gateway {ns}/{name} is served")
        acked = [n for n in nodes.in_scope(scope) if n.acked_version]
        version = max(acked, key=lambda n: n.acked_seq).acked_version if acked else None
        kept = registry.retained(scope.key, version) or registry.retained(scope.key)
        if kept is None:
            return error(404, "NotPublished", f"nothing is published for {scope}")
        return scope, kept

    def _scope_of(self, ns: str, name: str) -> Scope | None:
        dedicated = GatewayScope(ns, name)
        for key in self._parts.registry.scopes():
            kept = self._parts.registry.retained(key)
            if kept is None:
                continue
            for r in kept.resources:
                if isinstance(r, GatewayListeners) and (r.namespace, r.name) == (ns, name):
                    return dedicated if key == dedicated.key else SHARED_POOL
        return None

    def _listener(
        self, scope: Scope, kept: Retained, q: Question
    ) -> tuple[list[dict[str, Any]], int | None]:
        if q.proxy:
            return [], q.port
        ns, _, name = q.gateway.partition("/")
        for r in kept.resources:
            if isinstance(r, GatewayListeners) and (r.namespace, r.name) == (ns, name):
                hits = [x for x in r.listeners if x.port == q.port]
                if hits:
                    shown = [{"name": x.name, "protocol": x.protocol.value} for x in hits]
                    return shown, hits[0].bind_port
        return [], None

    def _router(self, scope: Scope, kept: Retained) -> Router:
        key = (scope.key, kept.version)
        router = self._routers.get(key)
        if router is None:
            router = self._routers[key] = compile_router(kept.resources)
            while len(self._routers) > _ROUTERS_KEPT:
                del self._routers[next(iter(self._routers))]
        return router


def _claimed(listener: str, hostname: str | None) -> dict[str, str] | None:
    if hostname is None:
        return None  # no listener on the port covers the host (or the port has none)
    return {"listener": listener, "hostname": hostname or "*"}


def _outcome(outcome: Any) -> dict[str, Any]:
    if isinstance(outcome, Candidate):
        return {
            "status": outcome.status,
            "reason": outcome.reason,
            "route": tables.route_id(outcome.rule.id),
            "matchIndex": outcome.match_index,
            "host": outcome.routes.host or "*",
            "backends": [
                {
                    "weight": b.weight,
                    "endpoints": b.endpoints,
                    "unresolvedReason": b.unresolved_reason,
                }
                for b in outcome.rule.backends
            ],
        }
    return {"status": outcome.status, "reason": outcome.reason, "route": None, "backends": []}
