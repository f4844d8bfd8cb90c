"""Session affinity by cookie, and the canary's cookie split: a cookie choosing where to go.

Where it sits: `dispatch` asks `Affinity.pinned` for the slot and endpoint a rule with
affinity's cookie names, then `split_pick` for the slot of a rule with a cookie split
(ingress-nginx's canary-by-cookie: "always" to the canary, "never" to the main backend, any
other value the weighted pick), and `Affinity.remember` sets the cookie on an answer whose
endpoint no cookie named. A cookie names an endpoint of any of the rule's slots, so a client
sent to a canary by weight stays there (ingress-nginx's default `affinity-canary-behavior`,
sticky).

Affinity (ingress-nginx's `affinity: cookie`): the first answer sets a cookie whose value names
the endpoint that served it (a digest of its address and port, so nothing about the network is
told); a later request carrying it goes to that endpoint while the endpoint is ready (the
picker's origins are the ready endpoints), and to the usual pick, with a new cookie, when it
is not. The digests of a picker's origins are computed once per picker (`_Index`): a picker
lives as long as its endpoint set, so a change of endpoints makes a new index.
"""

from __future__ import annotations

import hashlib
import time
from email.utils import formatdate
from typing import TYPE_CHECKING, Protocol

from coxswain_routing import Backend, Candidate, CookieSplit, SessionAffinity

if TYPE_CHECKING:
    from coxswain_proxy.dataplane.upstream.picker import EndpointPicker, Origin

__all__ = ["Affinity", "CookieBearer", "PickerSource", "cookie_value", "endpoint_token",
           "split_pick"]  # fmt: skip

_COOKIE = b"cookie"
MAX_INDEXES = 64  # pickers indexed per rule (its slots, across endpoint changes)
SET_COOKIE = b"set-cookie"


class CookieBearer(Protocol):
    """A request as a cookie chooses for it (a `RequestCycle`; `tables` compiles this module,
    so it never imports the cycle's): its fields, and those its answer carries."""

    headers: list[tuple[bytes, bytes]]

    @property
    def cors(self) -> list[tuple[bytes, bytes]]:
        """Fields every answer to the request carries."""


class PickerSource(Protocol):
    """Where a slot's endpoints are found (`tables.Tables`)."""

    def picker(self, backend: Backend) -> EndpointPicker | None: ...


def cookie_value(headers: list[tuple[bytes, bytes]], name: bytes) -> bytes | None:
    """The value of the cookie `name` in the request's Cookie fields (RFC 6265 §5.4: pairs
    separated by "; "), the first one when it is sent twice; None when absent."""
    wanted = name + b"="
    for field, value in headers:
        if len(field) != 6 or field.lower() != _COOKIE:
            continue
        for pair in value.split(b";"):
            pair = pair.strip()
            if pair.startswith(wanted):
                return pair[len(wanted) :].strip(b'"')
    return None


def endpoint_token(origin: Origin) -> bytes:
    return hashlib.sha256(f"{origin[0]}:{origin[1]}".encode()).hexdigest()[:20].encode()


class Affinity:
    __slots__ = ("name", "attributes", "expires", "indexes")

    def __init__(self, affinity: SessionAffinity) -> None:
        self.name = affinity.cookie.encode("latin-1")
        parts = [f"Path={affinity.path}"]
        if affinity.max_age_seconds:
            parts.append(f"Max-Age={affinity.max_age_seconds}")
        if affinity.same_site:
            parts.append(f"SameSite={affinity.same_site.value}")
        if affinity.secure:
            parts.append("Secure")
        if affinity.http_only:
            parts.append("HttpOnly")
        self.attributes = ("; " + "; ".join(parts)).encode("latin-1")
        self.expires = affinity.expires_seconds
        # Each slot's picker and its origins by token; a picker lives as long as its endpoint
        # set, so a new one (new endpoints) gets a new index.
        self.indexes: dict[int, tuple[EndpointPicker, dict[bytes, Origin]]] = {}

    def _origins(self, picker: EndpointPicker) -> dict[bytes, Origin]:
        found = self.indexes.get(id(picker))
        if found is None or found[0] is not picker:
            if len(self.indexes) >= MAX_INDEXES:
                self.indexes.clear()
            found = self.indexes[id(picker)] = (
                picker,
                {endpoint_token(o): o for o in picker.origins},
            )
        return found[1]

    def pinned(
        self, cycle: CookieBearer, tables: PickerSource, backends: tuple[Backend, ...]
    ) -> tuple[Backend, Origin] | None:
        """The slot and endpoint the request's cookie names, while that endpoint is ready."""
        token = cookie_value(cycle.headers, self.name)
        if token is None:
            return None
        for backend in backends:
            picker = tables.picker(backend) if backend.resolved else None
            origin = self._origins(picker).get(token) if picker is not None else None
            if origin is not None:
                return backend, origin
        return None

    def remember(self, cycle: CookieBearer, origin: Origin) -> None:
        """The answer sets the cookie naming `origin`."""
        # RFC 6265 §4.1.1: set-cookie-string = cookie-pair *( ";" SP cookie-av ).
        value = self.name + b"=" + endpoint_token(origin) + self.attributes
        if self.expires:
            when = formatdate(time.time() + self.expires, usegmt=True)
            value += b"; Expires=" + when.encode()
        cycle.cors.append((SET_COOKIE, value))


def split_pick(cycle: CookieBearer, cand: Candidate, split: CookieSplit) -> Backend:
    """The slot the canary cookie names ("always": the canary's, "never": the main one's);
    any other value, or none, leaves the weighted pick (ingress-nginx's canary-by-cookie)."""
    value = cookie_value(cycle.headers, split.cookie.encode("latin-1"))
    if value == b"always":
        return cand.rule.backends[split.always]
    if value == b"never":
        return cand.rule.backends[split.never]
    return cand.backends.pick()
