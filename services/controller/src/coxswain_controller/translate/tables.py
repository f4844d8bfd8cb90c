"""Collecting compiled rules into per-scope resources: host tables, TLS stores, listeners.

Translation stages add rules here as they accept routes; `resources()` then emits each scope's
resources in canonical order (sorted keys; rules by route identity), so that the same inputs
always produce the same bytes and hashes.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from coxswain_controller.discovery.scopes import Scope
from coxswain_routing import (
    EndpointSet,
    GatewayListeners,
    HostRoutes,
    Listener,
    Resource,
    Rule,
    TlsCertificate,
    TlsStore,
    WildcardScope,
)

__all__ = ["ScopeTables"]


@dataclass
class _Host:
    table: str
    listener_port: int
    scope: WildcardScope
    rules: dict[tuple[object, ...], Rule] = field(default_factory=dict)


@dataclass
class _Scope:
    hosts: dict[tuple[int, str], _Host] = field(default_factory=dict)
    certificates: dict[int, list[TlsCertificate]] = field(default_factory=dict)
    listeners: list[GatewayListeners] = field(default_factory=list)
    endpoint_keys: set[str] = field(default_factory=set)


class ScopeTables:
    def __init__(self) -> None:
        self._scopes: dict[Scope, _Scope] = {}

    def scope(self, scope: Scope) -> None:
        """Make sure `scope` exists, even with nothing in it (a dedicated Gateway's snapshot)."""
        self._scopes.setdefault(scope, _Scope())

    def add_rules(
        self,
        scope: Scope,
        *,
        table: str,
        bind_port: int,
        host: str,
        rules: Iterable[Rule],
        listener_port: int,
        wildcard_scope: WildcardScope = WildcardScope.ANY_LABELS,
    ) -> None:
        entry = self._scopes.setdefault(scope, _Scope())
        target = entry.hosts.setdefault(
            (bind_port, host), _Host(table, listener_port, wildcard_scope)
        )
        for rule in rules:
            rid = rule.id
            target.rules[
                (rid.creation_seconds, rid.namespace, rid.name, rid.kind, rid.rule_index)
            ] = rule
            for backend in rule.backends:
                if backend.endpoints:
                    entry.endpoint_keys.add(backend.endpoints)
            for flt in (*rule.filters, *(f for b in rule.backends for f in b.filters)):
                mirror = getattr(flt, "backend", None)
                if mirror is not None and mirror.endpoints:
                    entry.endpoint_keys.add(mirror.endpoints)

    def add_certificate(self, scope: Scope, bind_port: int, certificate: TlsCertificate) -> None:
        entry = self._scopes.setdefault(scope, _Scope())
        held = entry.certificates.setdefault(bind_port, [])
        if certificate not in held:
            held.append(certificate)

    def add_listeners(
        self, scope: Scope, namespace: str, name: str, generation: int, listeners: list[Listener]
    ) -> None:
        ordered = tuple(sorted(listeners, key=lambda x: (x.bind_port, x.protocol.value, x.name)))
        self._scopes.setdefault(scope, _Scope()).listeners.append(
            GatewayListeners(namespace, name, generation, ordered)
        )

    def resources(self, endpoint_sets: dict[str, EndpointSet]) -> dict[Scope, tuple[Resource, ...]]:
        out: dict[Scope, tuple[Resource, ...]] = {}
        for scope, entry in self._scopes.items():
            resources: list[Resource] = [
                HostRoutes(
                    h.table,
                    port,
                    host,
                    tuple(h.rules[k] for k in sorted(h.rules)),
                    h.listener_port,
                    h.scope,
                )
                for (port, host), h in entry.hosts.items()
            ]
            for port, certificates in entry.certificates.items():
                default = certificates[0].source if certificates else ""
                resources.append(TlsStore(port, tuple(certificates), default))
            resources += entry.listeners
            resources += [endpoint_sets[k] for k in entry.endpoint_keys if k in endpoint_sets]
            out[scope] = tuple(sorted(resources, key=lambda r: r.key))
        return out
