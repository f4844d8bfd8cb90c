"""The honoured ingress-nginx annotations, group by group, read into a `Policy`.

Where it sits: `policy.read` hands over the annotations the catalog says are honoured; each
group here reads its keys, with ingress-nginx's defaults where a key of the group is absent,
and records a verdict per key: honoured, ignored (a key with no effect without another, such as
cors-max-age without enable-cors), or refused when its value cannot be honoured. Values that
go on the wire are checked with the HTTPRoute lowering's own checks (`routes.wire_values`), so
an annotation can put nothing on a head that a route could not.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from coxswain_controller.translate.ingress.annotations import access, tls, values
from coxswain_controller.translate.ingress.annotations.catalog import CATALOG
from coxswain_controller.translate.ingress.annotations.model import Canary, Policy
from coxswain_controller.translate.ingress.annotations.reader import Reader
from coxswain_controller.translate.ingress.annotations.values import BadValue
from coxswain_controller.translate.routes import wire_values

__all__ = ["read_all"]

T = TypeVar("T")

# ingress-nginx's CORS defaults, taken when enable-cors is "true" and a key is absent.
CORS_DEFAULTS = {
    "cors-allow-origin": "*",
    "cors-allow-methods": "GET, PUT, POST, DELETE, PATCH, OPTIONS",
    "cors-allow-headers": "DNT,Keep-Alive,User-Agent,X-Requested-With,If-Modified-Since,"
    "Cache-Control,Content-Type,Range,Authorization",
    "cors-expose-headers": "",
    "cors-allow-credentials": "true",
    "cors-max-age": "1728000",
}
PROTOCOLS = ("HTTP", "HTTPS", "GRPC", "GRPCS", "H2C")
UNSUPPORTED_PROTOCOLS = ("AJP", "FCGI", "AUTO_HTTP")
# nginx's numbered captures in a rewrite target; any other "$" is an nginx variable.
_CAPTURE = re.compile(r"\$[1-9]")
_SECONDS = 365 * 86400  # the largest timeout read: a year


def read_all(found: Mapping[str, tuple[str, str]], policy: Policy, *, canary: bool) -> None:
    reader = Reader(found, policy)
    for group in (_rewrite, _ssl_redirect, _timeouts, _cors, _redirects, _headers, _backend):
        group(reader, policy)
    access.read_access(reader, policy)
    _canary(reader, policy, canary)
    tls.read_tls(reader, policy)  # last: ssl-passthrough makes every other key moot


def _rewrite(r: Reader, p: Policy) -> None:
    p.use_regex = bool(r.parse("use-regex", values.boolean))
    p.rewrite_target = r.parse("rewrite-target", _rewrite_target) or ""
    p.app_root = r.parse("app-root", _app_root) or ""


def _rewrite_target(text: str) -> str:
    target = text.strip()
    problem = wire_values.path_problem(target)
    if problem is not None:
        raise BadValue(f"is not a path ({problem})")
    if "?" in target or "#" in target:
        raise BadValue("carries a query or a fragment, which a rewrite here cannot set")
    if "$" in _CAPTURE.sub("", target):
        raise BadValue("names an nginx variable; only the captures $1 to $9 are read")
    return target


def _app_root(text: str) -> str:
    root = text.strip()
    problem = wire_values.path_problem(root)
    if problem is not None:
        raise BadValue(f"is not a path ({problem})")
    if "$" in root or "?" in root or "#" in root:
        raise BadValue("carries an nginx variable, a query or a fragment")
    return root


def _ssl_redirect(r: Reader, p: Policy) -> None:
    ssl = r.parse("ssl-redirect", values.boolean)
    p.ssl_redirect = True if ssl is None else ssl
    p.force_ssl_redirect = bool(r.parse("force-ssl-redirect", values.boolean))


def _timeouts(r: Reader, p: Policy) -> None:
    def seconds(text: str) -> int:
        return values.integer(text, low=1, high=_SECONDS)

    read = r.parse("proxy-read-timeout", seconds) or 0
    send = r.parse("proxy-send-timeout", seconds) or 0
    p.backend_request_ms = max(read, send) * 1000


def _cors(r: Reader, p: Policy) -> None:
    keys = tuple(CORS_DEFAULTS)
    if not r.parse("enable-cors", values.boolean):
        r.ignore_all(keys, 'has no effect without enable-cors: "true"')
        return
    raw = {k: r.value(k) if r.has(k) else v for k, v in CORS_DEFAULTS.items()}
    body, problems = _cors_body(raw)
    for key in keys:
        if key in problems and r.has(key):
            r.bad(key, problems[key])
        elif r.has(key):
            r.honour(key, _cors_note(key, body))
    if not problems:  # ingress-nginx's defaults are sound: a problem is a key's own
        p.cors = body


def _cors_note(key: str, body: Mapping[str, Any]) -> str:
    if key in ("cors-allow-credentials", "cors-allow-origin") and "*" in body["allowOrigins"]:
        return (
            CATALOG[key].note + "; with origin *, ingress-nginx answers '*', so browsers send no "
            "credentials, and Coxswain allows none either"
        )
    return CATALOG[key].note


def _cors_body(raw: Mapping[str, str]) -> tuple[dict[str, Any], dict[str, str]]:
    problems: dict[str, str] = {}
    origins = values.items(raw["cors-allow-origin"])
    lists = {
        "cors-allow-origin": (origins, wire_values.origin_problem),
        "cors-allow-methods": (values.items(raw["cors-allow-methods"]), wire_values.token_problem),
        "cors-allow-headers": (values.items(raw["cors-allow-headers"]), wire_values.token_problem),
        "cors-expose-headers": (
            values.items(raw["cors-expose-headers"]),
            wire_values.token_problem,
        ),
    }
    for key, (entries, check) in lists.items():
        bad = next((f"{e!r}: {check(e)}" for e in entries if check(e) is not None), None)
        if bad is not None:
            problems[key] = f"holds {bad}"
    if not origins:
        problems["cors-allow-origin"] = "names no origin"
    credentials = _safely(
        values.boolean, raw["cors-allow-credentials"], problems, "cors-allow-credentials"
    )
    max_age = _safely(
        lambda t: values.integer(t, low=0, high=2**31 - 1),
        raw["cors-max-age"],
        problems,
        "cors-max-age",
    )
    body = {
        "allowOrigins": ["*"] if "*" in origins else origins,
        # With "*", ingress-nginx answers Access-Control-Allow-Origin: * beside
        # -Allow-Credentials: true, which browsers refuse to send credentials for (Fetch, CORS
        # check); Coxswain answers with the request's origin, so it must not allow them.
        "allowCredentials": bool(credentials) and "*" not in origins,
        "allowMethods": lists["cors-allow-methods"][0],
        "allowHeaders": lists["cors-allow-headers"][0],
        "exposeHeaders": lists["cors-expose-headers"][0],
        "maxAge": max_age or 0,
    }
    return body, problems


def _safely(parser: Callable[[str], T], text: str, problems: dict[str, str], key: str) -> T | None:
    try:
        return parser(text)
    except BadValue as exc:
        problems[key] = str(exc)
        return None


def _redirects(r: Reader, p: Policy) -> None:
    for kind, default in (("temporal", 302), ("permanent", 301)):
        name, code_name = f"{kind}-redirect", f"{kind}-redirect-code"
        if not r.has(name):
            r.ignore_all((code_name,), f"has no effect without {name}")
            continue
        if p.redirect is not None:
            note = "temporal-redirect takes precedence (as in ingress-nginx)"
            r.ignore_all((name, code_name), note)
            continue
        p.redirect = _redirect(r, name, code_name, default)


def _redirect(r: Reader, name: str, code_name: str, default: int) -> dict[str, Any] | None:
    target = r.attempt(name, values.url)
    code = r.attempt(code_name, _status) if r.has(code_name) else default
    if target is None or code is None:
        return None
    body: dict[str, Any] = {"statusCode": code}
    if target.scheme:
        body["scheme"] = target.scheme
    if target.hostname:
        body["hostname"] = target.hostname
    if target.port:
        body["port"] = target.port
    if target.path:
        body["path"] = {"type": "ReplaceFullPath", "replaceFullPath": target.path}
    problems = wire_values.filter_problems("RequestRedirect", {"requestRedirect": body})
    if problems:
        r.bad(name, "gives " + "; ".join(problems))
        return None
    for honoured in (name, code_name):
        if r.has(honoured):
            r.honour(honoured)
    return body


def _status(text: str) -> int:
    code = values.integer(text, low=300, high=399)
    if wire_values.status_problem(code) is not None:
        raise BadValue("is not one of 301, 302, 303, 307, 308")
    return code


def _headers(r: Reader, p: Policy) -> None:
    p.upstream_vhost = r.parse("upstream-vhost", _vhost) or ""
    p.forwarded_prefix = r.parse("x-forwarded-prefix", _header_value) or ""


def _vhost(text: str) -> str:
    host = text.strip().lower()
    problem = wire_values.precise_hostname_problem(host)
    if problem is not None:
        raise BadValue(f"is not a host name ({problem})")
    return host


def _header_value(text: str) -> str:
    value = text.strip()
    problem = wire_values.header_value_problem(value) or (None if value else "is empty")
    if problem is not None:
        raise BadValue(problem)
    return value


def _backend(r: Reader, p: Policy) -> None:
    p.protocol = r.parse("backend-protocol", _protocol) or ""


def _protocol(text: str) -> str:
    protocol = text.strip().upper()
    if protocol in UNSUPPORTED_PROTOCOLS:
        raise BadValue(f"names {protocol}, a backend protocol Coxswain does not speak")
    if protocol not in PROTOCOLS:
        raise BadValue(f"is not one of {', '.join(PROTOCOLS)}")
    return protocol


def _canary(r: Reader, p: Policy, canary: bool) -> None:

    keys = (
        "canary-weight",
        "canary-weight-total",
        "canary-by-header",
        "canary-by-header-value",
        "canary-by-header-pattern",
        "canary-by-cookie",
    )
    is_canary = r.parse("canary", values.boolean)
    if not canary or not is_canary:
        r.ignore_all(keys, 'has no effect without canary: "true"')
        return
    total = r.parse("canary-weight-total", lambda t: values.integer(t, low=1, high=1_000_000))
    total = total or 100
    weight = r.parse("canary-weight", lambda t: values.integer(t, low=0, high=total)) or 0
    header = r.parse("canary-by-header", _header_name) or ""
    exact, pattern = _canary_values(r, header)
    cookie = r.parse("canary-by-cookie", _cookie_name) or ""
    p.canary = Canary(weight, total, header, exact, pattern, cookie)


def _cookie_name(text: str) -> str:
    name = text.strip()
    if wire_values.token_problem(name) is not None:
        raise BadValue("is not a cookie name")
    return name


def _canary_values(r: Reader, header: str) -> tuple[str, str]:
    pair = ("canary-by-header-value", "canary-by-header-pattern")
    if not header:
        r.ignore_all(pair, "has no effect without canary-by-header")
        return "", ""
    exact = r.parse("canary-by-header-value", _header_value) or ""
    if exact:
        r.ignore_all(pair[1:], "canary-by-header-value takes precedence (as in ingress-nginx)")
        return exact, ""
    return "", r.parse("canary-by-header-pattern", _pattern) or ""


def _header_name(text: str) -> str:
    name = text.strip()
    problem = wire_values.header_name_problem(name)
    if problem is not None:
        raise BadValue(f"is not a header name ({problem})")
    return name.lower()


def _pattern(text: str) -> str:
    try:
        re.compile(text)
    except re.error as exc:
        raise BadValue(f"is not a regular expression Coxswain can read ({exc})") from None
    return text
