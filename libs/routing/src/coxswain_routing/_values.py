"""What a value may hold before it is written into an HTTP message head.

Where it sits: the model's `validate()` methods (`_model`) and `from_wire` (`_wire`) both call
these, so the controller refuses a route and the proxy refuses a snapshot by the same rules. A
route author controls these strings; one carrying CR LF would be written verbatim into a head
sent on a pooled upstream connection and add fields to it (or a request of its own), so every
value is checked before anything compiles it.

Why the shape: plain functions over one value each, returning None when the value may be
written and otherwise a sentence naming the rule it breaks; the caller adds the field's path.
The proxy's data plane checks the bytes it compiles again, independently of this module
(`coxswain_proxy.dataplane.framing`), so a bug in one still leaves the other.
"""

from __future__ import annotations

import ipaddress
import re

__all__ = [
    "FRAMING_FIELDS",
    "REDIRECT_STATUSES",
    "cors_origin",
    "delta_seconds",
    "field_value",
    "header_name",
    "hostname",
    "list_token",
    "path",
    "port",
    "redirect_status",
    "scheme",
    "token",
]

# RFC 9110 §5.6.2: token = 1*tchar; tchar = "!" / "#" / "$" / "%" / "&" / "'" / "*" / "+" /
# "-" / "." / "^" / "_" / "`" / "|" / "~" / DIGIT / ALPHA.
_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")

# RFC 9110 §5.5: field-value = *field-content; field-content = field-vchar
# [ 1*( SP / HTAB / field-vchar ) field-vchar ]; field-vchar = VCHAR / obs-text;
# obs-text = %x80-FF. So HTAB, SP, visible ASCII and octets 0x80-0xFF, and nothing else: no CR,
# LF, NUL or other control ("a recipient of CR, LF, or NUL within a field value MUST either
# reject the message or replace each of those characters with SP").
_FIELD_VALUE = re.compile(r"[\t\x20-\x7e\x80-\xff]*")
_OWS = " \t"

# Fields that frame the message or belong to one connection. RFC 9112 §6: Content-Length and
# Transfer-Encoding decide where a message body ends, so a route setting or removing them would
# desynchronise the proxy and its peer on a reused connection. RFC 9110 §7.6.1: Connection,
# and the fields it names (Keep-Alive, Proxy-Connection, TE, Trailer, Upgrade here), are
# connection-specific; the proxy writes its own.
FRAMING_FIELDS = frozenset(
    {"content-length", "transfer-encoding", "connection", "keep-alive", "proxy-connection", "te",
     "trailer", "upgrade"}
)  # fmt: skip

# RFC 1123 §2.1 host names: letters, digits and hyphens per label, a label neither starting
# nor ending with a hyphen; RFC 1035 §2.3.4: a label is at most 63 octets, a name 255 (253
# written without the root's dot).
_LABEL = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?")
_MAX_NAME = 253

# RFC 3986 §3.3: path = *( "/" / pchar ); pchar = unreserved / pct-encoded / sub-delims / ":"
# / "@"; unreserved = ALPHA / DIGIT / "-" / "." / "_" / "~"; pct-encoded = "%" HEXDIG HEXDIG;
# sub-delims = "!" / "$" / "&" / "'" / "(" / ")" / "*" / "+" / "," / ";" / "=". No space,
# no control, nothing outside ASCII, and no "?" or "#" (they end a path).
_PATH = re.compile(r"(?:[A-Za-z0-9\-._~!$&'()*+,;=:@/]|%[0-9A-Fa-f]{2})*")

# Gateway API HTTPRequestRedirectFilter.statusCode: 301 and 302 (core), 303, 307 and 308
# (extended); RFC 9110 §15.4 defines each as a redirection answered with a Location.
REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})

# RFC 6454 §7.1 / Fetch: a serialized origin is scheme "://" host [ ":" port ]; RFC 3986 §3.1:
# scheme = ALPHA *( ALPHA / DIGIT / "+" / "-" / "." ).
_ORIGIN = re.compile(r"([A-Za-z][A-Za-z0-9+\-.]*)://(\[[^\]]*\]|[^:/?#\[\]]*)(?::([0-9]+))?")


def token(value: str, what: str) -> str | None:
    """`what` must be an RFC 9110 token (a field name, a method)."""
    # RFC 9110 §5.6.2: token = 1*tchar.
    if _TOKEN.fullmatch(value):
        return None
    if not value:
        return f"{what} must not be empty (RFC 9110 §5.6.2: a token is 1*tchar)"
    bad = next(c for c in value if not _TOKEN.fullmatch(c))
    return f"{what} {value!r} is not a token: {bad!r} is not a tchar (RFC 9110 §5.6.2)"


