"""`Translator`: translation kept across passes, so an edit costs what it touches.

Where it sits: the publisher owns one `Translator` and calls `translate(inputs)` for every
debounced change. The watch cache never mutates an object and swaps a kind's whole table when
any object of that kind changes, so comparing tables by identity tells exactly which kinds
changed since the last pass. When only HTTPRoutes, GRPCRoutes, EndpointSlices or Services
did — route edits and endpoint churn, the everyday changes — the last `Pass` is patched
(`patch`); any other change runs every stage again (`pipeline.build`), still reusing compiled
routes through the `RouteMemo`. Either way the result equals what the pure `translate()`
returns for the same inputs (incremental_test checks it).
"""

from __future__ import annotations

from collections.abc import Mapping

from coxswain_controller.translate.inputs import KINDS, Inputs, Obj, Options, equivalent
from coxswain_controller.translate.pipeline import build
from coxswain_controller.translate.products import Pass
from coxswain_controller.translate.result import TranslateResult
from coxswain_controller.translate.routes.grpcroutes import KIND as GRPC_ROUTE
from coxswain_controller.translate.routes.httproutes import KIND as HTTP_ROUTE
from coxswain_controller.translate.routes.httproutes import http_route, withdraw
from coxswain_controller.translate.routes.memo import RouteMemo
from coxswain_controller.translate.routes.stage import route_stage

__all__ = ["PATCHABLE", "Translator", "changed_keys", "patch"]

# The kinds a `Pass` can absorb a change to without running every stage again.
PATCHABLE = frozenset({HTTP_ROUTE, GRPC_ROUTE, "EndpointSlice", "Service"})


class Translator:
    def __init__(self, options: Options) -> None:
        self._options = options
        self._memo = RouteMemo()
        self._last: Pass | None = None
        self.patched = 0  # passes answered by patching the previous one (for tests, metrics)

    def translate(self, inputs: Inputs) -> TranslateResult:
        last = self._last
        # `patch` may decline (nothing done): then every stage runs again.
        if (
            last is not None
            and self._patchable(last.inputs, inputs)
            and patch(last, inputs, self._memo)
        ):
            self.patched += 1
            return last.result()
        self._last = build(inputs, self._options, self._memo)
        return self._last.result()

    def reset(self) -> None:
        """Forget the kept pass (after a pass failed half way): the next one starts afresh."""
        self._last = None
        self._memo = RouteMemo()

    def _patchable(self, before: Inputs, after: Inputs) -> bool:
        # The published Service's status is the one status translation reads (its addresses).
        if _published_changed(self._options, before, after):
            return False
        return _changed_kinds(before, after) <= PATCHABLE


def patch(kept: Pass, inputs: Inputs, memo: RouteMemo | None = None) -> bool:
    """Move `kept` to `inputs`, which differ from `kept.inputs` only in the kinds of
    `PATCHABLE`; False (nothing done) when it cannot, and every stage must run again.

    EndpointSlices refresh the endpoint sets of their Services; a changed Service refreshes
    its endpoint sets and sends every route naming it through translation again, as does a
    change to the route itself (withdrawn, then translated anew). Ingress contributions are
    not kept apart, so a Service an Ingress names declines the patch, as does one a stream route
    (TCPRoute, TLSRoute, UDPRoute) names: those are never patched. While GRPCRoutes are in
    play, a route can win or lose a listener to a route of the other kind that did not change
    (`routes.conflicts`), so any route or Service change runs the whole routes stage again on
    the kept Gateways; compiled rules still come from the memo.
    """
    services = changed_keys(kept.inputs.table("Service"), inputs.table("Service"))
    if services & kept.ingress_services:
        return False
    # Stream routes are not patched either: a Service one names runs every stage.
    if any(services & c.services for c in kept.stream_routes.values()):
        return False
    old: Mapping[tuple[str, str], Obj] = kept.inputs.table(HTTP_ROUTE)
    new: Mapping[tuple[str, str], Obj] = inputs.table(HTTP_ROUTE)
    # A route whose new version differs only in status (our own write) translates alike.
    changed = [] if old is new else [k for k, r in new.items() if _edited(old.get(k), r)]
    changed += [k for k in old if k not in new]
    grpc = changed_keys(kept.inputs.table(GRPC_ROUTE), inputs.table(GRPC_ROUTE))
    together = bool(kept.grpc_routes or grpc)
    if services:
        edited = set(changed)
        changed += [k for k, c in kept.routes.items() if c.services & services and k not in edited]
        kept.tables.endpoints_changed(kept.resolver.refresh_services(inputs, services))
    if kept.inputs.table("EndpointSlice") is not inputs.table("EndpointSlice"):
        kept.tables.endpoints_changed(kept.resolver.refresh_endpoints(inputs))
    kept.inputs = inputs
    if together and (changed or grpc or services):
        _rerun_routes(kept, inputs, memo)
    else:
        _patch_routes(kept, changed, inputs, memo)
    return True


def _patch_routes(
    kept: Pass, changed: list[tuple[str, str]], inputs: Inputs, memo: RouteMemo | None
) -> None:
    """Withdraw and translate anew each changed HTTPRoute, where no GRPCRoute is in play."""
    new = inputs.table(HTTP_ROUTE)
    appended = False
    for key in changed:
        held = kept.routes.get(key)
        if held is not None:
            withdraw(held, kept.tables)
        route = new.get(key)
        contribution = None
        if route is not None:
            contribution = http_route(
                route, inputs, kept.gateways, kept.resolver, kept.tables, memo
            )
        if contribution is None:
            kept.routes.pop(key, None)
            if memo is not None:
                memo.forget((HTTP_ROUTE, *key))
        else:
            appended = appended or held is None
            kept.routes[key] = contribution  # an existing key keeps its place
    if appended:
        # The canonical (namespace, name) order a fresh pass produces.
        kept.routes = dict(sorted(kept.routes.items()))


def _rerun_routes(kept: Pass, inputs: Inputs, memo: RouteMemo | None) -> None:
    """Withdraw every route of both kinds and run the routes stage again on the kept pass."""
    for contribution in (*kept.routes.values(), *kept.grpc_routes.values()):
        withdraw(contribution, kept.tables)
    routes = route_stage(inputs, kept.gateways, kept.resolver, kept.tables, memo)
    kept.routes, kept.grpc_routes = routes.http, routes.grpc


def changed_keys(
    old: Mapping[tuple[str, str], Obj], new: Mapping[tuple[str, str], Obj]
) -> set[tuple[str, str]]:
    """The keys whose object was added, removed or changed other than in status."""
    if old is new:
        return set()
    found = {k for k, obj in new.items() if _edited(old.get(k), obj)}
    return found | {k for k in old if k not in new}


def _edited(held: Obj | None, route: Obj) -> bool:
    return held is not route and (held is None or not equivalent(held, route))


def _published_changed(options: Options, before: Inputs, after: Inputs) -> bool:
    key = options.published_key
    return key is not None and before.get("Service", *key) is not after.get("Service", *key)


def _changed_kinds(before: Inputs, after: Inputs) -> set[str]:
    """The kinds whose objects changed in a way translation can see.

    Translation never reads `status` or `metadata.resourceVersion`/`managedFields`, and this
    controller's own status writes change nothing else: a Gateway's status write would otherwise
    cost a full pass. Patchable kinds are compared object by object in `patch` itself.
    """
    changed = set()
    for kind in KINDS:
        old, new = before.table(kind), after.table(kind)
        if old is new:
            continue
        if kind in PATCHABLE or changed_keys(old, new):
            changed.add(kind)
    return changed
