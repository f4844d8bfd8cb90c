"""CORS (the Gateway API's HTTPCORSFilter): preflight answers and response headers.

Where it sits: for a rule carrying a `Cors` filter, the proxy answers a preflight (an OPTIONS
request with `Origin` and `Access-Control-Request-Method`) itself with `preflight_headers`, and
adds `response_headers` to every other response for an allowed origin. A request from an origin
the filter does not allow gets no CORS headers at all, which is how a browser is told no.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from coxswain_routing._model import Cors

__all__ = ["is_preflight", "origin_allowed", "preflight_headers", "response_headers"]


def is_preflight(method: str, headers: Mapping[str, str]) -> bool:
    return (
        method == "OPTIONS" and "origin" in headers and "access-control-request-method" in headers
    )


def _origin_pattern(allowed: str) -> re.Pattern[str]:
    # "https://*.example.com": the wildcard stands for one or more labels of the host.
    return re.compile(re.escape(allowed).replace(r"\*", r"[^/:]+(?:\.[^/:]+)*"))


def origin_allowed(cors: Cors, origin: str) -> bool:
    for allowed in cors.allow_origins:
        if allowed == "*" or allowed == origin:
            return True
        if "*" in allowed and _origin_pattern(allowed).fullmatch(origin):
            return True
    return False


def _allow_origin_value(cors: Cors, origin: str) -> str:
    # A credentialed response may not use the "*" wildcard (Fetch standard), so echo the origin.
    if "*" in cors.allow_origins and not cors.allow_credentials:
        return "*"
    return origin


def _common(cors: Cors, origin: str) -> list[tuple[str, str]]:
    headers = [("Access-Control-Allow-Origin", _allow_origin_value(cors, origin))]
    if cors.allow_credentials:
        headers.append(("Access-Control-Allow-Credentials", "true"))
    if _allow_origin_value(cors, origin) != "*":
        headers.append(("Vary", "Origin"))
    return headers


def preflight_headers(cors: Cors, headers: Mapping[str, str]) -> list[tuple[str, str]]:
    """The headers of the answer to a preflight; [] when the origin or method is not allowed."""
    origin = headers.get("origin", "")
    if not origin_allowed(cors, origin):
        return []
    method = headers.get("access-control-request-method", "")
    methods = cors.allow_methods
    if "*" not in methods and method not in methods:
        return []
    result = _common(cors, origin)
    allow_methods = method if "*" in methods else ", ".join(methods)
    result.append(("Access-Control-Allow-Methods", allow_methods))
    requested = headers.get("access-control-request-headers", "")
    if "*" in cors.allow_headers and requested:
        result.append(("Access-Control-Allow-Headers", requested))
    elif cors.allow_headers:
        result.append(("Access-Control-Allow-Headers", ", ".join(cors.allow_headers)))
    result.append(("Access-Control-Max-Age", str(cors.max_age_seconds)))
    return result


def response_headers(cors: Cors, headers: Mapping[str, str]) -> list[tuple[str, str]]:
    """Headers added to an ordinary response; [] when the request carries no allowed Origin."""
    origin = headers.get("origin")
    if origin is None or not origin_allowed(cors, origin):
        return []
    result = _common(cors, origin)
    if cors.expose_headers:
        result.append(("Access-Control-Expose-Headers", ", ".join(cors.expose_headers)))
    return result
