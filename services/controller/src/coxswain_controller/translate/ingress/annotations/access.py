"""The honoured ingress-nginx annotations that become a rule's policy: access lists, the body
size limit, rate and connection limits, basic and external auth, cookie affinity.

Where it sits: `groups.read_all` hands each group here the Ingress's honoured keys, after the
routing groups. The values are read as ingress-nginx reads them (its defaults where a key of a
group is absent) into the plain specs of `policy` (`BasicSpec`, `ExternalSpec`, `Limits`) or
into model values where nothing else is needed; `lowering` turns them into the rule's
`coxswain_routing.Policy` once the Secret is read and the auth Service resolved. A value that
cannot be honoured refuses its key, and with it the Ingress's paths.
"""

from __future__ import annotations

import re
from urllib.parse import SplitResult, urlsplit

from coxswain_controller.translate.ingress.annotations import values
from coxswain_controller.translate.ingress.annotations.model import (
    BasicSpec,
    ExternalSpec,
    Limits,
    Policy,
)
from coxswain_controller.translate.ingress.annotations.reader import Reader
from coxswain_controller.translate.ingress.annotations.values import BadValue
from coxswain_controller.translate.routes import wire_values
from coxswain_routing import SameSite, SessionAffinity, parse_cidr
from coxswain_routing._policy import SIGNIN_VARIABLES

__all__ = ["read_access"]

# nginx's size suffixes (client_max_body_size): none, k, m or g, either case.
_SIZE = re.compile(r"([0-9]+)([kKmMgG]?)")
_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30}
# A Service by its cluster DNS name: <service>.<namespace>.svc[.cluster.local].
_SERVICE_HOST = re.compile(r"([a-z0-9]([-a-z0-9]*[a-z0-9])?)\.([a-z0-9]([-a-z0-9]*[a-z0-9])?)"
                           r"\.svc(\.cluster\.local)?")  # fmt: skip
_VARIABLE = re.compile(r"\$[a-z_]+")
# auth-url's one nginx variable, as the whole host: ingress-nginx's own oauth2-proxy example
# (docs/examples/auth/oauth-external-auth) writes "https://$host/oauth2/auth".
SELF_HOST = "$host"
SELF_HOST_NOTE = (
    "$host: on each host of the Ingress, the path is found among the Ingress paths of its class "
    "as a request to it would be, and the request's head is sent first, straight to that "
    "path's Service (Host: the request's host); 2xx lets it through, 401 and 403 answer it"
)
MAX_RATE = 1_000_000


def read_access(r: Reader, p: Policy) -> None:
    for group in (_ranges, _body, _limits, _basic, _external, _affinity):
        group(r, p)


def _cidrs(text: str) -> tuple[str, ...]:
    found = values.items(text)
    if not found:
        raise BadValue("names no CIDR")
    for cidr in found:
        try:
            parse_cidr(cidr)
        except ValueError:
            raise BadValue(f"holds {cidr!r}, which is not a CIDR or an IP address") from None
    return tuple(found)


def _ranges(r: Reader, p: Policy) -> None:
    allow = r.parse("whitelist-source-range", _cidrs) or ()
    if r.has("allowlist-source-range"):
        allow = r.parse("allowlist-source-range", _cidrs) or allow  # the newer name wins
    p.allow_ranges = allow
    p.deny_ranges = r.parse("denylist-source-range", _cidrs) or ()


def size(text: str) -> int:
    found = _SIZE.fullmatch(text.strip())
    if found is None:
        raise BadValue("is not an nginx size (a number, then k, m or g)")
    return int(found[1]) * _UNITS[found[2].lower()]


def _body(r: Reader, p: Policy) -> None:
    p.max_body_bytes = r.parse("proxy-body-size", size) or 0


def _count(text: str) -> int:
    return values.integer(text, low=0, high=MAX_RATE)


