"""Wire form of a rule's `Policy` (see `_wire`, `_wire_rules`).

An empty policy is no message at all (`Rule.policy` None), so a rule without one costs no
bytes and hashes as it did before policies existed. Defaults the proto cannot tell from unset
(an ExternalAuth's method, redirect parameter and timeout) are written as they are and read
back to the model's defaults when zero.
"""

from __future__ import annotations

from coxswain_proto.gen.coxswain.discovery import v1 as pb
from coxswain_routing import _policy as p
from coxswain_routing._wire_tables import back

__all__ = ["policy_back", "policy_to_wire"]

_KEY = {p.RateKey.CLIENT_ADDRESS: pb.RateKey.CLIENT_ADDRESS, p.RateKey.ROUTE: pb.RateKey.ROUTE}
_KEY_BACK = {v: k for k, v in _KEY.items()}
_SAME_SITE = {
    p.SameSite.NONE_SET: pb.SameSite.UNSET,
    p.SameSite.STRICT: pb.SameSite.STRICT,
    p.SameSite.LAX: pb.SameSite.LAX,
    p.SameSite.NONE: pb.SameSite.NONE,
}
_SAME_SITE_BACK = {v: k for k, v in _SAME_SITE.items()}
_STYLE = {
    p.AuthStyle.AUTH_REQUEST: pb.AuthStyle.AUTH_REQUEST,
    p.AuthStyle.EXT_AUTHZ: pb.AuthStyle.EXT_AUTHZ,
}
_STYLE_BACK = {v: k for k, v in _STYLE.items()}


def _ranges(r: p.SourceRanges | None) -> pb.SourceRanges | None:
    return None if r is None else pb.SourceRanges(allow=list(r.allow), deny=list(r.deny))


def _rate(r: p.RateLimit) -> pb.RateLimit:
    return pb.RateLimit(
        requests=r.requests,
        period_seconds=r.period_seconds,
        burst=r.burst,
        key=_KEY[r.key],
        exempt=list(r.exempt),
    )


def _rate_back(r: pb.RateLimit) -> p.RateLimit:
    key = back(_KEY_BACK, r.key, "rate limit key")
    return p.RateLimit(r.requests, r.period_seconds, r.burst, key, tuple(r.exempt))


def _basic(b: p.BasicAuth | None) -> pb.BasicAuth | None:
    if b is None:
        return None
    users = [pb.BasicAuthUser(user=u, hash=h) for u, h in b.users]
    return pb.BasicAuth(realm=b.realm, users=users, source=b.source)


def _external(e: p.ExternalAuth | None) -> pb.ExternalAuth | None:
    if e is None:
        return None
    return pb.ExternalAuth(
        endpoints=e.endpoints,
        host=e.host,
        path=e.path,
        method=e.method,
        response_headers=list(e.response_headers),
        signin=e.signin,
        signin_redirect_param=e.signin_redirect_param,
        timeout_ms=e.timeout_ms,
        style=_STYLE[e.style],
        request_headers=list(e.request_headers),
    )


def _external_back(e: pb.ExternalAuth) -> p.ExternalAuth:
    return p.ExternalAuth(
        endpoints=e.endpoints,
        host=e.host,
        path=e.path,
        method=e.method or "GET",
        response_headers=tuple(e.response_headers),
        signin=e.signin,
        signin_redirect_param=e.signin_redirect_param or "rd",
        timeout_ms=e.timeout_ms or 5000,
        style=back(_STYLE_BACK, e.style, "external auth style"),
        request_headers=tuple(e.request_headers),
    )


def _affinity(a: p.SessionAffinity | None) -> pb.SessionAffinity | None:
    if a is None:
        return None
    return pb.SessionAffinity(
        cookie=a.cookie,
        path=a.path,
        max_age_seconds=a.max_age_seconds,
        expires_seconds=a.expires_seconds,
        same_site=_SAME_SITE[a.same_site],
        secure=a.secure,
        http_only=a.http_only,
    )


def _affinity_back(a: pb.SessionAffinity) -> p.SessionAffinity:
    same_site = back(_SAME_SITE_BACK, a.same_site, "SameSite")
    return p.SessionAffinity(
        cookie=a.cookie,
        path=a.path,
        max_age_seconds=a.max_age_seconds,
        expires_seconds=a.expires_seconds,
        same_site=same_site,
        secure=a.secure,
        http_only=a.http_only,
    )


def _split(c: p.CookieSplit | None) -> pb.CookieSplit | None:
    return None if c is None else pb.CookieSplit(cookie=c.cookie, always=c.always, never=c.never)


def _client(c: p.ClientCertificate | None) -> pb.ClientCertificate | None:
    if c is None:
        return None
    return pb.ClientCertificate(
        store=c.store,
        required=c.required,
        max_chain=c.max_chain,
        subject=c.subject,
        pass_certificate=c.pass_certificate,
        error_page=c.error_page,
    )


def _client_back(c: pb.ClientCertificate) -> p.ClientCertificate:
    return p.ClientCertificate(
        c.store, c.required, c.max_chain, c.subject, c.pass_certificate, c.error_page
    )


def policy_to_wire(x: p.Policy | None) -> pb.Policy | None:
    if x is None or x.empty:
        return None
    return pb.Policy(
        source_ranges=_ranges(x.source_ranges),
        max_body_bytes=x.max_body_bytes,
        rate_limits=[_rate(r) for r in x.rate_limits],
        connections_per_client=x.connections_per_client,
        basic_auth=_basic(x.basic_auth),
        external_auth=_external(x.external_auth),
        affinity=_affinity(x.affinity),
        cookie_split=_split(x.cookie_split),
        access_log=x.access_log,
        client_certificate=_client(x.client_certificate),
    )


def policy_back(x: pb.Policy | None) -> p.Policy | None:
    if x is None:
        return None
    r, b, e, a, c = x.source_ranges, x.basic_auth, x.external_auth, x.affinity, x.cookie_split
    k = x.client_certificate
    policy = p.Policy(
        source_ranges=None if r is None else p.SourceRanges(tuple(r.allow), tuple(r.deny)),
        max_body_bytes=x.max_body_bytes,
        rate_limits=tuple(_rate_back(limit) for limit in x.rate_limits),
        connections_per_client=x.connections_per_client,
        basic_auth=None
        if b is None
        else p.BasicAuth(b.realm, tuple((u.user, u.hash) for u in b.users), b.source),
        external_auth=None if e is None else _external_back(e),
        affinity=None if a is None else _affinity_back(a),
        cookie_split=None if c is None else p.CookieSplit(c.cookie, c.always, c.never),
        access_log=x.access_log,
        client_certificate=None if k is None else _client_back(k),
    )
    return None if policy.empty else policy