def header_name(value: str) -> str | None:
    """A header a filter sets, adds or removes: a token the proxy does not frame with."""
    # RFC 9110 §5.1: field-name = token.
    problem = token(value, "header name")
    if problem is None and value.lower() in FRAMING_FIELDS:
        return (
            f"header {value!r} frames the message or its connection and cannot be modified "
            "(RFC 9112 §6, RFC 9110 §7.6.1)"
        )
    return problem


def list_token(value: str, what: str) -> str | None:
    """An element of a CORS list: "*" or a token (a method, a field name)."""
    return None if value == "*" else token(value, what)


def field_value(value: str) -> str | None:
    """A header value: field-vchar, SP and HTAB only, with no surrounding whitespace."""
    if not _FIELD_VALUE.fullmatch(value):
        bad = next(c for c in value if not _FIELD_VALUE.fullmatch(c))
        return f"header value {value!r} holds {bad!r}, which a field value may not (RFC 9110 §5.5)"
    # RFC 9110 §5.5: a field value does not include leading or trailing whitespace.
    if value != value.strip(_OWS):
        return f"header value {value!r} has leading or trailing whitespace (RFC 9110 §5.5)"
    return None


def _ip_literal(value: str) -> bool:
    # RFC 3986 §3.2.2: host = IP-literal / IPv4address / reg-name; IP-literal = "[" IPv6address
    # "]" (IPvFuture is not accepted). An IPv6 address is written in brackets.
    try:
        if value.startswith("[") and value.endswith("]"):
            ipaddress.IPv6Address(value[1:-1])
        else:
            ipaddress.IPv4Address(value)
    except ValueError:
        return False
    return True


def _dns_name(value: str) -> bool:
    labels = value.split(".")
    return len(value) <= _MAX_NAME and all(_LABEL.fullmatch(label) for label in labels)


def hostname(value: str, what: str = "hostname") -> str | None:
    """An RFC 1123 host name, an IPv4 address, or an IPv6 address in brackets."""
    if _ip_literal(value) or _dns_name(value):
        return None
    return (
        f"{what} {value!r} is neither an RFC 1123 host name (RFC 1123 §2.1) nor an IP literal "
        "(RFC 3986 §3.2.2; IPv6 in brackets)"
    )


def path(value: str) -> str | None:
    """A path written into a request target or a Location: absolute, RFC 3986 characters only."""
    # RFC 9112 §3.2.1: origin-form = absolute-path [ "?" query ]; absolute-path = 1*( "/" segment ).
    if not value.startswith("/"):
        return f"path {value!r} is not absolute: it must start with '/' (RFC 9112 §3.2.1)"
    if not _PATH.fullmatch(value):
        return (
            f"path {value!r} holds characters a URI path may not (RFC 3986 §3.3: no space, "
            "control, '?', '#' or non-ASCII; '%' starts two hex digits)"
        )
    return None


def scheme(value: str) -> str | None:
    """A redirect's scheme: "" (keep the request's), http or https."""
    # Gateway API HTTPRequestRedirectFilter.scheme: Enum=http;https.
    if value in ("", "http", "https"):
        return None
    return f"unsupported scheme {value!r}: only http and https are served"


def port(value: int) -> str | None:
    """A port a filter names: 0 (unset) or 1-65535."""
    # RFC 9293 §3.1: ports are 16-bit; Gateway API PortNumber: Minimum=1, Maximum=65535.
    if 0 <= value <= 65535:
        return None
    return f"port {value} is outside 1-65535"


def redirect_status(value: int) -> str | None:
    if value in REDIRECT_STATUSES:
        return None
    return f"unsupported status {value}: a redirect answers 301, 302, 303, 307 or 308"


def delta_seconds(value: int) -> str | None:
    """A max age: a non-negative number of seconds."""
    # RFC 9111 §1.2.2: delta-seconds = 1*DIGIT (Access-Control-Max-Age takes the same, Fetch).
    if value >= 0:
        return None
    return f"max age {value} is negative (RFC 9111 §1.2.2: delta-seconds = 1*DIGIT)"


def _origin_host(value: str) -> bool:
    # Gateway API HTTPCORSFilter.allowOrigins: the host may start with a "*." wildcard.
    if value.startswith("*."):
        value = value[2:]
    return _ip_literal(value) or _dns_name(value)


def _origin_port(value: str | None) -> bool:
    # RFC 6454 §7.1 writes a port only when it is not the scheme's default; it is then 1-65535.
    return value is None or 1 <= int(value) <= 65535


def cors_origin(value: str) -> str | None:
    """An allowed origin: "*", or scheme "://" host [":" port], the host maybe "*.suffix"."""
    if value == "*":
        return None
    found = _ORIGIN.fullmatch(value)
    if found is None or not _origin_host(found[2]) or not _origin_port(found[3]):
        return (
            f'origin {value!r} is not "*" or scheme://host[:port] '
            "(RFC 6454 §7.1; the host an RFC 1123 name, maybe after '*.')"
        )
    return None
