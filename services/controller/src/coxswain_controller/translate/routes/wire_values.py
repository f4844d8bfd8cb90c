"""Values a filter puts on the wire, checked before the route carrying it is served.

Where it sits: `filters.convert_filters` asks `filter_problems` about each raw filter entry
before converting it, so a route kind whose filters share HTTPRoute's shapes (GRPCRoute's
header modifiers and mirrors) gets the same checks by calling the same function. A problem is a
string "<field>: <why>", the field named from the filter down (`requestRedirect.port`); the
caller prefixes the filter's place and the route is not served (spec 003 "Filters": "a malformed
hostname, header, scheme, port or status ... makes the route not served"; UnsupportedValue).

Why it exists: the Gateway API CRD bounds only the length of a header value or a path, so the
API server lets a CR LF through, and the proxy writes these strings as they are (one octet per
character) onto upstream connections that routes of different tenants share. Whatever passes
here is safe to write verbatim. A field of the wrong JSON shape (a list given as a string)
raises TypeError, which guard.py reports as an object that cannot be read.

Ingress: the ingress-nginx annotations that write onto the wire (rewrite targets, redirects,
CORS, upstream-vhost, x-forwarded-prefix) are lowered to HTTPRoute rules and checked here
too (translate/ingress/annotations/groups.py).
"""

from __future__ import annotations

import ipaddress
import re
import string
from collections.abc import Callable, Mapping, Sequence
from typing import Any

__all__ = [
    "PROXY_OWNED_FIELDS",
    "filter_problems",
    "token_problem",
    "header_name_problem",
    "header_value_problem",
    "precise_hostname_problem",
    "path_problem",
    "scheme_problem",
    "port_problem",
    "status_problem",
    "origin_problem",
]

# RFC 9110 §5.6.2: tchar = "!" / "#" / "$" / "%" / "&" / "'" / "*" / "+" / "-" / "." / "^" /
# "_" / "`" / "|" / "~" / DIGIT / ALPHA.
_TCHAR = frozenset("!#$%&'*+-.^_`|~" + string.ascii_letters + string.digits)
# RFC 9110 §5.5: CTLs other than HTAB (NUL, CR and LF are reported on their own).
_CTL = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")
_CR_LF_NUL = re.compile(r"[\r\n\x00]")
# RFC 3986 §3.3: segment = *pchar; pchar = unreserved / pct-encoded / sub-delims / ":" / "@".
_PATH_PREFIX = re.compile(r"(?:[A-Za-z0-9\-._~!$&'()*+,;=:@/]|%[0-9A-Fa-f]{2})*")
# RFC 1123 §2.1 label, lower-cased as the Gateway API's PreciseHostname pattern has it.
_LABEL = re.compile(r"[a-z0-9](?:[-a-z0-9]{0,61}[a-z0-9])?")
# Gateway API HTTPCORSFilter.allowOrigins: "`<scheme>://<host>(:<port>)`. Valid values for
# scheme are: `http` and `https`." The host may carry `*`, alone or as leading labels.
_ORIGIN = re.compile(
    r"(?:http|https)://(?P<host>\*|(?:\*\.)?[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*|\[[0-9A-Fa-f:.]+\])"
    r"(?::(?P<port>[0-9]{1,5}))?"
)
_SCHEMES = ("http", "https")
# Gateway API HTTPPathModifier: each type, and the field holding its value.
_PATH_MODIFIERS = {"ReplaceFullPath": "replaceFullPath", "ReplacePrefixMatch": "replacePrefixMatch"}
# Gateway API HTTPRequestRedirectFilter.statusCode: "+kubebuilder:validation:Enum=301;302;303;
# 307;308"; spec 003: "the status it names (301, 303, 307 or 308, or 302 by default)".
_STATUSES = (301, 302, 303, 307, 308)

# RFC 9112 §6: Content-Length and Transfer-Encoding decide where a message body ends; RFC 9110
# §7.6.1: Connection, and connection-specific fields such as Keep-Alive, Proxy-Connection, TE
# and Upgrade, are removed by an intermediary before it forwards a message. The proxy writes
# these itself for each connection: one a filter set, added or removed would frame a message on
# a pooled upstream connection (shared by other routes) differently from its bytes.
PROXY_OWNED_FIELDS = frozenset(
    {
        "content-length",
        "transfer-encoding",
        "connection",
        "keep-alive",
        "proxy-connection",
        "te",
        "trailer",
        "upgrade",
    }
)


def token_problem(value: Any) -> str | None:
    """Why `value` is not an RFC 9110 token (a header name, a method), or None."""
    if not isinstance(value, str):
        return _not_text(value)
    # RFC 9110 §5.6.2: token = 1*tchar.
    if not value:
        return "must not be empty"
    bad = next((c for c in value if c not in _TCHAR), None)
    if bad is not None:
        return f"contains {bad!r}, which is not a token character"
    return None


