"""Message heads as bytes: the request sent upstream and the response sent to the client.

Where it sits: `dispatch` builds the head sent upstream once per request, `request_cycle` the
one sent to the client once per response, and `upstream.connection` sorts a response's fields
as they arrive (`ResponseFields`). Pure functions over raw header lists, so the hop-by-hop and
X-Forwarded rules are tested on bytes.

RFC 9110 §7.6.1: "a proxy or gateway MUST parse a received Connection header field before a
message is forwarded and, for each connection-option in this field, remove any header or trailer
field(s) from the message with the same name as the connection-option, and then remove the
Connection header field itself". The fixed hop-by-hop names are removed as well. A
connection-option never removes what frames the message or names its host (Content-Length,
Transfer-Encoding, Host): the proxy writes those itself, and a body sent on without its length
would be read by the next hop as the start of another request.

RFC 9110 §7.6.3: "A proxy MUST send an appropriate Via header field, as described below, in
each message that it forwards." Each head gets one `via` line after the fields passed on, so
it comes after any Via the message carried already (lines of one field combine in order).

Why this shape (it runs for every request, and each header costs): one pass per head, no
lower-casing per header — a field name as the peer spelled it is looked up in a small cache of
what that spelling means (`_kind`), and most names mean "pass it on". Header lines go straight
into the list of pieces the caller joins into the one buffer it writes, so the only copy of a
head is that final join. The rare cases (a Connection header naming options, header plans) take
a second pass over what was kept.
"""

from __future__ import annotations

from coxswain_proxy.dataplane.http import corsfields, responses
from coxswain_proxy.dataplane.tables import BytesPlan, apply_plan

Headers = list[tuple[bytes, bytes]]

# The HTTP-versions served, as llhttp spells them (RFC 9112 §2.3: only 1.0 and 1.1 are).
HTTP10 = "1.0"
HTTP11 = "1.1"

CONNECTION = b"connection"
HOST = b"host"
HOP_BY_HOP = frozenset(
    {b"connection", b"keep-alive", b"proxy-connection", b"te", b"trailer", b"transfer-encoding",
     b"upgrade"}
)  # fmt: skip
# Request fields the proxy writes itself.
REQUEST_OWN = HOP_BY_HOP | {b"host", b"x-forwarded-for", b"x-forwarded-proto", b"x-forwarded-host"}
TRANSFER_ENCODING = b"transfer-encoding"
CONTENT_LENGTH = b"content-length"
XFF = b"x-forwarded-for"

# What a field name means here. 0 (falsy) is the common case: an ordinary field, passed on.
# HOP: dropped both ways; OWN: dropped from requests only (the proxy writes its own).
# DATE passes both ways, and tells a response carries one (`HAS_DATE`).
PASS, HOP, OWN, CONN, TE, XFF_, LENGTH, UPGRADE, DATE = range(9)
_MEANING = {
    **{name: HOP for name in HOP_BY_HOP},
    **{name: OWN for name in REQUEST_OWN - HOP_BY_HOP},
    CONNECTION: CONN,
    TRANSFER_ENCODING: TE,
    XFF: XFF_,
    CONTENT_LENGTH: LENGTH,
    b"upgrade": UPGRADE,
    b"date": DATE,
}
# Spellings seen so far -> meaning. Bounded: a client inventing names cannot grow it for ever.
_KINDS: dict[bytes, int] = {}
_MAX_KINDS = 4096

# Response framing flags (`client_response`'s result).
HAS_LENGTH = 1  # the upstream sent a Content-Length: bytes pass as they come
CHUNKED_IN = 2  # the upstream sent chunked
NAMES_FIELDS = 4  # (`ResponseFields` only) a Connection field names other fields to drop
HAS_DATE = 8  # the upstream sent a Date (else the proxy adds one: `responses.date_line`)


