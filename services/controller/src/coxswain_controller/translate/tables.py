"""Collecting compiled rules into per-scope resources: host tables, stream ports, TLS stores,
listeners.

Translation stages add rules here as they accept routes; `resources()` then emits each scope's
resources in canonical order (sorted keys; rules by route identity), so that the same inputs
always produce the same bytes and hashes.

Why rules can be taken out again: a kept `products.Pass` holds these tables between passes and,
when only HTTPRoutes changed, withdraws the old version of each edited route (`remove`) and adds
the new one. So every addition returns a `Placement` that undoes it exactly, endpoint keys are
counted rather than collected, and `resources()` rebuilds only the hosts and scopes that changed:
an untouched host keeps its `HostRoutes` object, which the registry then recognises by identity
instead of re-encoding it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from coxswain_controller.translate.scopes import Scope
from coxswain_routing import (
    ClientCaStore,
    EndpointSet,
    GatewayListeners,
    HostRoutes,
    Listener,
    ListenerProtocol,
    Resource,
    Rule,
    StreamMatch,
    StreamRoute,
    TlsCertificate,
    TlsStore,
    WildcardScope,
)

__all__ = ["Placement", "ScopeTables"]

RuleKey = tuple[object, ...]


@dataclass
class _Host:
    table: str
    listener_port: int
    scope: WildcardScope
    rules: dict[RuleKey, Rule] = field(default_factory=dict)
    # How many placements put each rule here: a route whose two parentRefs select the same
    # listener adds its rules twice, and they stay until both are withdrawn.
    uses: dict[RuleKey, int] = field(default_factory=dict)
    built: HostRoutes | None = None  # the resource for the current rules, until they change


@dataclass
class _Scope:
    hosts: dict[tuple[int, str], _Host] = field(default_factory=dict)
    certificates: dict[int, list[TlsCertificate]] = field(default_factory=dict)
    client_cas: dict[str, ClientCaStore] = field(default_factory=dict)  # by key
    listeners: list[GatewayListeners] = field(default_factory=list)
    # Stream ports by (protocol, bind port), each server name's match ("" for TCP and UDP).
    streams: dict[tuple[ListenerProtocol, int], dict[str, StreamMatch]] = field(
        default_factory=dict
    )
    endpoint_keys: dict[str, int] = field(default_factory=dict)  # key -> how many rules use it
    built: tuple[Resource, ...] | None = None  # the scope's resources, until anything changes
    endpoint_sets: dict[str, EndpointSet] | None = None  # what `built` was made from


@dataclass(frozen=True, slots=True)
class Placement:
    """What one `add_rules` call put where, so that `ScopeTables.remove` can take it out."""

    scope: Scope
    host: tuple[int, str]  # (bind port, host)
    rules: tuple[RuleKey, ...]
    endpoint_keys: tuple[str, ...]  # one entry per use, repeats included


def rule_key(rule: Rule) -> RuleKey:
    rid = rule.id
    return (rid.creation_seconds, rid.namespace, rid.name, rid.kind, rid.rule_index)


def _endpoint_uses(rules: Iterable[Rule]) -> list[str]:
    uses = []
    for rule in rules:
        for backend in rule.backends:
            if backend.endpoints:
                uses.append(backend.endpoints)
        for flt in (*rule.filters, *(f for b in rule.backends for f in b.filters)):
            mirror = getattr(flt, "backend", None)
            if mirror is not None and mirror.endpoints:
                uses.append(mirror.endpoints)
        auth = rule.policy.external_auth if rule.policy is not None else None
        if auth is not None and auth.endpoints:
            uses.append(auth.endpoints)  # the external auth service's (policy)
    return uses


class ScopeTables:
    def __init__(self, *scopes: Scope) -> None:
        """`scopes` exist from the start, even with nothing in them (the shared pool)."""
        self._scopes: dict[Scope, _Scope] = {s: _Scope() for s in scopes}
        # Each rule as it goes into a table (CoxswainPolicies attach theirs: translate/policies).
        self.transform: Callable[[str, Rule], Rule] | None = None

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
    ) -> Placement:
        entry = self._scopes.setdefault(scope, _Scope())
        entry.built = None
        target = entry.hosts.setdefault(
            (bind_port, host), _Host(table, listener_port, wildcard_scope)
        )
        target.built = None
        keys = []
        transform = self.transform
        listed = [transform(table, r) for r in rules] if transform else list(rules)
        for rule in listed:
            key = rule_key(rule)
            target.rules[key] = rule
            target.uses[key] = target.uses.get(key, 0) + 1
            keys.append(key)
        uses = _endpoint_uses(listed)
        counts = entry.endpoint_keys
        for use in uses:
            counts[use] = counts.get(use, 0) + 1
        return Placement(scope, (bind_port, host), tuple(keys), tuple(uses))

    def remove(self, placement: Placement) -> None:
        """Undo one `add_rules`; a host left with no rules disappears, as it never was."""
        entry = self._scopes[placement.scope]
        entry.built = None
        target = entry.hosts[placement.host]
        target.built = None
        for key in placement.rules:
            left = target.uses[key] - 1
            if left:
                target.uses[key] = left
            else:
                del target.uses[key]
                del target.rules[key]
        if not target.rules:
            del entry.hosts[placement.host]
        counts = entry.endpoint_keys
        for use in placement.endpoint_keys:
            left = counts[use] - 1
            if left:
                counts[use] = left
            else:
                del counts[use]

    def add_stream(
        self, scope: Scope, protocol: ListenerProtocol, bind_port: int, match: StreamMatch
    ) -> None:
        """Serve `match` on a stream port. Stream routes are never patched (any change to one
        runs every stage), so nothing takes a match out again; each server name of a port has
        one match, which the routes stage settled (`routes.streamroutes`)."""
        entry = self._scopes.setdefault(scope, _Scope())
        entry.built = None
        port = entry.streams.setdefault((protocol, bind_port), {})
        if match.server_name in port:
            raise RuntimeError(f"server name {match.server_name!r} is served twice on {bind_port}")
        port[match.server_name] = match
        counts = entry.endpoint_keys
        for backend in match.backends:
            if backend.endpoints:
                counts[backend.endpoints] = counts.get(backend.endpoints, 0) + 1

    def endpoints_changed(self, keys: set[str]) -> None:
        """Endpoint sets with these keys were replaced: rebuild the scopes that carry them."""
        for entry in self._scopes.values():
            if any(k in keys for k in entry.endpoint_keys):
                entry.built = None

    def add_certificate(self, scope: Scope, bind_port: int, certificate: TlsCertificate) -> None:
        entry = self._scopes.setdefault(scope, _Scope())
        entry.built = None
        held = entry.certificates.setdefault(bind_port, [])
        if certificate not in held:
            held.append(certificate)

    def add_client_ca(self, scope: Scope, store: ClientCaStore) -> None:
        """How clients' certificates are checked on one HTTPS bind port (a Gateway's: its
        listeners share the Gateway's validation for that port), or for one TLS server name on
        it (an Ingress host's auth-tls-*): one store per key, so both kinds live side by side."""
        entry = self._scopes.setdefault(scope, _Scope())
        entry.built = None
        entry.client_cas[store.key] = store

    def add_listeners(
        self,
        scope: Scope,
        namespace: str,
        name: str,
        generation: int,
        listeners: list[Listener],
        backend_client_certificate: TlsCertificate | None = None,
    ) -> None:
        ordered = tuple(sorted(listeners, key=lambda x: (x.bind_port, x.protocol.value, x.name)))
        entry = self._scopes.setdefault(scope, _Scope())
        entry.built = None
        entry.listeners.append(
            GatewayListeners(namespace, name, generation, ordered, backend_client_certificate)
        )

    def resources(self, endpoint_sets: dict[str, EndpointSet]) -> dict[Scope, tuple[Resource, ...]]:
        out: dict[Scope, tuple[Resource, ...]] = {}
        for scope, entry in self._scopes.items():
            if entry.built is None or entry.endpoint_sets is not endpoint_sets:
                entry.built = _build(entry, endpoint_sets)
                entry.endpoint_sets = endpoint_sets
            out[scope] = entry.built
        return out


def _build(entry: _Scope, endpoint_sets: dict[str, EndpointSet]) -> tuple[Resource, ...]:
    resources: list[Resource] = []
    for (port, host), h in entry.hosts.items():
        if h.built is None:
            h.built = HostRoutes(
                h.table,
                port,
                host,
                tuple(h.rules[k] for k in sorted(h.rules)),
                h.listener_port,
                h.scope,
            )
        resources.append(h.built)
    for (protocol, port), matches in entry.streams.items():
        ordered = tuple(matches[name] for name in sorted(matches))
        resources.append(StreamRoute(port, protocol, ordered))
    for port, certificates in entry.certificates.items():
        default = certificates[0].source if certificates else ""
        resources.append(TlsStore(port, tuple(certificates), default))
    resources += entry.client_cas.values()
    resources += entry.listeners
    resources += [endpoint_sets[k] for k in entry.endpoint_keys if k in endpoint_sets]
    return tuple(sorted(resources, key=lambda r: r.key))
