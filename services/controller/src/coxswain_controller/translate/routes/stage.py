"""The routes stage: every HTTPRoute and GRPCRoute, attached, weighed and served.

Where it sits: `pipeline.build` runs it once every listener is final (attachment reads each
listener's port, hostname and allowed kinds, and counts what it attaches), and
`incremental.patch` runs it again on a kept pass when routes change while GRPCRoutes are in
play. The two kinds run together because they decide each other's acceptance: an HTTPRoute and a
GRPCRoute on one listener with intersecting hostnames cannot both be served (`conflicts`). So
every route is first attached and compiled (`httproutes.prepare`), then the contenders are
weighed, and only then is each served (`httproutes.finish`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from coxswain_controller.translate.backends.resolver import BackendResolver
from coxswain_controller.translate.gateways.gateway_states import GatewayState
from coxswain_controller.translate.inputs import Inputs
from coxswain_controller.translate.routes import grpcroutes, httproutes
from coxswain_controller.translate.routes.conflicts import route_conflicts
from coxswain_controller.translate.routes.httproutes import Prepared, RouteContribution
from coxswain_controller.translate.routes.memo import RouteMemo
from coxswain_controller.translate.tables import ScopeTables

__all__ = ["KINDS", "Routes", "route_stage"]

# The route kinds this stage translates, in the order their verdicts are reported.
KINDS = (httproutes.KIND, grpcroutes.KIND)

Contributions = dict[tuple[str, str], RouteContribution]


@dataclass(slots=True)
class Routes:
    """What the stage added, per kind, by (namespace, name) in that order."""

    http: Contributions
    grpc: Contributions


def route_stage(
    inputs: Inputs,
    gateways: Mapping[tuple[str, str], GatewayState],
    resolver: BackendResolver,
    tables: ScopeTables,
    memo: RouteMemo | None = None,
) -> Routes:
    """Every route of `KINDS` naming a Gateway of ours, served into `tables`; `memo` forgets
    the routes that are gone."""
    found: dict[str, Contributions] = {kind: {} for kind in KINDS}
    pending: list[tuple[str, tuple[str, str], Prepared]] = []
    for kind in KINDS:
        table = inputs.table(kind)
        for key in sorted(table):
            prepared = httproutes.prepare(table[key], kind, inputs, gateways, resolver, memo)
            if isinstance(prepared, Prepared):
                pending.append((kind, key, prepared))
            elif prepared is not None:
                found[kind][key] = prepared  # could not be read: its Event alone
    lost = route_conflicts([p for _, _, p in pending])
    for (kind, key, prepared), conflicts in zip(pending, lost, strict=True):
        found[kind][key] = httproutes.finish(prepared, tables, conflicts)
    if memo is not None:
        memo.keep_only((kind, ns, n) for kind in KINDS for ns, n in inputs.table(kind))
    return Routes(
        http=dict(sorted(found[httproutes.KIND].items())),
        grpc=dict(sorted(found[grpcroutes.KIND].items())),
    )