def _limits(r: Reader, p: Policy) -> None:

    rps = r.parse("limit-rps", _count) or 0
    rpm = r.parse("limit-rpm", _count) or 0
    multiplier = r.parse("limit-burst-multiplier", lambda t: values.integer(t, low=1, high=1000))
    connections = r.parse("limit-connections", _count) or 0
    exempt: tuple[str, ...] = ()
    for name in ("limit-whitelist", "limit-allowlist"):
        exempt = r.parse(name, _cidrs) or exempt
    p.limits = Limits(rps, rpm, multiplier or 5, connections, exempt)


def _basic(r: Reader, p: Policy) -> None:

    keys = ("auth-secret", "auth-secret-type", "auth-realm")
    if not r.has("auth-type"):
        r.ignore_all(keys, "has no effect without auth-type: basic")
        return
    kind = r.attempt("auth-type", _auth_type)
    secret = r.attempt("auth-secret", _secret_name)
    if kind is None or secret is None:
        if kind is not None:
            why = (
                "names no users: auth-secret is missing"
                if not r.has("auth-secret")
                else ("cannot be honoured without its auth-secret")
            )
            r.bad("auth-type", why)
        elif secret is not None:
            r.ignore("auth-secret", "has no effect: auth-type is refused")
        r.ignore_all(keys[1:], "has no effect: basic auth is refused")
        return
    secret_type = r.parse("auth-secret-type", _secret_type) or "auth-file"
    realm = r.parse("auth-realm", _realm) or "Authentication Required"
    r.honour("auth-type")
    r.honour("auth-secret")
    p.basic = BasicSpec(secret, secret_type, realm)


def _auth_type(text: str) -> str:
    kind = text.strip().lower()
    if kind == "digest":
        raise BadValue("asks for digest auth, which Coxswain does not build")
    if kind != "basic":
        raise BadValue("is not basic")
    return kind


def _secret_name(text: str) -> str:
    name = text.strip()
    if "/" in name:
        raise BadValue(
            "names a Secret of another namespace; only the Ingress's own namespace is read"
        )
    if not re.fullmatch(r"[a-z0-9]([-a-z0-9.]*[a-z0-9])?", name):
        raise BadValue("is not a Secret name")
    return name


def _secret_type(text: str) -> str:
    kind = text.strip()
    if kind not in ("auth-file", "auth-map"):
        raise BadValue("is not auth-file or auth-map")
    return kind


def _realm(text: str) -> str:
    realm = text.strip()
    if wire_values.header_value_problem(realm) is not None or '"' in realm or "\\" in realm:
        raise BadValue("holds what a quoted realm may not (a quote, a backslash, a control)")
    return realm


def _external(r: Reader, p: Policy) -> None:
    keys = ("auth-signin", "auth-signin-redirect-param", "auth-response-headers", "auth-method")
    if not r.has("auth-url"):
        r.ignore_all(keys, "has no effect without auth-url")
        return
    spec = r.attempt("auth-url", _auth_url)
    signin = r.parse("auth-signin", _signin) or ""
    param = r.parse("auth-signin-redirect-param", _token) or "rd"
    headers = r.parse("auth-response-headers", _header_names) or ()
    method = r.parse("auth-method", lambda t: _token(t.strip().upper())) or "GET"
    if spec is None:
        return
    r.honour("auth-url", SELF_HOST_NOTE if spec.self_scheme else "")
    from dataclasses import replace

    p.external = replace(
        spec, method=method, response_headers=headers, signin=signin, redirect_param=param
    )


def _auth_url(text: str) -> ExternalSpec:
    value = text.strip()
    parts = urlsplit(value)
    if parts.netloc.split(":", 1)[0] == SELF_HOST:
        return _self_host(value, parts)
    if "$" in value:
        raise BadValue(
            "names an nginx variable; auth-url is read as a fixed URL, or with $host as its "
            "whole host"
        )
    if parts.scheme == "https":
        raise BadValue("is https: an auth service spoken to over TLS is not supported yet")
    if parts.scheme != "http" or not parts.hostname:
        raise BadValue("is not an http URL")
    found = _SERVICE_HOST.fullmatch(parts.hostname)
    if found is None:
        raise BadValue(
            "does not name a Service (<name>.<namespace>.svc): auth services outside the "
            "cluster are not supported yet"
        )
    port, target = _port(parts), _target(parts)
    host = parts.netloc.rsplit("@", 1)[-1]
    return ExternalSpec(found[1], found[3], port, host, target)


