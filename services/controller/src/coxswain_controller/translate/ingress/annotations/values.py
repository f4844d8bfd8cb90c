"""Annotation values as ingress-nginx reads them: booleans, numbers, lists, URLs.

Where it sits: `groups` parses each honoured annotation through these. Each parser returns the
value or raises `BadValue` saying why it cannot be honoured; the caller turns that into a
refusal naming the key and the value (a value that cannot be honoured makes the Ingress not
served, rather than served with a default it did not ask for).
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlsplit

__all__ = ["BadValue", "Url", "boolean", "duration", "integer", "items", "url"]

# Go's strconv.ParseBool, which ingress-nginx reads booleans with.
_TRUE = frozenset({"1", "t", "T", "TRUE", "true", "True"})
_FALSE = frozenset({"0", "f", "F", "FALSE", "false", "False"})
# nginx's $request_uri: the request's own path and query, the one variable a redirect keeps.
REQUEST_URI = "$request_uri"


class BadValue(ValueError):
    """An annotation value that cannot be honoured; the message says why."""


def boolean(text: str) -> bool:
    value = text.strip()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise BadValue("is not true or false")


def integer(text: str, *, low: int, high: int) -> int:
    value = text.strip()
    if not value.lstrip("-").isdigit() or not value.isascii():
        raise BadValue("is not a whole number")
    number = int(value)
    if not low <= number <= high:
        raise BadValue(f"is not between {low} and {high}")
    return number


def duration(seconds: int) -> str:
    """Seconds as a Gateway API Duration ("1h2m3s"): each part at most five digits."""
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    parts = [(hours, "h"), (minutes, "m"), (secs, "s")]
    return "".join(f"{n}{unit}" for n, unit in parts if n) or "0s"


def items(text: str) -> list[str]:
    """A comma-separated list, each item stripped, empty ones dropped."""
    return [item.strip() for item in text.split(",") if item.strip()]


@dataclass(frozen=True, slots=True)
class Url:
    """A redirect target: each part "" (or 0) when the URL leaves it to the request."""

    scheme: str
    hostname: str
    port: int
    path: str  # "" keeps the request's path (a relative URL, or one ending in $request_uri)


def url(text: str) -> Url:
    """An absolute http(s) URL, or an absolute path; `$request_uri` may end either."""
    value = text.strip()
    keep_path = value.endswith(REQUEST_URI)
    if keep_path:
        value = value[: -len(REQUEST_URI)]
    if "$" in value:
        raise BadValue("names an nginx variable other than a final $request_uri")
    if value.startswith("/") and not value.startswith("//"):
        return _relative(value, keep_path)
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise BadValue("is not an http or https URL")
    if parts.username is not None or parts.password is not None:
        raise BadValue("carries credentials")
    if parts.query or parts.fragment or value.endswith(("?", "#")):
        raise BadValue("carries a query or a fragment, which a redirect here cannot set")
    try:
        port = parts.port or 0
    except ValueError:
        raise BadValue("has a port that is not a number from 0 to 65535") from None
    if keep_path and parts.path:
        raise BadValue("puts a path before $request_uri, which a redirect here cannot prepend")
    return Url(parts.scheme, parts.hostname.lower(), port, "" if keep_path else parts.path or "/")


def _relative(value: str, keep_path: bool) -> Url:
    if keep_path:
        raise BadValue("puts a path before $request_uri, which a redirect here cannot prepend")
    if "?" in value or "#" in value:
        raise BadValue("carries a query or a fragment, which a redirect here cannot set")
    return Url("", "", 0, value)
