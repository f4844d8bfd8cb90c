"""`/api/v1/health`'s subsystems: sources, leadership, discovery, translation, publish and
Gateway convergence.

The admin server's own document (service, version, ready, notReady, warnings) gets a
`subsystems` object beside it; each subsystem has a `state` an operator can read at a glance.
This document is open, so it names no object: convergence is given as counts and the slowest
latest time; `/api/v1/routing/gateways` has each Gateway's own.
"""

from __future__ import annotations

import time
from typing import Any

from coxswain_controller.api.context import Parts, rfc3339
from coxswain_controller.translate.result import GatewayVerdict

__all__ = ["health"]


def health(parts: Parts) -> dict[str, Any]:
    return {
        "subsystems": {
            "sources": _sources(parts),
            "leadership": {
                "state": "leader" if parts.leadership.is_leader else "standby",
                "leader": parts.leadership.is_leader,
            },
            "discovery": {
                "state": "listening" if parts.discovery_port is not None else "starting",
                "port": parts.discovery_port,
                "connectedProxies": len(parts.nodes.all()),
            },
            "translation": _translation(parts),
            "publish": _publish(parts),
            "convergence": _convergence(parts),
        }
    }


def _sources(parts: Parts) -> dict[str, Any]:
    sources = parts.sources
    if sources is None:
        return {"state": "absent", "gatewayApiServed": False, "kinds": {}, "referencedSecrets": 0}
    kinds = {
        name: {"synced": bool(r.resource_version), "resourceVersion": r.resource_version}
        for name, r in sorted(sources.reflectors.items())
    }
    synced = sources.cache.synced.is_set() and all(k["synced"] for k in kinds.values())
    return {
        "state": "synced" if synced else "syncing",
        "gatewayApiServed": sources.gateway_api_served,
        "kinds": kinds,
        # How many Secrets basic auth names, each watched alone (a count: this is open).
        "referencedSecrets": len(sources.secrets.watched),
    }


def _translation(parts: Parts) -> dict[str, Any]:
    last = parts.publisher.last_pass if parts.publisher is not None else None
    if last is None:
        return {"state": "pending", "seq": None, "durationMs": None, "at": None}
    return {
        "state": "failed" if last.failed else "ok",
        "seq": last.seq,
        "durationMs": last.translate_ms,
        "at": rfc3339(last.at),
    }


def _publish(parts: Parts) -> dict[str, Any]:
    registry = parts.registry
    last = parts.publisher.last_pass if parts.publisher is not None else None
    at = registry.published_at(registry.seq)
    return {
        "state": "published" if registry.seq else "pending",
        "seq": registry.seq,
        "durationMs": last.publish_ms if last is not None and not last.failed else None,
        "at": rfc3339(at),
        "ageMs": round((time.time() - at) * 1000) if at is not None else None,
        "scopes": len(registry.scopes()),
    }


def _convergence(parts: Parts) -> dict[str, Any]:
    publisher = parts.publisher
    result = publisher.result if publisher is not None else None
    if publisher is None or result is None:
        return {"state": "pending", "gateways": 0, "converging": 0, "slowestMs": None}
    held = [
        publisher.gate.convergence(v.ref.namespace, v.ref.name)
        for v in result.verdicts
        if isinstance(v, GatewayVerdict)
    ]
    done = [h.seconds for h in held if h is not None and h.seconds is not None]
    converging = len(held) - len(done)
    return {
        "state": "converging" if converging else "converged",
        "gateways": len(held),
        "converging": converging,
        "slowestMs": round(max(done) * 1000, 1) if done else None,
    }
