"""Host normalisation and the host tiers a request is resolved through.

Spec 003 "Matches and precedence": requests are resolved "by host first — the exact hostname,
then wildcards covering it from the nearest label boundary outward, then hostless routes".
A Gateway API wildcard (`*.example.com`) covers any number of labels; an Ingress wildcard
covers exactly one (Kubernetes Ingress: "*.foo.com" matches "bar.foo.com" but not
"baz.bar.foo.com"). Neither covers the bare suffix (`example.com`).
"""

from __future__ import annotations

__all__ = ["normalize_host", "wildcard_suffixes", "host_pattern_covers"]


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
