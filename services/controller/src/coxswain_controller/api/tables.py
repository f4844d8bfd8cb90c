"""The compiled routing model as JSON: what a proxy serves, in the operator's terms.

A proxy's table is laid out port → host → rules, each rule with its matches, filters and
backends (weights, and the endpoints each backend's set holds now). Certificates and keys
never leave: every `bytes` field (PEM chains, private keys, CA bundles) is reported only by its
size, so a table can be shown to anyone allowed to read fleet data.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Iterable, Mapping
from typing import Any

from coxswain_routing import (
    ClientCaStore,
    EndpointSet,
    GatewayListeners,
    HostRoutes,
    Resource,
    Rule,
    StreamRoute,
    TlsStore,
)

__all__ = ["plain", "served_table"]


def plain(value: Any) -> Any:
    """A model value as JSON: dataclasses as objects (camelCase keys), enums by value, bytes
    by size only (`<field>Bytes`), a filter or other union member tagged with its `type`."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        out: dict[str, Any] = {}
        for f in dataclasses.fields(value):
            item = getattr(value, f.name)
            if isinstance(item, bytes):
                out[_camel(f.name) + "Bytes"] = len(item)
            else:
                out[_camel(f.name)] = plain(item)
        return out
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, (tuple, list)):
        return [plain(v) for v in value]
    if isinstance(value, bytes):
        return len(value)
    return value


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)


def _filter(value: Any) -> dict[str, Any]:
    return {"type": type(value).__name__, **plain(value)}


def rule_json(rule: Rule, endpoints: Mapping[str, EndpointSet]) -> dict[str, Any]:
    return {
        "route": route_id(rule.id),
        "matches": plain(rule.matches),
        "filters": [_filter(f) for f in rule.filters],
        "backends": [
            {
                **{k: v for k, v in plain(b).items() if k != "filters"},
                "filters": [_filter(f) for f in b.filters],
                "endpointsServed": plain(endpoints[b.endpoints].endpoints)
                if b.endpoints in endpoints
                else [],
            }
            for b in rule.backends
        ],
        "timeouts": plain(rule.timeouts),
        "retry": plain(rule.retry),
    }


def route_id(rid: Any) -> dict[str, Any]:
    return {
        "kind": rid.kind,
        "namespace": rid.namespace,
        "name": rid.name,
        "ruleIndex": rid.rule_index,
        "ruleName": rid.rule_name,
    }


def served_table(resources: Iterable[Resource]) -> dict[str, Any]:
    """`{"ports": [{"port", "hosts": [{"host", "table", "rules"}], "tls", "streams"}], ...}`."""
    resources = tuple(resources)
    endpoints = {r.key: r for r in resources if isinstance(r, EndpointSet)}
    ports: dict[int, dict[str, Any]] = {}

    def port(number: int) -> dict[str, Any]:
        return ports.setdefault(
            number, {"port": number, "hosts": [], "streams": [], "tls": None, "clientCa": None}
        )

    listeners = []
    for r in resources:
        if isinstance(r, HostRoutes):
            port(r.bind_port)["hosts"].append(
                {
                    "host": r.host or "*",
                    "table": r.table,
                    "listenerPort": r.listener_port or r.bind_port,
                    "wildcardScope": r.wildcard_scope.value,
                    "rules": [rule_json(rule, endpoints) for rule in r.rules],
                }
            )
        elif isinstance(r, StreamRoute):
            port(r.bind_port)["streams"].append(
                {
                    "protocol": r.protocol.value,
                    "matches": [
                        {
                            "route": route_id(m.id),
                            "serverName": m.server_name,
                            "backends": [
                                {
                                    **plain(b),
                                    "endpointsServed": plain(endpoints[b.endpoints].endpoints)
                                    if b.endpoints in endpoints
                                    else [],
                                }
                                for b in m.backends
                            ],
                        }
                        for m in r.matches
                    ],
                }
            )
        elif isinstance(r, TlsStore):
            port(r.bind_port)["tls"] = plain(r)
        elif isinstance(r, ClientCaStore):
            port(r.bind_port)["clientCa"] = plain(r)
        elif isinstance(r, GatewayListeners):
            listeners.append(plain(r))
    return {"ports": [ports[p] for p in sorted(ports)], "gateways": listeners}