# Connection values that name no other field (the common ones): no second pass needed.
_PLAIN_CONNECTION = frozenset({b"keep-alive", b"close", b""})
# What a connection-option may not remove (see the module docstring): "close" and "keep-alive"
# name no field, and b"" is the empty element a list may hold (RFC 9110 §5.6.1).
_NOT_OPTIONS = (b"close", b"keep-alive", b"", CONTENT_LENGTH, TRANSFER_ENCODING, b"host")

# The Via line (RFC 9110 §7.6.3: received-protocol, then a pseudonym for this proxy), by the
# version of the message received, and followed by what comes next in a request head.
VIA_11 = b"via: 1.1 coxswain\r\n"
# How a forwarded response head ends, by framing and connection; each starts with its Via, so
# the line costs nothing of its own (`request_cycle` picks one per response).
KEEP_ALIVE_10_END = VIA_11 + b"connection: keep-alive\r\n\r\n"
CHUNKED_END = VIA_11 + responses.CHUNKED + b"\r\n"
CHUNKED_CLOSE_END = VIA_11 + responses.CHUNKED + responses.CLOSE + b"\r\n"
END = VIA_11 + b"\r\n"
CLOSE_END = VIA_11 + responses.CLOSE + b"\r\n"
VIA_10 = b"via: 1.0 coxswain\r\n"
_VIA_XFF = VIA_11 + b"x-forwarded-for: "
_VIA10_XFF = VIA_10 + b"x-forwarded-for: "


def _kind(name: bytes) -> int:
    kind = _KINDS.get(name)
    if kind is None:
        if len(_KINDS) >= _MAX_KINDS:
            _KINDS.clear()
        kind = _KINDS[name] = _MEANING.get(name.lower(), PASS)
    return kind


def _connection_options(headers: Headers) -> frozenset[bytes]:
    options: set[bytes] = set()
    for name, value in headers:
        if name.lower() == CONNECTION:
            options.update(o.strip().lower() for o in value.split(b","))
    options.difference_update(_NOT_OPTIONS)
    return frozenset(options)


def _without_options(kept: Headers, headers: Headers) -> Headers:
    """`kept` less the fields `headers`' Connection fields name (hop-by-hop ones kept on purpose,
    an Upgrade answer's, stay)."""
    options = _connection_options(headers)
    if not options:
        return kept
    return [(n, v) for n, v in kept if (k := n.lower()) in HOP_BY_HOP or k not in options]


def _host_from_plan(parts: list[bytes], pairs: Headers) -> Headers:
    """A modifier that sets Host replaces the Host line the head already has (`parts[4]`).

    RFC 9112 §3.2: a request carries exactly one Host field; spec 003 lets a
    RequestHeaderModifier set it. Removing it leaves the request's own (a request needs one).
    """
    kept: Headers = []
    for name, value in pairs:
        if name.lower() == HOST:
            parts[4] = value
        else:
            kept.append((name, value))
    return kept


def forwarded_tail(client: str, scheme: str) -> bytes:
    """What follows `x-forwarded-for: <earlier hops>, ` up to the host: fixed per connection."""
    return f"{client}\r\nx-forwarded-proto: {scheme}\r\nx-forwarded-host: ".encode("latin-1")


