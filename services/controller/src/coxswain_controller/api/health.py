"""`/api/v1/health`'s subsystems: sources, leadership, discovery, translation, publish.

The admin server's own document (service, version, ready, notReady, warnings) gets a
`subsystems` object beside it; each subsystem has a `state` an operator can read at a glance.
"""

from __future__ import annotations

import time
from typing import Any

from coxswain_controller.api.context import Parts, rfc3339

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
        }
    }


def _sources(parts: Parts) -> dict[str, Any]:
    sources = parts.sources
    if sources is None:
        return {"state": "absent", "gatewayApiServed": False, "kinds": {}}
    kinds = {
        name: {"synced": bool(r.resource_version), "resourceVersion": r.resource_version}
        for name, r in sorted(sources.reflectors.items())
    }
    synced = sources.cache.synced.is_set() and all(k["synced"] for k in kinds.values())
    return {
        "state": "synced" if synced else "syncing",
        "gatewayApiServed": sources.gateway_api_served,
        "kinds": kinds,
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
