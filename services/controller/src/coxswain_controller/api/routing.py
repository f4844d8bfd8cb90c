"""`/api/v1/routing/gateways[/{ns}/{name}]` and `/api/v1/routing/routes`: each Gateway and
each route as the controller serves it.

Its conditions and listeners (with attached-route counts) and addresses come from the last
pass's verdicts, Programmed gated on bind + ack as the status writer writes it; its attached
routes from the routes' parent verdicts; its per-host rules from the current snapshot of its
scope (the HostRoutes whose table is that Gateway's); its convergence (the latest generation's
time from first seen to Programmed: True) from the Programmed gate. Each route (HTTPRoute,
GRPCRoute, the stream routes, Ingress) carries its conditions per parent and the Events the
last pass raised about it.
"""

from __future__ import annotations

from typing import Any

from coxswain_controller.api import tables
from coxswain_controller.api.context import Parts, rfc3339
from coxswain_controller.translate.result import (
    Condition,
    Event,
    GatewayVerdict,
    IngressVerdict,
    RouteVerdict,
    Verdict,
)
from coxswain_routing import EndpointSet, GatewayListeners, HostRoutes

__all__ = ["conditions_json", "convergence_json", "gateway", "gateways", "routes"]


def conditions_json(conditions: tuple[Condition, ...]) -> list[dict[str, Any]]:
    return [
        {"type": c.type.value, "status": c.status, "reason": c.reason.value, "message": c.message}
        for c in conditions
    ]


def gateways(parts: Parts) -> dict[str, Any]:
    verdicts = parts.publisher.gated() if parts.publisher is not None else []
    return {
        "gateways": [
            _gateway(parts, v, verdicts) for v in verdicts if isinstance(v, GatewayVerdict)
        ]
    }


def gateway(parts: Parts, namespace: str, name: str) -> dict[str, Any] | None:
    verdicts = parts.publisher.gated() if parts.publisher is not None else []
    for v in verdicts:
        if isinstance(v, GatewayVerdict) and (v.ref.namespace, v.ref.name) == (namespace, name):
            return _gateway(parts, v, verdicts)
    return None


def _gateway(parts: Parts, v: GatewayVerdict, verdicts: list[Verdict]) -> dict[str, Any]:
    ns, name = v.ref.namespace, v.ref.name
    retained = parts.registry.retained(v.scope.key)
    resources = retained.resources if retained is not None else ()
    endpoints = {r.key: r for r in resources if isinstance(r, EndpointSet)}
    table = f"gateway/{ns}/{name}"
    binds = next(
        (
            r
            for r in resources
            if isinstance(r, GatewayListeners) and (r.namespace, r.name) == (ns, name)
        ),
        None,
    )
    bind_of = {x.name: x for x in binds.listeners} if binds is not None else {}
    return {
        "namespace": ns,
        "name": name,
        "generation": v.generation,
        "scope": str(v.scope),
        "conditions": conditions_json(v.conditions),
        "addresses": [{"type": t, "value": a} for t, a in v.addresses or ()],
        "listeners": [
            {
                "name": lv.name,
                "port": bind_of[lv.name].port if lv.name in bind_of else None,
                "bindPort": bind_of[lv.name].bind_port if lv.name in bind_of else None,
                "protocol": bind_of[lv.name].protocol.value if lv.name in bind_of else None,
                "hostname": bind_of[lv.name].hostname if lv.name in bind_of else None,
                "supportedKinds": list(lv.supported_kinds),
                "attachedRoutes": lv.attached_routes,
                "conditions": conditions_json(lv.conditions),
            }
            for lv in v.listeners
        ],
        "convergence": convergence_json(parts, ns, name),
        "routes": _attached(verdicts, ns, name),
        "hosts": [
            {
                "bindPort": r.bind_port,
                "listenerPort": r.listener_port or r.bind_port,
                "host": r.host or "*",
                "rules": [tables.rule_json(rule, endpoints) for rule in r.rules],
            }
            for r in resources
            if isinstance(r, HostRoutes) and r.table == table
        ],
    }


def _attached(verdicts: list[Verdict], ns: str, name: str) -> list[dict[str, Any]]:
    out = []
    for v in verdicts:
        if not isinstance(v, RouteVerdict):
            continue
        for parent in v.parents:
            ref = parent.parent_ref
            if ref.get("name") != name or ref.get("namespace", v.ref.namespace) != ns:
                continue
            if ref.get("kind", "Gateway") != "Gateway":
                continue
            out.append(
                {
                    "kind": v.ref.kind,
                    "namespace": v.ref.namespace,
                    "name": v.ref.name,
                    "sectionName": ref.get("sectionName"),
                    "port": ref.get("port"),
                    "conditions": conditions_json(parent.conditions),
                }
            )
    return out


def convergence_json(parts: Parts, namespace: str, name: str) -> dict[str, Any] | None:
    """`{"generation", "seenAt", "converged", "durationMs"}` for the latest generation seen."""
    held = parts.publisher.gate.convergence(namespace, name) if parts.publisher else None
    if held is None:
        return None
    return {
        "generation": held.generation,
        "seenAt": rfc3339(held.seen_at),
        "converged": held.seconds is not None,
        "durationMs": round(held.seconds * 1000, 1) if held.seconds is not None else None,
    }


def routes(parts: Parts) -> dict[str, Any]:
    publisher = parts.publisher
    if publisher is None or publisher.result is None:
        return {"routes": []}
    events: dict[str, list[Event]] = {}
    for e in publisher.result.events:
        events.setdefault(e.uid, []).append(e)
    found = []
    for v in publisher.gated():
        if isinstance(v, RouteVerdict):
            parents = [
                {"parentRef": dict(p.parent_ref), "conditions": conditions_json(p.conditions)}
                for p in v.parents
            ]
            addresses: list[dict[str, str]] = []
        elif isinstance(v, IngressVerdict):
            parents, addresses = [], [{"type": t, "value": a} for t, a in v.addresses]
        else:
            continue
        found.append(
            {
                "kind": v.ref.kind,
                "namespace": v.ref.namespace,
                "name": v.ref.name,
                "generation": v.generation,
                "parents": parents,
                "addresses": addresses,
                "events": [
                    {"type": e.type, "reason": e.reason, "message": e.message}
                    for e in events.get(v.uid, [])
                ],
            }
        )
    found.sort(key=lambda r: (r["namespace"], r["name"], r["kind"]))
    return {"routes": found}