def upstream_request(
    method: bytes,
    target: bytes,
    headers: Headers,
    *,
    host: bytes,
    forwarded: bytes,
    plan: BytesPlan,
    upgrade: bytes = b"",
    close: bool = False,
    http10: bool = False,
) -> tuple[bytes, bool]:
    """The request head to send upstream, and whether the client sent its body chunked.

    `forwarded` comes from `forwarded_tail` (the client address and scheme, once per connection);
    `http10`: the client's request was HTTP/1.0 (its Via says so).
    """
    chunked = False
    xff = b""
    parts = [method, b" ", target, b" HTTP/1.1\r\nhost: ", host, b"\r\n"]
    kept: Headers | None = [] if plan else None  # plans apply to pairs: collect those first
    connection = False
    for name, value in headers:
        kind = _KINDS.get(name)
        if kind is None:
            kind = _kind(name)
        if not kind or kind in (LENGTH, DATE):
            if kept is None:
                parts += (name, b": ", value, b"\r\n")
            else:
                kept.append((name, value))
        elif kind == TE:
            chunked = b"chunked" in value.lower()
        elif kind == XFF_:
            xff = value + b", "
        elif kind == CONN and value.strip().lower() not in _PLAIN_CONNECTION:
            connection = True
    if connection or kept is not None:
        # The rare shapes: start again from the pairs, drop what Connection names, apply plans.
        del parts[6:]
        pairs = [(n, v) for n, v in headers if _kind(n) in (PASS, LENGTH, DATE)]
        if connection:
            pairs = _without_options(pairs, headers)
        if plan:
            pairs = apply_plan(plan, pairs)
            if any(key == HOST for key, _, _, _ in plan):
                pairs = _host_from_plan(parts, pairs)
        for name, value in pairs:
            parts += (name, b": ", value, b"\r\n")
    parts += (_VIA10_XFF if http10 else _VIA_XFF, xff, forwarded, host)
    if chunked:
        parts.append(b"\r\ntransfer-encoding: chunked")
    if upgrade:
        parts += (b"\r\nconnection: upgrade\r\nupgrade: ", upgrade, b"\r\n\r\n")
    elif close:
        parts += (b"\r\n", responses.CLOSE, b"\r\n")
    else:
        parts.append(b"\r\n\r\n")
    return b"".join(parts), chunked


def client_response(
    out: list[bytes],
    status: int,
    headers: Headers,
    *,
    plan: BytesPlan,
    extra: Headers,
    keep_upgrade: bool = False,
) -> int:
    """Append the status line and the headers the client gets to `out`; return framing flags.

    `extra` holds the fields of a rule's CORS filter, which replace the upstream's
    Access-Control-* fields (`corsfields`). The caller appends the framing fields and the
    blank line (they depend on the client).
    """
    flags = 0
    out.append(responses.status_line(status))
    start = len(out)
    connection = False
    for name, value in headers:
        kind = _KINDS.get(name)
        if kind is None:
            kind = _kind(name)
        if not kind:
            out += (name, b": ", value, b"\r\n")
        elif kind == LENGTH:
            flags |= HAS_LENGTH
            out += (name, b": ", value, b"\r\n")
        elif kind == DATE:
            flags |= HAS_DATE
            out += (name, b": ", value, b"\r\n")
        elif kind == TE:
            if b"chunked" in value.lower():
                flags |= CHUNKED_IN
        elif kind == CONN:
            connection = connection or value.strip().lower() not in _PLAIN_CONNECTION
        elif kind in (OWN, XFF_):
            # Host and X-Forwarded-* are the proxy's own on requests only: they pass here.
            out += (name, b": ", value, b"\r\n")
        if keep_upgrade and kind in (CONN, UPGRADE):
            out += (name, b": ", value, b"\r\n")
    if connection or plan:
        pairs = [(n, v) for n, v in headers if _passes(n, keep_upgrade)]
        if connection:
            pairs = _without_options(pairs, headers)
        if plan:
            pairs = apply_plan(plan, pairs)
        del out[start:]
        for name, value in pairs:
            out += (name, b": ", value, b"\r\n")
    if extra:
        corsfields.add(out, start, extra)
    return flags


