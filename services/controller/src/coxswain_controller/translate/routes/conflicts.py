"""HTTPRoute against GRPCRoute: which of two routes contending for one listener is served.

Where it sits: between `httproutes.prepare` and `httproutes.finish` in `stage.route_stage`,
once every HTTPRoute and GRPCRoute is attached and compiled, before any is served. Routes of one
kind never conflict here (their matches merge by precedence); routes of the two kinds cannot
share a host on one listener, since a request does not say which kind it is before it is routed.

Spec 003 "GRPCRoute": "An HTTPRoute and a GRPCRoute attached to one listener with intersecting
hostnames cannot both be served: the older is, and the newer is refused with Accepted: False and
reason RouteConflict". Gateway API GRPCRouteSpec.hostnames: "the implementation MUST accept
exactly one of these two routes, determined by the following criteria, in order: The oldest
Route based on creation timestamp. The Route appearing first in alphabetical order by
"{namespace}/{name}"." Routes are weighed oldest first, and a route conflicts only with what is
served: one that is itself refused (a filter it cannot honour, or a conflict it lost) takes no
listener from a newer route.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from coxswain_controller.translate.gateways.gateway_states import ListenerState
from coxswain_controller.translate.inputs import created, name, namespace
from coxswain_controller.translate.routes.httproutes import Prepared
from coxswain_routing import hostnames_overlap

__all__ = ["route_conflicts"]


@dataclass(frozen=True, slots=True)
class _Served:
    """A route served on a listener, for the hostnames it was accepted on there."""

    kind: str
    hostnames: tuple[str, ...]  # "" for every host
    who: str  # "HTTPRoute ns/name", for the loser's message


def route_conflicts(prepared: Sequence[Prepared]) -> list[dict[ListenerState, str]]:
    """For each of `prepared` (in its order), the listeners it loses and why; all empty when
    only one kind is present, which is the usual case and costs one pass over the kinds."""
    lost: list[dict[ListenerState, str]] = [{} for _ in prepared]
    if len({p.kind for p in prepared}) < 2:
        return lost
    served: dict[ListenerState, list[_Served]] = {}
    for index in sorted(range(len(prepared)), key=lambda i: _age(prepared[i])):
        route = prepared[index]
        if route.compiled.refused:
            continue  # not served: it holds no listener against anyone
        for outcome in route.outcomes:
            for attachment in outcome.attachments:
                here = served.setdefault(attachment.listener, [])
                winner = _older_rival(here, route.kind, attachment.hostnames)
                if winner is not None:
                    lost[index][attachment.listener] = (
                        f"the older {winner.who} is served on listener "
                        f"{attachment.listener.name} for an intersecting hostname"
                    )
                else:
                    here.append(_Served(route.kind, attachment.hostnames, _who(route)))
    return lost


def _older_rival(served: list[_Served], kind: str, hostnames: tuple[str, ...]) -> _Served | None:
    for other in served:
        if other.kind != kind and any(
            hostnames_overlap(a, b) for a in hostnames for b in other.hostnames
        ):
            return other
    return None


def _age(route: Prepared) -> tuple[int, str, str, str]:
    # Oldest first, then "{namespace}/{name}"; the kind only orders an HTTPRoute and a GRPCRoute
    # sharing a name, which the Gateway API leaves open.
    obj = route.route
    return (created(obj), namespace(obj), name(obj), route.kind)


def _who(route: Prepared) -> str:
    return f"{route.kind} {namespace(route.route)}/{name(route.route)}"
