"""Stream routes contending for one listener or one server name: which route keeps it.

Where it sits: between `streamroutes.prepare` and `streamroutes.finish`, once every TCPRoute,
TLSRoute and UDPRoute is attached and compiled, before any is served. A stream port cannot
share a connection between routes the way an HTTP router shares a host by path, so what a
route is served for must belong to it alone.

Spec 003 "TCPRoute, TLSRoute and UDPRoute": "A TCP or UDP listener carries one route: the oldest
route naming it is served and every later one is refused with RouteConflict." "Listeners on one
port bind one socket, so each server name on a port belongs to one route, the oldest, however
many listeners on that port admitted it: a route admitted by a wildcard listener and a precise
one on the same port is served once there, a newer route that names only names already served
on the port is refused with RouteConflict, and one that names some is served for the rest and
told which it lost."

Which route is "the oldest" for a server name first asks how precisely each route named it: a
TLSRoute naming `*.example.com` narrowed to a listener's `abc.example.com` meets one naming
`abc.example.com` itself on the same name, and the Gateway API has the precise one win "despite
having newer creation timestamp" (the conformance test
TLSRouteMultipleRoutesAttachmentSameHostnameIntersection; the more specific of two wildcards
likewise); between routes naming it alike, the oldest wins, then "{namespace}/{name}". A route
that is itself refused (more than one rule, an unroutable hostname) holds nothing against
another.

Before any of that, a server name on a TLS port belongs to one listener: the Gateway API's
distinct listeners ("inbound request hostnames MUST match from the most specific to least
specific Hostname values to choose the correct Listener", gateway_types.go), so a name is served
only through the most specific TLS listener of the port whose hostname covers it. That listener
also says whether the name's connections are passed through or terminated, which is what lets a
Passthrough and a Terminate listener share a port (TLSRouteModeMixed). A route attached to the
less specific listener is still attached there; it is not served that name.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass

from coxswain_controller.translate.gateways.gateway_states import ListenerState
from coxswain_controller.translate.routes.attach import Attachment
from coxswain_controller.translate.routes.streamrules import StreamPrepared
from coxswain_routing import ListenerProtocol, host_pattern_covers, intersect_hostnames

__all__ = ["Lost", "owned", "served_names", "weigh"]

# What one route loses: (listener, server name) -> why ("" is the whole TCP or UDP listener).
Lost = dict[tuple[ListenerState, str], str]


@dataclass(frozen=True, slots=True)
class _Claim:
    precision: tuple[int, int]  # how precisely the route named what it claims
    age: tuple[int, str, str]  # the route's (creation, namespace, name)
    index: int  # the route, in `weigh`'s input

    @property
    def rank(self) -> tuple[object, ...]:
        """Lower wins: the more precise name, then the older route, then namespace/name."""
        return (-self.precision[0], -self.precision[1], self.age)


def weigh(prepared: Sequence[StreamPrepared]) -> list[Lost]:
    """For each of `prepared` (in its order), what it loses to another route, and why."""
    claims: dict[Hashable, list[_Claim]] = {}
    wanted: list[list[tuple[Hashable, ListenerState, str]]] = [[] for _ in prepared]
    for index, route in enumerate(prepared):
        if route.rule.refused:
            continue  # not served: it holds nothing against anyone
        for outcome in route.outcomes:
            for attachment in outcome.attachments:
                for name, declared in served_names(route, attachment).items():
                    key = _key(route.protocol, attachment, name)
                    claim = _Claim(_precision(declared), route.age, index)
                    claims.setdefault(key, []).append(claim)
                    wanted[index].append((key, attachment.listener, name))
    owners = {key: min(found, key=lambda c: c.rank) for key, found in claims.items()}
    lost: list[Lost] = [{} for _ in prepared]
    for index, keys in enumerate(wanted):
        for key, listener, name in keys:
            owner = owners[key]
            if owner.index != index:
                mine = next(c for c in claims[key] if c.index == index)
                lost[index][(listener, name)] = _why(prepared, owner, mine, listener, name)
    return lost


def served_names(route: StreamPrepared, attachment: Attachment) -> Mapping[str, str]:
    """Each server name `route` is served for through `attachment` ("" for every name, and for
    a TCP or UDP listener, where no name is read), with the route hostname that gave it ("":
    the route names none and takes the listener's)."""
    if route.protocol is not ListenerProtocol.TLS:
        return {"": ""}
    if not route.hostnames:
        return dict.fromkeys(owned(attachment, attachment.hostnames), "")
    best: dict[str, str] = {}
    for declared in route.hostnames:
        for name in intersect_hostnames(attachment.listener.hostname, [declared]):
            if name not in best or _precision(declared) > _precision(best[name]):
                best[name] = declared
    kept = owned(attachment, tuple(best))
    return {name: declared for name, declared in best.items() if name in kept}


def owned(attachment: Attachment, names: tuple[str, ...]) -> tuple[str, ...]:
    """Those of `names` (server names an attachment's TLS listener admits) that belong to that
    listener: no other TLS listener of its Gateway on the port covers them more precisely."""
    mine = attachment.listener
    others = [
        x
        for x in attachment.gateway.listeners
        if x is not mine and x.served and x.protocol == "TLS" and x.port == mine.port
    ]
    if not others:
        return names
    own = _precision(mine.hostname)
    return tuple(
        name
        for name in names
        if not any(_precision(x.hostname) > own and _covers(x.hostname, name) for x in others)
    )


def _covers(listener: str, name: str) -> bool:
    """Whether a listener hostname admits every connection a served name stands for."""
    if not name:
        return not listener
    if name.startswith("*."):
        return (
            listener == name
            or (listener.startswith("*.") and host_pattern_covers(listener, name[2:]))
            or not listener
        )
    return host_pattern_covers(listener, name)


def _key(protocol: ListenerProtocol, attachment: Attachment, name: str) -> Hashable:
    if protocol is ListenerProtocol.TLS:
        # One socket per bind port: every TLS listener of the Gateway on the port shares it.
        return (attachment.gateway.scope, attachment.listener.bind_port, name)
    return attachment.listener  # a TCP or UDP listener carries one route


def _precision(declared: str) -> tuple[int, int]:
    """How precisely a route hostname names what it covers: a precise name above any wildcard,
    a wildcard above a shorter one (`*.example.com` above `*.com`), naming none below all."""
    if not declared:
        return (0, 0)
    if declared.startswith("*."):
        return (1, declared.count("."))
    return (2, declared.count(".") + 1)


def _why(
    prepared: Sequence[StreamPrepared],
    owner: _Claim,
    mine: _Claim,
    listener: ListenerState,
    name: str,
) -> str:
    winner = prepared[owner.index].who
    if owner.precision > mine.precision:
        how = "names it more precisely"
    elif owner.age[0] == mine.age[0]:
        how = "is as old and first by namespace/name"
    else:
        how = "is older"
    if prepared[mine.index].protocol is not ListenerProtocol.TLS:
        return f"listener {listener.name} carries {winner}, which {how}"
    what = name or "every server name"
    return f"{what} on port {listener.port} is served by {winner}, which {how}"
