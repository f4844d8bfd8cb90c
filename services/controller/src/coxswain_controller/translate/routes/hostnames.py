"""Route attachment by hostname: which names a route is served for on a listener.

Spec 003 "Route attachment and hostnames":
- "a listener with no hostname admits whatever the route names, or every hostname when the
  route names none;
- a route naming no hostname takes the listener's;
- otherwise each route hostname is kept when it equals the listener's or falls within its
  wildcard (*.example.com admits shop.example.com and deep.shop.example.com), and a wildcard
  route hostname is narrowed to a precise listener it covers."
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["intersect", "overlap"]


def _covers(wildcard: str, host: str) -> bool:
    """Whether `*.suffix` covers `host` (any number of labels, never the bare suffix)."""
    return host.endswith(wildcard[1:]) and len(host) > len(wildcard) - 1


def intersect(listener: str, route: Sequence[str]) -> list[str]:
    """The hostnames (`""` meaning every host) the route is served for on this listener."""
    if not route:
        return [listener]
    if not listener:
        return sorted(set(route))
    kept: set[str] = set()
    for host in route:
        if host == listener or (
            listener.startswith("*.") and not host.startswith("*.") and _covers(listener, host)
        ):
            kept.add(host)
        elif host.startswith("*.") and not listener.startswith("*.") and _covers(host, listener):
            kept.add(listener)
        elif host.startswith("*.") and listener.startswith("*."):
            if _covers(listener, host[2:]):
                kept.add(host)
            elif _covers(host, listener[2:]):
                kept.add(listener)
    return sorted(kept)


def overlap(a: str, b: str) -> bool:
    """Whether two listener hostnames (`""` for any host) can both claim some request host:
    the same name, a wildcard covering the other name, or no hostname at all."""
    if not a or not b or a == b:
        return True
    if a.startswith("*.") and _covers(a, b[2:] if b.startswith("*.") else b):
        return True
    return b.startswith("*.") and _covers(b, a[2:] if a.startswith("*.") else a)
