"""The data plane's own refusal of snapshot values that would break the framing of a head.

Where it sits: `tables` runs every value it compiles for a head through these (header plans,
the pieces of a redirect's Location, URL rewrites, CORS answers), once per snapshot, so
`compile_tables` raises `UnsafeField` instead of building tables that would write one. Staging
(`coxswain_proxy.discovery.snapshot`) compiles each changed route the same way before it Acks,
so a snapshot holding such a value is Nacked, naming the resource, and the last good one serves
on.

Why a second check: `coxswain_routing` already refuses these values in `validate()` and
`from_wire`. This one is written separately and applies to the bytes the request path will
write, so a bug in one still leaves the other. It checks only what can split a head or desync a
connection: CR, LF, NUL and the other controls, names that are not tokens, the fields that
frame a message, statuses that are not redirections. Nothing here runs per request.
"""

from __future__ import annotations

from string import ascii_letters, digits

from coxswain_routing import Cors, PathModifier, RequestRedirect, URLRewrite

__all__ = ["UnsafeField", "cors", "name", "redirect", "rewrite", "value"]


class UnsafeField(ValueError):
    """A snapshot value the data plane will not write into a head: the snapshot is refused."""


# RFC 9110 §5.6.2: tchar = "!" / "#" / "$" / "%" / "&" / "'" / "*" / "+" / "-" / "." / "^" /
# "_" / "`" / "|" / "~" / DIGIT / ALPHA; a field name (§5.1) and a method (§9.1) are tokens.
_TCHAR = frozenset(("!#$%&'*+-.^_`|~" + digits + ascii_letters).encode())
# RFC 9110 §5.5: "a recipient of CR, LF, or NUL within a field value MUST either reject the
# message or replace each of those characters with SP"; field-vchar excludes every other
# control but HTAB too, and DEL.
_CONTROLS = frozenset(range(0x20)) - {0x09} | {0x7F}
# RFC 9112 §6: Content-Length and Transfer-Encoding say where a body ends; RFC 9110 §7.6.1:
# Connection and the fields it governs are the connection's. The head writers set these
# themselves; a plan touching one would leave the proxy and its peer disagreeing on framing.
_FRAMING = frozenset(
    {b"content-length", b"transfer-encoding", b"connection", b"keep-alive", b"proxy-connection",
     b"te", b"trailer", b"upgrade"}
)  # fmt: skip
# Visible ASCII: what a request-target (RFC 9112 §3.2) or a Location URI (RFC 3986 §2) holds.
_VISIBLE = frozenset(range(0x21, 0x7F))
# RFC 9110 §15.4: the redirections a RequestRedirect answers with, each with a Location.
_REDIRECTS = frozenset({301, 302, 303, 307, 308})


def _token(text: str) -> bool:
    return bool(text) and text.isascii() and _TCHAR.issuperset(text.encode())


def name(text: str) -> bytes:
    """A header name a plan writes, as bytes: a token that does not frame the message."""
    if not _token(text):
        raise UnsafeField(f"header name {text!r} is not a token (RFC 9110 §5.6.2)")
    raw = text.encode()
    if raw.lower() in _FRAMING:
        raise UnsafeField(f"header {text!r} frames the message (RFC 9112 §6, RFC 9110 §7.6.1)")
    return raw


def value(text: str, what: str = "header") -> bytes:
    """A field value, as the latin-1 bytes written: no CR, LF, NUL or other control."""
    try:
        raw = text.encode("latin-1")
    except UnicodeEncodeError:
        raise UnsafeField(f"{what} value {text!r} is not latin-1 octets (RFC 9110 §5.5)") from None
    if not _CONTROLS.isdisjoint(raw):
        raise UnsafeField(f"{what} value {text!r} holds a control character (RFC 9110 §5.5)")
    return raw


def _piece(text: str, what: str) -> None:
    """A piece of a URI (a host, a path): visible ASCII only, so no space ends it early."""
    if not text.isascii() or not _VISIBLE.issuperset(text.encode()):
        raise UnsafeField(f"{what} {text!r} holds a space, a control or non-ASCII (RFC 3986 §2)")


def _path(modifier: PathModifier | None, what: str) -> None:
    if modifier is None or not modifier.value:
        return  # "" is the root
    _piece(modifier.value, what)
    # RFC 9112 §3.2.1: origin-form = absolute-path [ "?" query ].
    if not modifier.value.startswith("/"):
        raise UnsafeField(f"{what} {modifier.value!r} is not absolute (RFC 9112 §3.2.1)")


def redirect(filter_: RequestRedirect) -> None:
    """The status line and the Location pieces a redirect answers with."""
    if filter_.status_code not in _REDIRECTS:
        raise UnsafeField(f"redirect status {filter_.status_code} is not a redirection")
    if filter_.scheme not in ("", "http", "https"):
        raise UnsafeField(f"redirect scheme {filter_.scheme!r} is not http or https")
    if filter_.hostname:
        _piece(filter_.hostname, "redirect hostname")
    if not 0 <= filter_.port <= 65535:
        raise UnsafeField(f"redirect port {filter_.port} is not a port")
    _path(filter_.path, "redirect path")


def rewrite(filter_: URLRewrite) -> None:
    """The Host and the request-target a URL rewrite writes upstream."""
    if filter_.hostname:
        _piece(filter_.hostname, "rewrite hostname")
    _path(filter_.path, "rewrite path")


def cors(filter_: Cors) -> None:
    """What a CORS answer writes: lists of tokens (or "*"), a max age, origins compared."""
    lists = (
        ("method", filter_.allow_methods),
        ("allowed header", filter_.allow_headers),
        ("exposed header", filter_.expose_headers),
    )
    for what, items in lists:
        for item in items:
            if item != "*" and not _token(item):
                raise UnsafeField(f"CORS {what} {item!r} is not a token (RFC 9110 §5.6.2)")
    for origin in filter_.allow_origins:
        _piece(origin, "CORS origin")
    if filter_.max_age_seconds < 0:
        raise UnsafeField(f"CORS max age {filter_.max_age_seconds} is negative")
