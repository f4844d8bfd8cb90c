"""CORS (the Gateway API's HTTPCORSFilter): preflight answers and response headers.

Where it sits: for a rule carrying a `Cors` filter, the proxy answers a preflight (an OPTIONS
request with `Origin` and `Access-Control-Request-Method`) itself with `preflight_headers`, and
adds `response_headers` to every other response. A request from an origin the filter does not
allow gets no CORS headers at all, which is how a browser is told no; every answer carries
`Vary: Origin`, because what it says depends on the request's Origin (a cache must not hand an
answer made for one origin, or for none, to another).

Why the wildcards read as they do (HTTPCORSFilter): with `allowCredentials` the
`Access-Control-Allow-Origin`, `-Allow-Methods` and `-Allow-Headers` fields "can only use `*`
wildcard as value when the `AllowCredentials` field is false or omitted", and otherwise carry
the request's own Origin, Access-Control-Request-Method and Access-Control-Request-Headers.
Allow-Origin and Allow-Methods carry what the request asked with or without credentials (right
either way); Allow-Headers says "*" only when none were asked and credentials are not allowed.
`-Expose-Headers: *` is the same on a credentialed response: there it lists the response's own
field names, which only the proxy knows once the response comes (`exposes_response_fields`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from functools import lru_cache

from coxswain_routing._model import Cors

__all__ = [
    "VARY_ORIGIN",
    "exposes_response_fields",
    "is_preflight",
    "origin_allowed",
    "preflight_headers",
    "response_headers",
]

VARY_ORIGIN = ("Vary", "Origin")

# HTTPCORSFilter.allowOrigins: "if not included, port `80` is assumed for `http` scheme
# origins, and port `443` is assumed for `https` origins. This may affect origin matching."
_DEFAULT_PORTS = {"http": ":80", "https": ":443"}


def is_preflight(method: str, headers: Mapping[str, str]) -> bool:
    return (
        method == "OPTIONS" and "origin" in headers and "access-control-request-method" in headers
    )


def _normal(origin: str) -> str:
    """An origin compared as RFC 6454 does: scheme and host case-insensitively, and the
    scheme's default port the same as none."""
    text = origin.lower()
    scheme, sep, _ = text.partition("://")
    port = _DEFAULT_PORTS.get(scheme)
    if sep and port and text.endswith(port):
        return text[: -len(port)]
    return text


@lru_cache(maxsize=256)
def _origin_pattern(allowed: str) -> re.Pattern[str]:
    # HTTPCORSFilter.allowOrigins: "`*` is a greedy match to the _left_, including any number
    # of DNS labels to the left of its position"; "A wildcard by itself matches all hosts."
    # It stays within the host: never a scheme separator or a port.
    return re.compile(re.escape(_normal(allowed)).replace(r"\*", r"[^/:]+"))


def origin_allowed(cors: Cors, origin: str) -> bool:
    wanted = _normal(origin)
    for allowed in cors.allow_origins:
        if allowed == "*" or _normal(allowed) == wanted:
            return True
        if "*" in allowed and _origin_pattern(allowed).fullmatch(wanted):
            return True
    return False


def exposes_response_fields(cors: Cors) -> bool:
    """Whether `Access-Control-Expose-Headers` must list the response's own field names (a
    credentialed `*`), which `response_headers` leaves to the caller."""
    return cors.allow_credentials and "*" in cors.expose_headers


def _common(origin: str, credentials: bool) -> list[tuple[str, str]]:
    # HTTPCORSFilter.allowOrigins: "If the request `Origin` matches the configured allowed
    # origins, the gateway must return the given `Origin`"; with credentials a "*" "must
    # return a single origin". The request's Origin is the one answer right in every case (a
    # "*" without credentials could say "*", but the conformance scenario's unauthenticated
    # case takes only the origin), and every answer varies by Origin anyway.
    headers = [VARY_ORIGIN, ("Access-Control-Allow-Origin", origin)]
    # HTTPCORSFilter.allowCredentials: "When set to false or omitted the gateway will omit the
    # header `Access-Control-Allow-Credentials` entirely".
    if credentials:
        headers.append(("Access-Control-Allow-Credentials", "true"))
    return headers


def _expose(cors: Cors) -> list[tuple[str, str]]:
    if not cors.expose_headers or exposes_response_fields(cors):
        return []
    return [("Access-Control-Expose-Headers", ", ".join(cors.expose_headers))]


def _wildcard_or_list(values: tuple[str, ...], requested: str, credentials: bool) -> str | None:
    """An Allow-Methods or Allow-Headers value: the list, or for "*" what the request asked
    (always so with credentials, where "*" is not a wildcard); None: no field."""
    if "*" not in values:
        return ", ".join(values) if values else None
    if requested:
        return requested
    # "If the header ... is not included in the request, the gateway will omit the ...
    # response header, instead of specifying the `*` wildcard."
    return None if credentials else "*"


def preflight_headers(cors: Cors, headers: Mapping[str, str]) -> list[tuple[str, str]]:
    """The headers of the answer to a preflight; only Vary when the origin is not allowed.

    The requested method and headers are not judged here: the answer lists what is allowed,
    and "If the HTTP method of the `Access-Control-Request-Method` request header is not
    included in the list ... it will present an error on the client side" (HTTPCORSFilter).
    """
    origin = headers.get("origin", "")
    if not origin_allowed(cors, origin):
        return [VARY_ORIGIN]
    credentials = cors.allow_credentials
    result = _common(origin, credentials)
    method = headers.get("access-control-request-method", "").strip()
    methods = _wildcard_or_list(cors.allow_methods, method, credentials)
    if methods is not None:
        result.append(("Access-Control-Allow-Methods", methods))
    requested = headers.get("access-control-request-headers", "").strip()
    allowed_headers = _wildcard_or_list(cors.allow_headers, requested, credentials)
    if allowed_headers is not None:
        result.append(("Access-Control-Allow-Headers", allowed_headers))
    result += _expose(cors)
    result.append(("Access-Control-Max-Age", str(cors.max_age_seconds)))
    return result


def response_headers(cors: Cors, headers: Mapping[str, str]) -> list[tuple[str, str]]:
    """Headers added to an ordinary response; only Vary without an allowed Origin."""
    origin = headers.get("origin")
    if origin is None or not origin_allowed(cors, origin):
        return [VARY_ORIGIN]
    return _common(origin, cors.allow_credentials) + _expose(cors)
