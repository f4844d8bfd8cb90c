"""ssl-passthrough: an Ingress host's TLS connections relayed unread to its backend, by the
server name the client offers, on the Ingress HTTPS port.

Where it sits: `ingresses` serves every Ingress with `ssl-passthrough: "true"` here instead of
lowering its paths into HTTP rules: each of its hosts becomes one `StreamMatch` of the HTTPS
port's TLS `StreamRoute`, which the proxy's HTTPS listener consults before any TLS (it reads the
ClientHello, and hands a passed-through name to a TLS relay), as ingress-nginx's TCP proxy sits
in front of nginx on port 443 and sends each server name it knows to its Service.

What ingress-nginx does, and so this: only the path "/" of a host is passed through ("Ignoring
SSL Passthrough for location ... in server"), to the Service port that path names; other paths
are ignored, each with an Event. A name is matched exactly (its TCP proxy compares the server
name with the host as written), so a wildcard host is never passed through, nor a rule without
a host. The oldest Ingress passing a host through keeps it; a younger one is told. Nothing of
the Ingress is served on the HTTP port (ingress-nginx would send the plain requests to the
Service port that speaks TLS), and another Ingress's paths on a passed-through host answer only
there: on the HTTPS port the name's connections never reach HTTP.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from coxswain_controller.translate.backends.resolver import BackendResolver
from coxswain_controller.translate.guard import MALFORMED, malformed_event
from coxswain_controller.translate.ingress import lowering
from coxswain_controller.translate.ingress.canaries import INVALID_ANNOTATION
from coxswain_controller.translate.ingress.plans import IngressPlan, PathPlan
from coxswain_controller.translate.inputs import created, namespace
from coxswain_controller.translate.result import Event
from coxswain_controller.translate.scopes import SHARED_POOL
from coxswain_controller.translate.tables import ScopeTables
from coxswain_routing import ListenerProtocol, RouteId, StreamMatch

__all__ = ["ROOT", "Passed", "pass_through", "passable", "serve"]

ROOT = "/"


@dataclass
class Passed:
    """What the passthrough Ingresses claimed, and what they and the others are told."""

    matches: dict[str, StreamMatch] = field(default_factory=dict)  # by server name
    owners: dict[str, IngressPlan] = field(default_factory=dict)  # by server name
    events: list[Event] = field(default_factory=list)


def pass_through(
    plans: Sequence[IngressPlan], ctx: lowering.Context, resolver: BackendResolver
) -> Passed:
    """Each served passthrough Ingress's hosts, oldest first (`plans` are)."""
    passed = Passed()
    for plan in plans:
        if plan.served and not plan.canary and plan.policy.passthrough:
            # Claimed apart, then kept whole: a field of the wrong shape found half-way (its
            # Service's, say) leaves none of this Ingress's hosts claimed, as `lowering` does.
            claimed = Passed(owners=dict(passed.owners))
            try:
                _claim(plan, ctx, resolver, claimed)
            except MALFORMED as exc:
                passed.events.append(malformed_event("Ingress", plan.obj, exc))
                continue
            passed.matches.update(claimed.matches)
            passed.owners.update(claimed.owners)
            passed.events += claimed.events
    for plan in plans:
        if not plan.policy.passthrough and plan.served:
            _shadowed(plan, passed)
    return passed


def serve(passed: Passed, tables: ScopeTables, port: int) -> None:
    for match in passed.matches.values():
        tables.add_stream(SHARED_POOL, ListenerProtocol.TLS, port, match)


def _warn(passed: Passed, plan: IngressPlan, reason: str, message: str) -> None:
    passed.events.append(Event(plan.ref, plan.uid, "Warning", reason, message))


def _claim(
    plan: IngressPlan, ctx: lowering.Context, resolver: BackendResolver, passed: Passed
) -> None:
    ignored: list[str] = []
    hosts = sorted({p.host for p in plan.paths if not p.default})
    for host in hosts:
        paths = [p for p in plan.paths if p.host == host and not p.default]
        root = next((p for p in paths if p.value == ROOT), None)
        ignored += [f"{host or '*'}{p.value}" for p in paths if p is not root]
        why = _unpassable(host, root)
        if why:
            _warn(passed, plan, INVALID_ANNOTATION, f"ssl-passthrough: {why}")
        elif root is not None and host in passed.owners:
            owner = passed.owners[host].ref
            message = (
                f"{host} is passed through for the older Ingress {owner.namespace}/{owner.name}"
            )
            _warn(passed, plan, "Conflicted", message)
        elif root is not None:
            _match(plan, host, root, ctx, resolver, passed)
    if any(p.default for p in plan.paths):
        ignored.append("the defaultBackend")
    if ignored:
        message = (
            "ssl-passthrough relays only the path / of a host (as ingress-nginx does); "
            f"ignored: {', '.join(ignored)}"
        )
        _warn(passed, plan, INVALID_ANNOTATION, message)


def passable(host: str) -> bool:
    """A host ingress-nginx's TCP proxy can match: a name, exactly."""
    return bool(host) and not host.startswith("*.")


def _unpassable(host: str, root: PathPlan | None) -> str:
    if not host:
        return "a rule without a host is never passed through: it names no server name"
    if host.startswith("*."):
        return (
            f"{host} is never passed through: ingress-nginx matches the server name exactly, "
            "so a wildcard host matches none"
        )
    if root is None:
        return f"{host} has no path /, the one ingress-nginx passes through"
    return ""


def _match(
    plan: IngressPlan,
    host: str,
    root: PathPlan,
    ctx: lowering.Context,
    resolver: BackendResolver,
    passed: Passed,
) -> None:
    if not root.backend.name:
        _warn(passed, plan, "Rejected", f"{host}/: only Service backends are supported")
        return
    ref = lowering.backend_ref(plan, root.backend, ctx, 1)
    resolved = resolver.resolve(ref, route_kind="TLSRoute", route_namespace=namespace(plan.obj))
    if resolved.problem is not None:
        # Kept, as an unresolved TLSRoute backendRef is: its connections are refused.
        _warn(passed, plan, "Rejected", f"{host}/: {resolved.problem[1]}")
    ident = RouteId(created(plan.obj), namespace(plan.obj), plan.ref.name, "Ingress", root.index)
    passed.matches[host] = StreamMatch(ident, (resolved.backend,), host, terminate=False)
    passed.owners[host] = plan


def _shadowed(plan: IngressPlan, passed: Passed) -> None:
    hosts = sorted({p.host for p in plan.paths if p.host in passed.owners})
    for host in hosts:
        owner = passed.owners[host].ref
        _warn(
            passed,
            plan,
            "Conflicted",
            f"{host}: its TLS connections are passed through for Ingress {owner.namespace}/"
            f"{owner.name} (ssl-passthrough), so this Ingress's paths there are served on the "
            "HTTP port only",
        )