def header_name_problem(value: Any) -> str | None:
    """`token_problem`, and the fields only the proxy may write (PROXY_OWNED_FIELDS)."""
    problem = token_problem(value)
    if problem is None and value.lower() in PROXY_OWNED_FIELDS:
        return f"{value} frames the message or the connection; only the proxy writes it"
    return problem


def header_value_problem(value: Any) -> str | None:
    """Why `value` cannot be written as an RFC 9110 field value, or None."""
    if not isinstance(value, str):
        return _not_text(value)
    # RFC 9110 §5.5: "Field values containing CR, LF, or NUL characters are invalid and
    # dangerous, due to the varying ways that implementations might parse and interpret those
    # characters".
    if _CR_LF_NUL.search(value):
        return "contains CR, LF or NUL"
    # RFC 9110 §5.5: "Field values containing other CTL characters are also invalid".
    ctl = _CTL.search(value)
    if ctl is not None:
        return f"contains the control character {ctl.group()!r}"
    # RFC 9110 §5.5: field-vchar = VCHAR / obs-text, obs-text = %x80-FF: one octet each.
    if max(value, default="\0") > "\xff":
        return "contains a character beyond U+00FF, which is not one octet"
    # RFC 9110 §5.5: "A field value does not include leading or trailing whitespace."
    if value != value.strip(" \t"):
        return "has leading or trailing whitespace"
    return None


def precise_hostname_problem(value: Any) -> str | None:
    """Why `value` is not a Gateway API PreciseHostname, or None."""
    if not isinstance(value, str):
        return _not_text(value)
    # Gateway API PreciseHostname: "the fully qualified domain name of a network host. This
    # matches the RFC 1123 definition of a hostname ... a *label* must consist of lower case
    # alphanumeric characters or '-', and must start and end with an alphanumeric character".
    if not value:
        return "must not be empty"
    if len(value) > 253:
        return "is longer than 253 characters"
    labels = value.split(".")
    if not all(_LABEL.fullmatch(label) for label in labels):
        return f"{value!r} is not a lower-case RFC 1123 host name"
    # RFC 1123 §2.1: "a valid host name can never have the dotted-decimal form #.#.#.#". The
    # API's pattern admits that form (its prose says no IP addresses), so a real API server
    # lets an IPv4 address through; it is written as is, so it must at least be an address.
    if len(labels) == 4 and all(label.isdigit() for label in labels):
        try:
            ipaddress.IPv4Address(value)
        except ValueError:
            return f"{value!r} is neither a host name nor an IPv4 address"
    return None


def path_problem(value: Any, *, may_be_empty: bool = False) -> str | None:
    """Why `value` is not an RFC 3986 absolute path the proxy can write as is, or None."""
    if not isinstance(value, str):
        return _not_text(value)
    if not value and may_be_empty:
        return None  # spec 003: "an empty replacement is /"
    if _CR_LF_NUL.search(value):
        return "contains CR, LF or NUL"
    # RFC 3986 §3.3: path-absolute = "/" [ segment-nz *( "/" segment ) ]: it begins with "/"
    # but not "//", which would read as an authority.
    if not value.startswith("/"):
        return "must start with '/'"
    if value.startswith("//"):
        return "must not start with '//'"
    end = _PATH_PREFIX.match(value)
    at = end.end() if end is not None else 0
    if at == len(value):
        return None
    bad = value[at]
    if bad == "%":
        return "has a '%' not followed by two hex digits"
    if bad <= " " or bad == "\x7f":
        return f"contains {bad!r}, a space or control character"
    return f"contains {bad!r}, which a path may not carry unencoded (RFC 3986)"


def scheme_problem(value: Any) -> str | None:
    # Gateway API HTTPRequestRedirectFilter.scheme: "+kubebuilder:validation:Enum=http;https".
    if value not in _SCHEMES:
        return f"{value!r} is not one of http, https"
    return None


def port_problem(value: Any) -> str | None:
    # Gateway API PortNumber: "+kubebuilder:validation:Minimum=1", "Maximum=65535".
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 65535:
        return f"{value!r} is not a port number from 1 to 65535"
    return None


def status_problem(value: Any) -> str | None:
    if isinstance(value, bool) or value not in _STATUSES:
        return f"{value!r} is not one of {', '.join(map(str, _STATUSES))}"
    return None


def origin_problem(value: Any) -> str | None:
    """Why `value` is not an HTTPCORSFilter origin ("*" or scheme://host[:port]), or None."""
    if not isinstance(value, str):
        return _not_text(value)
    if value == "*":
        return None
    found = _ORIGIN.fullmatch(value)
    if found is None or not _origin_host(found["host"]):
        return f"{value!r} is not '*' or http(s)://host[:port]"
    if found["port"] is not None and port_problem(int(found["port"])) is not None:
        return f"{value!r} has a port outside 1 to 65535"
    return None


def _origin_host(host: str) -> bool:
    if not host.startswith("["):
        return True  # the pattern admits only a name, "*" or "*." and a name
    try:
        ipaddress.IPv6Address(host[1:-1])
    except ValueError:
        return False
    return True


