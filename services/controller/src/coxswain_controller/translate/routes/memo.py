"""Reusing compiled routes between passes: an edit recompiles what it touched, not everything.

Where it sits: the publisher keeps one `RouteMemo` across passes and hands it to `translate`.
Compiling a route's rules (HTTPRoute or GRPCRoute: matches, filters, backend resolution) is
most of a pass, and its result depends only on the route object and on the objects backends
resolve against (Services, EndpointSlices, ReferenceGrants, BackendTLSPolicies, ConfigMaps,
Secrets). Entries are keyed by kind as well as name. The watch cache never
mutates an object and swaps a kind's whole table when any object of that kind changes, so
"the same route object, resolved against the same tables" is an identity check. Translation stays
pure: with or without a memo it returns the same result (memo_test checks every golden case).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from coxswain_controller.translate.backends.resolver import BackendResolver
from coxswain_controller.translate.inputs import Inputs, Obj, name, namespace
from coxswain_controller.translate.routes.rules import RouteRules, compile_rules
from coxswain_routing import EndpointSet, RequestMirror, Rule

__all__ = ["RouteMemo", "RESOLVED_AGAINST"]

# The kinds a route's compiled rules depend on besides the route itself.
RESOLVED_AGAINST = (
    "EndpointSlice",
    "ReferenceGrant",
    "BackendTLSPolicy",
    "ConfigMap",
    "Secret",
)


@dataclass(frozen=True, slots=True)
class _Entry:
    route: Obj  # held, so its identity cannot be reused by another object
    tables: tuple[Mapping[Any, Any], ...]  # the tables it was resolved against, held likewise
    # The Services its references named, as they were (None: absent): a change to any other
    # Service leaves the entry good.
    services: tuple[tuple[tuple[str, str], Obj | None], ...]
    compiled: RouteRules
    endpoint_sets: Mapping[str, EndpointSet]


class RouteMemo:
    def __init__(self) -> None:
        self._entries: dict[tuple[str, str, str], _Entry] = {}
        self.hits = 0

    def compile(
        self, route: Obj, kind: str, resolver: BackendResolver, inputs: Inputs
    ) -> RouteRules:
        key = (kind, namespace(route), name(route))
        tables = tuple(inputs.table(k) for k in RESOLVED_AGAINST)
        entry = self._entries.get(key)
        if (
            entry is not None
            and entry.route is route
            and _same(entry.tables, tables)
            and all(inputs.get("Service", *named) is held for named, held in entry.services)
        ):
            self.hits += 1
            resolver.endpoint_sets.update(entry.endpoint_sets)
            return entry.compiled
        compiled = compile_rules(route, kind, resolver)
        sets = {
            k: resolver.endpoint_sets[k]
            for k in _endpoint_keys(compiled.rules)
            if k in resolver.endpoint_sets
        }
        services = tuple((named, inputs.get("Service", *named)) for named in compiled.services)
        self._entries[key] = _Entry(route, tables, services, compiled, sets)
        return compiled

    def __len__(self) -> int:
        return len(self._entries)

    def forget(self, key: tuple[str, str, str]) -> None:
        self._entries.pop(key, None)

    def keep_only(self, keys: Iterable[tuple[str, str, str]]) -> None:
        """Forget routes that no longer exist."""
        wanted = set(keys)
        for key in [k for k in self._entries if k not in wanted]:
            del self._entries[key]


def _same(a: tuple[Mapping[Any, Any], ...], b: tuple[Mapping[Any, Any], ...]) -> bool:
    return len(a) == len(b) and all(x is y for x, y in zip(a, b, strict=True))


def _endpoint_keys(rules: Iterable[Rule]) -> set[str]:
    keys: set[str] = set()
    for rule in rules:
        filters = [*rule.filters, *(f for b in rule.backends for f in b.filters)]
        backends = [*rule.backends, *(f.backend for f in filters if isinstance(f, RequestMirror))]
        keys.update(b.endpoints for b in backends if b.endpoints)
        auth = rule.policy.external_auth if rule.policy is not None else None
        if auth is not None and auth.endpoints:
            keys.add(auth.endpoints)  # an ExternalAuth filter's auth service
    return keys
