"""Canary Ingresses matched to the main Ingress path each one splits.

ingress-nginx: a canary Ingress (`canary: "true"`) takes a share of the traffic of the main
Ingress serving the same host and path, "a maximum of one canary ingress can be applied per
Ingress rule", and the main's location (filters, timeouts, rewrite) serves both. Here the main
is the oldest served non-canary Ingress with that host and path, and it must share the canary's
namespace: a canary's Service is named from its own namespace, and letting an Ingress take a
share of another namespace's host is a door this controller does not open. A canary path with
no main, or whose main already has an older canary, is not served and says why.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from coxswain_controller.translate.ingress.plans import IngressPlan, PathPlan
from coxswain_controller.translate.inputs import namespace
from coxswain_controller.translate.result import Event

__all__ = ["CanaryPath", "MainKey", "attach", "main_key"]

INVALID_ANNOTATION = "InvalidAnnotation"

# A main Ingress path: (namespace, name, rule index).
MainKey = tuple[str, str, int]


@dataclass(frozen=True, slots=True)
class CanaryPath:
    plan: IngressPlan  # the canary Ingress
    path: PathPlan  # its path sharing the main's host and path


def main_key(plan: IngressPlan, path: PathPlan) -> MainKey:
    return (plan.ref.namespace, plan.ref.name, path.index)


def attach(plans: Sequence[IngressPlan]) -> tuple[dict[MainKey, CanaryPath], list[Event]]:
    """Each main path's canary, and an Event for every canary path left unserved. `plans` are
    oldest first."""
    owners: dict[tuple[str, str], list[tuple[IngressPlan, PathPlan]]] = {}
    for plan in plans:
        if plan.served and not plan.canary:
            for path in plan.paths:
                held = owners.setdefault((path.host, path.value), [])
                if not held or held[0][0] is plan:
                    held.append((plan, path))
    attached: dict[MainKey, CanaryPath] = {}
    events: list[Event] = []
    for plan in plans:
        if plan.served and plan.canary:
            for path in plan.paths:
                problem = _attach(plan, path, owners.get((path.host, path.value), []), attached)
                if problem is not None:
                    where = f"{path.host or '*'}{path.value}"
                    message = f"canary path {where} is not served: {problem}"
                    events.append(Event(plan.ref, plan.uid, "Warning", INVALID_ANNOTATION, message))
    return attached, events


def _attach(
    plan: IngressPlan,
    path: PathPlan,
    mains: list[tuple[IngressPlan, PathPlan]],
    attached: dict[MainKey, CanaryPath],
) -> str | None:
    if not mains:
        return "no served Ingress has this host and path to split"
    main = mains[0][0]
    if namespace(main.obj) != namespace(plan.obj):
        return f"its main Ingress {main.ref.namespace}/{main.ref.name} is in another namespace"
    for held_plan, held_path in mains:
        taken = attached.get(main_key(held_plan, held_path))
        if taken is not None and taken.plan is not plan:
            other = taken.plan.ref
            return f"the main Ingress already has the canary {other.namespace}/{other.name}"
    for held_plan, held_path in mains:
        attached[main_key(held_plan, held_path)] = CanaryPath(plan, path)
    return None
