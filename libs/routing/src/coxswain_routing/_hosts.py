"""Host normalisation, the wildcard rule, and the hostname intersection built on it.

Spec 003 "Matches and precedence": requests are resolved "by host first — the exact hostname,
then wildcards covering it from the nearest label boundary outward, then hostless routes".
A Gateway API wildcard (`*.example.com`) covers any number of labels; an Ingress wildcard
covers exactly one (Kubernetes Ingress: "*.foo.com" matches "bar.foo.com" but not
"baz.bar.foo.com"). Neither covers the bare suffix (`example.com`).

The one rule (`host_pattern_covers`) serves all three places that need it: the controller
attaching routes to listeners and finding overlapping listeners (`intersect_hostnames`,
`hostnames_overlap`), the proxy choosing the listener a TLS server name selected, and the
matcher's host tiers. Listener isolation (`claiming_hostname`) is the same rule read from the
other side: of a port's listener hostnames, the most specific one covering a host claims it,
for the controller dropping what another listener claims and for the matcher alike.
"""

from __future__ import annotations

from collections.abc import Container, Sequence

__all__ = [
    "normalize_host",
    "wildcard_suffixes",
    "host_pattern_covers",
    "intersect_hostnames",
    "hostnames_overlap",
    "claiming_hostname",
]


def normalize_host(host: str) -> str:
    """Lower-case, without port or trailing dot; IPv6 literals keep their brackets."""
    if ":" not in host and not host.endswith("."):
        return host.lower()
    if host.startswith("["):
        end = host.find("]")
        return host[: end + 1].lower() if end > 0 else host.lower()
    colon = host.rfind(":")
    if colon >= 0:
        host = host[:colon]
    if host.endswith("."):
        host = host[:-1]
    return host.lower()


def wildcard_suffixes(host: str) -> list[tuple[str, int]]:
    """(suffix, labels covered) for each wildcard that could cover `host`, nearest first.

    `a.b.example.com` gives (`b.example.com`, 1), (`example.com`, 2), (`com`, 3).
    """
    suffixes = []
    start = host.find(".")
    depth = 1
    while start >= 0:
        suffixes.append((host[start + 1 :], depth))
        start = host.find(".", start + 1)
        depth += 1
    return suffixes


def host_pattern_covers(pattern: str, host: str, *, one_label: bool = False) -> bool:
    """Whether an exact, wildcard or empty (every host) pattern covers a normalised host."""
    if not pattern:
        return True
    if not pattern.startswith("*."):
        return pattern == host
    suffix = pattern[1:]  # ".example.com"
    if not host.endswith(suffix) or len(host) == len(suffix):
        return False
    return not one_label or "." not in host[: -len(suffix)]


def _wildcard(host: str) -> bool:
    return host.startswith("*.")


def intersect_hostnames(listener: str, route: Sequence[str]) -> list[str]:
    """The hostnames (`""` meaning every host) a route is served for on a listener.

    Spec 003 "Route attachment and hostnames": "a listener with no hostname admits whatever the
    route names, or every hostname when the route names none; a route naming no hostname takes
    the listener's; otherwise each route hostname is kept when it equals the listener's or falls
    within its wildcard (*.example.com admits shop.example.com and deep.shop.example.com), and a
    wildcard route hostname is narrowed to a precise listener it covers."
    """
    if not route:
        return [listener]
    if not listener:
        return sorted(set(route))
    kept: set[str] = set()
    for host in route:
        if host == listener or (
            _wildcard(listener) and not _wildcard(host) and host_pattern_covers(listener, host)
        ):
            kept.add(host)
        elif _wildcard(host) and not _wildcard(listener) and host_pattern_covers(host, listener):
            kept.add(listener)
        elif _wildcard(host) and _wildcard(listener):
            if host_pattern_covers(listener, host[2:]):
                kept.add(host)
            elif host_pattern_covers(host, listener[2:]):
                kept.add(listener)
    return sorted(kept)


def hostnames_overlap(a: str, b: str) -> bool:
    """Whether two listener hostnames (`""` for any host) can both claim some request host:
    the same name, a wildcard covering the other name, or no hostname at all."""
    if not a or not b or a == b:
        return True
    if _wildcard(a) and host_pattern_covers(a, b[2:] if _wildcard(b) else b):
        return True
    return _wildcard(b) and host_pattern_covers(b, a[2:] if _wildcard(a) else a)


def claiming_hostname(pattern: str, hostnames: Container[str]) -> str | None:
    """Of a port's listener hostnames (`""` for a listener naming none), the one that claims
    the requests `pattern` (an exact host, `*.suffix` or `""`) stands for; None when none does.

    Gateway API, "Listeners that are distinct only by Hostname": "inbound request hostnames
    MUST match from the most specific to least specific Hostname values ... Exact matches MUST
    be processed before wildcard matches, and wildcard matches MUST be processed before
    fallback (empty Hostname value) matches", and "*.foo.example.com" before "*.example.com".
    A wildcard pattern is claimed as a whole: every host it covers goes to the same listener
    unless a more specific one claims that host (which the matcher settles per request).
    """
    if pattern and pattern in hostnames:
        return pattern
    rest = pattern[2:] if _wildcard(pattern) else pattern
    if rest:
        for suffix, _ in wildcard_suffixes(rest):
            if "*." + suffix in hostnames:
                return "*." + suffix
    return "" if "" in hostnames else None