def filter_problems(kind: str, entry: Mapping[str, Any]) -> list[str]:
    """Each value filter `entry` (of type `kind`) would put on the wire that it may not; []
    for a type with no such values or one this module does not know (refused elsewhere)."""
    check = _CHECKS.get(kind)
    return [] if check is None else check(entry)


def _not_text(value: Any) -> str:
    return "is required" if value is None else f"{value!r} is not a string"


def _items(value: Any) -> Sequence[Any]:
    if value is None:
        return ()
    if not isinstance(value, list | tuple):
        raise TypeError(f"expected a list, got {type(value).__name__}")
    return value


def _field(at: str, problem: str | None) -> list[str]:
    return [] if problem is None else [f"{at}: {problem}"]


def _header_modifier(raw: Mapping[str, Any], at: str) -> list[str]:
    problems = []
    for op in ("set", "add"):
        for i, header in enumerate(_items(raw.get(op))):
            where = f"{at}.{op}[{i}]"
            problems += _field(f"{where}.name", header_name_problem(header.get("name")))
            problems += _field(f"{where}.value", header_value_problem(header.get("value")))
    for i, name in enumerate(_items(raw.get("remove"))):
        problems += _field(f"{at}.remove[{i}]", header_name_problem(name))
    return problems


def _path_modifier(raw: Mapping[str, Any] | None, at: str) -> list[str]:
    if not raw:
        return []
    kind = raw.get("type")
    # Gateway API HTTPPathModifier.type: "Unknown values here must result in ... the Accepted
    # Condition for the Route to `status: False`, with a Reason of `UnsupportedValue`."
    key = _PATH_MODIFIERS.get(kind) if isinstance(kind, str) else None
    if key is not None:
        value = raw.get(key)
        # An absent or empty value is "/" (filters._path; spec 003: "an empty replacement is /").
        problem = None if value is None else path_problem(value, may_be_empty=True)
        return _field(f"{at}.{key}", problem)
    return [f"{at}.type: {kind!r} is not one of ReplaceFullPath, ReplacePrefixMatch"]


def _optional(
    raw: Mapping[str, Any], key: str, at: str, check: Callable[[Any], str | None]
) -> list[str]:
    value = raw.get(key)
    return [] if value is None else _field(f"{at}.{key}", check(value))


def _url_rewrite(raw: Mapping[str, Any], at: str) -> list[str]:
    problems = _optional(raw, "hostname", at, precise_hostname_problem)
    return problems + _path_modifier(raw.get("path"), f"{at}.path")


def _redirect(raw: Mapping[str, Any], at: str) -> list[str]:
    problems = _optional(raw, "scheme", at, scheme_problem)
    problems += _optional(raw, "hostname", at, precise_hostname_problem)
    problems += _optional(raw, "port", at, port_problem)
    problems += _optional(raw, "statusCode", at, status_problem)
    return problems + _path_modifier(raw.get("path"), f"{at}.path")


def _cors(raw: Mapping[str, Any], at: str) -> list[str]:
    problems = []
    for i, origin in enumerate(_items(raw.get("allowOrigins"))):
        problems += _field(f"{at}.allowOrigins[{i}]", origin_problem(origin))
    # Gateway API HTTPCORSFilter.allowMethods: "any method defined by RFC9110, along with the
    # special value `*`"; RFC 9110 §9.1: method = token.
    for i, method in enumerate(_items(raw.get("allowMethods"))):
        problems += _field(f"{at}.allowMethods[{i}]", token_problem(method))
    # allowHeaders and exposeHeaders are HTTPHeaderNames; "*" is itself a token.
    for key in ("allowHeaders", "exposeHeaders"):
        for i, name in enumerate(_items(raw.get(key))):
            problems += _field(f"{at}.{key}[{i}]", token_problem(name))
    credentials = raw.get("allowCredentials")
    if credentials is not None and not isinstance(credentials, bool):
        problems.append(f"{at}.allowCredentials: {credentials!r} is not true or false")
    max_age = raw.get("maxAge")
    if max_age is not None and (
        isinstance(max_age, bool) or not isinstance(max_age, int) or max_age < 0
    ):
        problems.append(f"{at}.maxAge: {max_age!r} is not a whole number of seconds")
    return problems


Check = Callable[[Mapping[str, Any]], list[str]]


def _under(key: str, check: Callable[[Mapping[str, Any], str], list[str]]) -> Check:
    """A filter type's check, reading the filter's own field (`urlRewrite` for URLRewrite)."""
    return lambda entry: check(entry.get(key) or {}, key)


_CHECKS: dict[str, Check] = {
    "RequestHeaderModifier": _under("requestHeaderModifier", _header_modifier),
    "ResponseHeaderModifier": _under("responseHeaderModifier", _header_modifier),
    "URLRewrite": _under("urlRewrite", _url_rewrite),
    "RequestRedirect": _under("requestRedirect", _redirect),
    "CORS": _under("cors", _cors),
}
