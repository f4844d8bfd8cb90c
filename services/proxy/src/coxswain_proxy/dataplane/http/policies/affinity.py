"""Session affinity by cookie, and the canary's cookie split: a cookie choosing where to go.

Where it sits: `dispatch` asks `pick_slot` for the backend slot of a rule with a cookie split
(ingress-nginx's canary-by-cookie: "always" to the canary, "never" to the main backend, any
other value the weighted pick) and `pick_origin` for the endpoint of a rule with affinity.

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
from typing import TYPE_CHECKING

from coxswain_routing import Backend, Candidate, CookieSplit, SessionAffinity

if TYPE_CHECKING:
    from coxswain_proxy.dataplane.http.request_cycle import RequestCycle
    from coxswain_proxy.dataplane.upstream.picker import EndpointPicker, Origin

__all__ = ["Affinity", "cookie_value", "endpoint_token", "split_pick"]

_COOKIE = b"cookie"
SET_COOKIE = b"set-cookie"


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


class _Index:
    __slots__ = ("picker", "origins")

    def __init__(self, picker: EndpointPicker) -> None:
        self.picker = picker
        self.origins = {endpoint_token(o): o for o in picker.origins}


class Affinity:
    __slots__ = ("name", "attributes", "expires", "index")

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
        self.index: _Index | None = None

    def _origins(self, picker: EndpointPicker) -> dict[bytes, Origin]:
        index = self.index
        if index is None or index.picker is not picker:
            index = self.index = _Index(picker)
        return index.origins

    def pick_origin(self, cycle: RequestCycle, picker: EndpointPicker) -> Origin | None:
        """The endpoint the cookie names while it is ready; else the usual pick, and a cookie
        naming it on the answer."""
        token = cookie_value(cycle.headers, self.name)
        if token is not None:
            origin = self._origins(picker).get(token)
            if origin is not None:
                return origin
        origin = picker.pick()
        if origin is not None:
            cycle.cors.append((SET_COOKIE, self._set_cookie(endpoint_token(origin))))
        return origin

    def _set_cookie(self, token: bytes) -> bytes:
        # RFC 6265 §4.1.1: set-cookie-string = cookie-pair *( ";" SP cookie-av ).
        value = self.name + b"=" + token + self.attributes
        if self.expires:
            when = formatdate(time.time() + self.expires, usegmt=True)
            value += b"; Expires=" + when.encode()
        return value


def split_pick(cycle: RequestCycle, cand: Candidate, split: CookieSplit) -> Backend:
    """The slot the canary cookie names ("always": the canary's, "never": the main one's);
    any other value, or none, leaves the weighted pick (ingress-nginx's canary-by-cookie)."""
    value = cookie_value(cycle.headers, split.cookie.encode("latin-1"))
    if value == b"always":
        return cand.rule.backends[split.always]
    if value == b"never":
        return cand.rule.backends[split.never]
    return cand.backends.pick()