def _self_host(value: str, parts: SplitResult) -> ExternalSpec:
    """`http(s)://$host[:port]/path`: the path as the request's own host serves it, which
    `host_auth` resolves per host of the Ingress."""
    if value.count("$") != 1:
        others = [v for v in _VARIABLE.findall(value) if v != SELF_HOST]
        named = f"the nginx variable {others[0]}" if others else "a $"
        raise BadValue(f"names {named} besides its host $host; only $host, as the whole host, "
                       "is read")  # fmt: skip
    if parts.scheme not in ("http", "https"):
        raise BadValue("is not an http or https URL")
    return ExternalSpec(
        "", "", _port(parts), parts.netloc, _target(parts), self_scheme=parts.scheme
    )


def _port(parts: SplitResult) -> int:
    try:
        return parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        raise BadValue("has a port that is not a number from 1 to 65535") from None


def _target(parts: SplitResult) -> str:
    """The auth request's target: the URL's path and query."""
    if wire_values.path_problem(parts.path or "/") is not None:
        raise BadValue("has a path a request may not carry")
    return (parts.path or "/") + (f"?{parts.query}" if parts.query else "")


def _signin(text: str) -> str:
    url = text.strip()
    unknown = [v for v in _VARIABLE.findall(url) if v not in SIGNIN_VARIABLES]
    if unknown:
        served = ", ".join(SIGNIN_VARIABLES)
        raise BadValue(f"names the nginx variable {unknown[0]}; only {served} are filled in")
    if not url.startswith(("http://", "https://", "/")) or not url.isascii() or " " in url:
        raise BadValue("is not an http(s) URL or an absolute path")
    return url


def _token(text: str) -> str:
    value = text.strip()
    if wire_values.token_problem(value) is not None:
        raise BadValue("is not a token")
    return value


def _header_names(text: str) -> tuple[str, ...]:
    names = values.items(text)
    for name in names:
        problem = wire_values.header_name_problem(name)
        if problem is not None:
            raise BadValue(f"holds {name!r}, which is not a header name a request may carry")
    return tuple(n.lower() for n in names)


def _affinity(r: Reader, p: Policy) -> None:
    keys = tuple(f"session-cookie-{k}" for k in
                 ("name", "path", "max-age", "expires", "samesite", "secure"))  # fmt: skip
    kind = r.attempt("affinity", _affinity_kind)
    if kind is None:
        if not r.has("affinity"):
            r.ignore_all((*keys, "affinity-mode"), "has no effect without affinity: cookie")
        return
    r.honour("affinity")
    p.affinity = SessionAffinity(
        cookie=r.parse(keys[0], _token) or "INGRESSCOOKIE",
        path=r.parse(keys[1], _cookie_path) or "",
        max_age_seconds=r.parse(keys[2], _seconds) or 0,
        expires_seconds=r.parse(keys[3], _seconds) or 0,
        same_site=r.parse(keys[4], _same_site) or SameSite.NONE_SET,
        secure=bool(r.parse(keys[5], values.boolean)),
    )


def _affinity_kind(text: str) -> str:
    if text.strip() != "cookie":
        raise BadValue("is not cookie, the one affinity ingress-nginx has")
    return "cookie"


def _cookie_path(text: str) -> str:
    path = text.strip()
    if not path.startswith("/") or not re.fullmatch(r"[\x21-\x3a\x3c-\x7e]+", path):
        raise BadValue("is not an absolute path a cookie may carry")
    return path


def _seconds(text: str) -> int:
    return values.integer(text, low=0, high=10 * 365 * 86400)


def _same_site(text: str) -> SameSite:
    wanted = text.strip().lower()
    for same_site in (SameSite.NONE, SameSite.LAX, SameSite.STRICT):
        if same_site.value.lower() == wanted:
            return same_site
    raise BadValue("is not None, Lax or Strict")