class ResponseFields:
    """An HTTP/1.1 response head's fields, sorted as the parser reports them (`on_header`).

    A field that passes to the client goes straight into `lines` in the form the client's head
    takes (name, ": ", value, CRLF), so a plain response costs one cache lookup per field and
    no second pass; the hop-by-hop ones wait in `hop`. Reused by one upstream connection: the
    caller clears it before each head.
    """

    __slots__ = ("lines", "hop", "flags")

    def __init__(self) -> None:
        self.lines: list[bytes] = []
        self.hop: Headers = []  # the hop-by-hop fields, for the shapes that need them
        self.flags = 0  # HAS_LENGTH, CHUNKED_IN, NAMES_FIELDS

    def on_header(self, name: bytes, value: bytes) -> None:
        kind = _KINDS.get(name)
        if kind is None:
            kind = _kind(name)
        if not kind or kind in (OWN, XFF_):
            # Host and X-Forwarded-* are the proxy's own on requests only: they pass here.
            self.lines += (name, b": ", value, b"\r\n")
        elif kind == LENGTH:
            self.flags |= HAS_LENGTH
            self.lines += (name, b": ", value, b"\r\n")
        elif kind == DATE:
            self.flags |= HAS_DATE
            self.lines += (name, b": ", value, b"\r\n")
        else:
            self.hop.append((name, value))
            if kind == TE and b"chunked" in value.lower():
                self.flags |= CHUNKED_IN
            elif kind == CONN and value.strip().lower() not in _PLAIN_CONNECTION:
                self.flags |= NAMES_FIELDS

    def clear(self) -> None:
        self.lines = []
        self.hop = []
        self.flags = 0

    def size(self) -> int:
        """The fields' bytes as a head counts them (name, value, ": " and CRLF)."""
        return sum(map(len, self.lines)) + sum(len(n) + len(v) + 4 for n, v in self.hop)

    def pairs(self) -> Headers:
        """Every field as (name, value): those that pass in their order, then the others."""
        lines = self.lines
        return [*zip(lines[0::4], lines[2::4], strict=True), *self.hop]


def client_response_fields(
    out: list[bytes],
    status: int,
    fields: ResponseFields,
    *,
    plan: BytesPlan,
    extra: Headers,
    keep_upgrade: bool = False,
) -> int:
    """`client_response` for `ResponseFields`: the lines that pass are already made."""
    flags = fields.flags
    if plan or keep_upgrade or flags & NAMES_FIELDS:
        pairs = fields.pairs()
        return client_response(
            out, status, pairs, plan=plan, extra=extra, keep_upgrade=keep_upgrade
        )
    out.append(responses.status_line(status))
    start = len(out)
    out += fields.lines
    if extra:
        corsfields.add(out, start, extra)
    return flags


def drop_length(out: list[bytes], start: int) -> None:
    """Remove Content-Length from the field lines `out[start:]` holds (name, ": ", value, CRLF).

    RFC 9110 §8.6: "A server MUST NOT send a Content-Length header field in any response with
    a status code of 1xx (Informational) or 204 (No Content)."
    """
    i = start
    while i < len(out):
        if out[i].lower() == CONTENT_LENGTH:
            del out[i : i + 4]
        else:
            i += 4


def _passes(name: bytes, keep_upgrade: bool) -> bool:
    lower = name.lower()
    if lower in HOP_BY_HOP:
        return keep_upgrade and lower in (b"upgrade", CONNECTION)
    return True


def serialize(status: int, headers: Headers, tail: bytes) -> bytes:
    """Status line, headers, then `tail` (framing and connection fields, and the blank line)."""
    parts = [responses.status_line(status)]
    for name, value in headers:
        parts += (name, b": ", value, b"\r\n")
    parts.append(tail)
    return b"".join(parts)


def header(headers: Headers, wanted: bytes) -> bytes:
    """The first value of the field named `wanted` (lower case), or b"" when there is none."""
    for name, value in headers:
        if name.lower() == wanted:
            return value
    return b""


def has_body(headers: Headers) -> bool:
    """Whether a request head says a body follows (a non-zero length, or a coding)."""
    length = header(headers, b"content-length").strip()
    return bool(length and length != b"0") or bool(header(headers, b"transfer-encoding"))


def encoded(headers: list[tuple[str, str]]) -> Headers:
    """Fields made as text (filters' answers, a redirect's Location), as bytes."""
    return [(n.encode("latin-1"), v.encode("latin-1")) for n, v in headers]
