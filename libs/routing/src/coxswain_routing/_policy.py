"""The policy model: what a rule asks of a request before it is sent on, beyond its filters.

Where it sits: a `Rule` carries one `Policy` (or None). The controller compiles it from an
Ingress's ingress-nginx annotations and from the CoxswainPolicies attached to a Gateway API
route (merged, the most specific target winning field by field: `Policy.over`); `_wire` carries
it to the proxy, whose `dataplane.http.policies` applies it on the request path after the rule
is matched and before a backend is picked. Every type is a frozen, slotted value, like the rest
of the model, so a snapshot holding policies is shared across requests without copies.

What each part means on the request path, in the order the proxy applies them:
- `SourceRanges`: the client's address (the peer of the connection) against CIDR lists; 403.
- `max_body_bytes`: a Content-Length above it answers 413 before anything is sent; a chunked
  body is counted as it streams and cut off with 413 (or a closed connection, once a response
  has begun) when it grows past it.
- `RateLimit`s and `connections_per_client`: a token bucket per key (the client's address, or
  the rule); 429 with Retry-After. The connection limit bounds the requests one client address
  has in flight on the rule at once (nginx's limit_conn counts the same).
- `BasicAuth`: htpasswd entries (bcrypt, apr1, {SHA}); 401 with WWW-Authenticate.
- `ExternalAuth`: the request's head sent to an auth service, in one of two styles
  (`AuthStyle`). ingress-nginx's auth_request: 2xx lets it through (some of the answer's fields
  copied onto it), 401 and 403 answer it (401 may redirect to a sign-in URL). The Gateway API's
  ExternalAuth filter (GEP-1494, Envoy's ext_authz over HTTP): 200 lets it through, any other
  answer goes to the client as the auth service gave it.
- `SessionAffinity`: a cookie naming the endpoint served, honoured while that endpoint is ready.
- `CookieSplit`: a cookie whose value "always" or "never" picks a backend slot (a canary).
- `access_log`: the proxy writes a line of JSON for each request of the rule, once answered.
- `ClientCertificate` (`_client_certificate`): the client certificate the connection's
  handshake verified, checked before everything else (421, 400, 403) and passed on in fields.

`validate()` returns named problems, as the model's other types do; `value_problems()` are the
ones that would put something unsafe into a head (the realm, a cookie's attributes, header
names), which `from_wire` refuses too.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass, fields, replace
from enum import StrEnum

from coxswain_routing import _values
from coxswain_routing._client_certificate import ClientCertificate
from coxswain_routing._problem import Problem

__all__ = [
    "AuthStyle",
    "BasicAuth",
    "ClientCertificate",
    "CookieSplit",
    "ExternalAuth",
    "HASH_SCHEMES",
    "Policy",
    "RateKey",
    "RateLimit",
    "SameSite",
    "SessionAffinity",
    "SourceRanges",
    "hash_scheme",
    "parse_cidr",
]

# The htpasswd hash schemes served, by prefix (Apache's htpasswd -B, -m and -s).
HASH_SCHEMES = {"$2y$": "bcrypt", "$2b$": "bcrypt", "$2a$": "bcrypt", "$apr1$": "apr1",
                "{SHA}": "sha1"}  # fmt: skip
# RFC 6265 §4.1.1: cookie-name = token; cookie-av values hold no CTL and no ";".
_COOKIE_ATTRIBUTE = re.compile(r"[\x21-\x3a\x3c-\x7e]*")
# The nginx variables a sign-in URL may name (`ExternalAuth.signin`), the proxy fills them in.
SIGNIN_VARIABLES = ("$escaped_request_uri", "$request_uri", "$http_host", "$host", "$scheme")
_VARIABLE = re.compile(r"\$[a-z_]+")
MAX_USERS = 10_000


def parse_cidr(text: str) -> ipaddress.IPv4Network | ipaddress.IPv6Network:
    """A CIDR (or a bare address, a /32 or /128); ValueError when it is neither. Host bits set
    are allowed, as nginx's allow/deny allow them."""
    return ipaddress.ip_network(text.strip(), strict=False)


def hash_scheme(hashed: str) -> str | None:
    """The scheme of an htpasswd hash ("bcrypt", "apr1", "sha1"); None: not one served."""
    for prefix, scheme in HASH_SCHEMES.items():
        if hashed.startswith(prefix):
            return scheme
    return None


def _cidr_problems(cidrs: tuple[str, ...], at: str) -> list[Problem]:
    problems = []
    for i, cidr in enumerate(cidrs):
        try:
            parse_cidr(cidr)
        except (ValueError, AttributeError):  # AttributeError: not a string at all
            problems.append(Problem(f"{at}[{i}]", f"{cidr!r} is not a CIDR or an IP address"))
    return problems


def _found(at: str, message: str | None) -> list[Problem]:
    return [] if message is None else [Problem(at, message)]


@dataclass(frozen=True, slots=True)
class SourceRanges:
    allow: tuple[str, ...] = ()  # CIDRs; when any is given, only these clients are served
    deny: tuple[str, ...] = ()  # CIDRs refused whatever `allow` says (checked first)

    def validate(self, at: str) -> list[Problem]:
        problems = _cidr_problems(self.allow, f"{at}.allow")
        problems += _cidr_problems(self.deny, f"{at}.deny")
        if not self.allow and not self.deny:
            problems.append(Problem(at, "names no range"))
        return problems


class RateKey(StrEnum):
    CLIENT_ADDRESS = "ClientAddress"  # a bucket per client address
    ROUTE = "Route"  # one bucket for the rule, every client sharing it


@dataclass(frozen=True, slots=True)
class RateLimit:
    requests: int  # tokens added per period
    period_seconds: int = 1  # 1 (requests per second) or 60 (per minute)
    burst: int = 0  # the bucket's size: requests admitted at once; 0: `requests`
    key: RateKey = RateKey.CLIENT_ADDRESS
    exempt: tuple[str, ...] = ()  # CIDRs of clients never limited

    @property
    def capacity(self) -> int:
        return self.burst or self.requests

    def validate(self, at: str) -> list[Problem]:
        problems = _cidr_problems(self.exempt, f"{at}.exempt")
        if self.requests < 1:
            problems.append(Problem(f"{at}.requests", "must be at least 1"))
        if self.period_seconds not in (1, 60):
            problems.append(Problem(f"{at}.period", "must be a second or a minute"))
        if self.burst < 0:
            problems.append(Problem(f"{at}.burst", "must not be negative"))
        return problems


@dataclass(frozen=True, slots=True)
class BasicAuth:
    realm: str  # WWW-Authenticate: Basic realm="<realm>"
    users: tuple[tuple[str, str], ...]  # (user, htpasswd hash), sorted by user, each user once
    source: str = ""  # "<namespace>/<secret name>" the entries came from

    def validate(self, at: str) -> list[Problem]:
        problems = self.value_problems(at)
        if not self.users:
            problems.append(Problem(f"{at}.users", "names no user"))
        if len(self.users) > MAX_USERS:
            problems.append(Problem(f"{at}.users", f"holds more than {MAX_USERS} users"))
        names = [user for user, _ in self.users]
        if len(set(names)) != len(names):
            problems.append(Problem(f"{at}.users", "names a user more than once"))
        for i, (user, hashed) in enumerate(self.users):
            if not user or ":" in user:
                problems.append(Problem(f"{at}.users[{i}]", "a user name is non-empty, no ':'"))
            if hash_scheme(hashed) is None:
                schemes = ", ".join(sorted(set(HASH_SCHEMES.values())))
                problems.append(
                    Problem(f"{at}.users[{i}]", f"user {user!r}: not a {schemes} htpasswd hash")
                )
        return problems

    def value_problems(self, at: str) -> list[Problem]:
        # The realm is written inside a quoted-string (RFC 9110 §5.6.4): no quote, no backslash.
        problem = _values.field_value(self.realm)
        if problem is None and ('"' in self.realm or "\\" in self.realm):
            problem = "a realm holds no '\"' or '\\'"
        return _found(f"{at}.realm", problem)


class AuthStyle(StrEnum):
    """How an `ExternalAuth` asks its auth service, and how it reads the answer."""

    # ingress-nginx's auth_request (the auth-url annotation, a CoxswainPolicy): the policy's
    # method, Host and target; every field of the client's head beside X-Original-URL and its
    # kin; 2xx passes, 401 and 403 answer the client, anything else is 500.
    AUTH_REQUEST = "AuthRequest"
    # The Gateway API's ExternalAuth filter, protocol HTTP (GEP-1494; Envoy's ext_authz over
    # HTTP): the client's method and Host, `path` put before the client's target, Authorization
    # and `request_headers` only, Content-Length 0; 200 passes (`response_headers` copied, or
    # every field of the answer when it names none), any other answer goes to the client as
    # the auth service gave it (status, fields, body).
    EXT_AUTHZ = "ExtAuthz"


@dataclass(frozen=True, slots=True)
class ExternalAuth:
    endpoints: str  # the EndpointSet key of the auth service's port ("" : unresolved, 500)
    host: str  # AUTH_REQUEST: the Host the auth request names; EXT_AUTHZ: "" (the client's)
    # AUTH_REQUEST: the auth request's target, path and query; EXT_AUTHZ: a path put before
    # the client's target ("" for none).
    path: str
    method: str = "GET"  # AUTH_REQUEST's; EXT_AUTHZ sends the client's method
    # Fields of a passing answer copied onto the request sent on (lower-cased names).
    response_headers: tuple[str, ...] = ()
    # On 401: a 302 to this URL (its $host, $scheme, $request_uri ... filled in), with
    # `signin_redirect_param`=<the original URL> added when it names no such parameter.
    signin: str = ""
    signin_redirect_param: str = "rd"
    timeout_ms: int = 5000  # the auth exchange's bound: past it, 500 (as nginx answers)
    style: AuthStyle = AuthStyle.AUTH_REQUEST
    # EXT_AUTHZ: the client's fields sent beside Authorization (lower-cased names).
    request_headers: tuple[str, ...] = ()

    def validate(self, at: str) -> list[Problem]:
        problems = self.value_problems(at)
        if not 0 < self.timeout_ms <= 3_600_000:
            problems.append(Problem(f"{at}.timeout", "must be between 1 ms and an hour"))
        return problems

    def value_problems(self, at: str) -> list[Problem]:
        problems = self._target_problems(at)
        problems += _found(f"{at}.method", _values.token(self.method, "method"))
        problems += _names(self.response_headers, f"{at}.responseHeaders")
        problems += _names(self.request_headers, f"{at}.requestHeaders")
        problems += self._signin_problems(at)
        problems += _found(
            f"{at}.signinRedirectParam", _values.token(self.signin_redirect_param, "parameter")
        )
        return problems

    def _target_problems(self, at: str) -> list[Problem]:
        if self.style is AuthStyle.EXT_AUTHZ:
            problems: list[Problem] = []
            if self.host:
                problems.append(Problem(f"{at}.host", "must be empty: the client's Host is sent"))
            if self.path:
                problems += _found(f"{at}.path", _values.path(self.path))
            return problems
        target = self.path.split("?", 1)[0]
        problems = _found(f"{at}.host", _values.hostname(self.host.split(":", 1)[0]))
        problems += _found(f"{at}.path", _values.path(target))
        if not _values_ok(self.path):
            problems.append(Problem(f"{at}.path", "holds characters a request target may not"))
        return problems

    def _signin_problems(self, at: str) -> list[Problem]:
        if not self.signin:
            return []
        if self.style is AuthStyle.EXT_AUTHZ:
            return [Problem(f"{at}.signin", "a sign-in URL is auth_request's (AuthRequest)")]
        unknown = [v for v in _VARIABLE.findall(self.signin) if v not in SIGNIN_VARIABLES]
        if unknown:
            return [Problem(f"{at}.signin", f"names the variable {unknown[0]}, not one served")]
        if not self.signin.startswith(("http://", "https://", "/")) or not _values_ok(self.signin):
            return [Problem(f"{at}.signin", "is not an http(s) URL or an absolute path")]
        return []


def _names(names: tuple[str, ...], at: str) -> list[Problem]:
    problems = []
    for i, name in enumerate(names):
        problems += _found(f"{at}[{i}]", _values.header_name(name))
        if name != name.lower():
            problems.append(Problem(f"{at}[{i}]", "must be lower-cased"))
    return problems


def _values_ok(text: str) -> bool:
    """A URL or target as written into a head: visible ASCII only."""
    return bool(text) and text.isascii() and all(0x21 <= ord(c) <= 0x7E for c in text)


class SameSite(StrEnum):
    NONE_SET = ""  # no SameSite attribute
    STRICT = "Strict"
    LAX = "Lax"
    NONE = "None"


@dataclass(frozen=True, slots=True)
class SessionAffinity:
    cookie: str = "INGRESSCOOKIE"  # the cookie's name
    path: str = "/"  # its Path attribute
    max_age_seconds: int = 0  # its Max-Age; 0: a session cookie
    expires_seconds: int = 0  # an Expires this far ahead; 0: none
    same_site: SameSite = SameSite.NONE_SET
    secure: bool = False  # its Secure attribute
    http_only: bool = True

    def validate(self, at: str) -> list[Problem]:
        problems = self.value_problems(at)
        for name in ("max_age_seconds", "expires_seconds"):
            if getattr(self, name) < 0:
                problems.append(Problem(f"{at}.{name}", "must not be negative"))
        return problems

    def value_problems(self, at: str) -> list[Problem]:
        problems = _found(f"{at}.cookie", _values.token(self.cookie, "cookie name"))
        if not self.path.startswith("/") or not _COOKIE_ATTRIBUTE.fullmatch(self.path):
            problems.append(Problem(f"{at}.path", "is not an absolute path a cookie may carry"))
        return problems


@dataclass(frozen=True, slots=True)
class CookieSplit:
    """ingress-nginx's canary-by-cookie: the cookie's value "always" sends the request to the
    slot `always`, "never" to the slot `never`; any other value leaves the weighted pick."""

    cookie: str
    always: int  # an index into the rule's backends (the canary)
    never: int  # an index into the rule's backends (the main one)

    def validate(self, at: str, backends: int) -> list[Problem]:
        problems = _found(f"{at}.cookie", _values.token(self.cookie, "cookie name"))
        for name in ("always", "never"):
            if not 0 <= getattr(self, name) < backends:
                problems.append(Problem(f"{at}.{name}", "is not one of the rule's backends"))
        return problems


@dataclass(frozen=True, slots=True)
class Policy:
    """Every policy one rule applies; each part None (or 0, or empty) when it asks nothing."""

    source_ranges: SourceRanges | None = None
    max_body_bytes: int = 0  # 0: no limit
    rate_limits: tuple[RateLimit, ...] = ()  # each must admit the request
    connections_per_client: int = 0  # requests in flight per client address; 0: no limit
    basic_auth: BasicAuth | None = None
    external_auth: ExternalAuth | None = None
    affinity: SessionAffinity | None = None
    cookie_split: CookieSplit | None = None
    access_log: bool = False  # the proxy writes a JSON line per request of the rule
    client_certificate: ClientCertificate | None = None

    @property
    def empty(self) -> bool:
        return self == Policy()

    def over(self, base: Policy) -> Policy:
        """This policy merged over `base`: each part this one sets wins (GEP-713: the more
        specific target's policy overrides, field by field)."""
        changes = {
            f.name: getattr(self, f.name)
            for f in fields(self)
            if getattr(self, f.name) not in (None, 0, ())
        }
        return replace(base, **changes)

    def validate(self, at: str = "policy", backends: int = 0) -> list[Problem]:
        problems: list[Problem] = []
        if self.source_ranges is not None:
            problems += self.source_ranges.validate(f"{at}.sourceRanges")
        for i, limit in enumerate(self.rate_limits):
            problems += limit.validate(f"{at}.rateLimits[{i}]")
        if self.max_body_bytes < 0:
            problems.append(Problem(f"{at}.maxBodyBytes", "must not be negative"))
        if self.connections_per_client < 0:
            problems.append(Problem(f"{at}.connectionsPerClient", "must not be negative"))
        for name in _PARTS:
            part = getattr(self, name)
            if part is not None:
                problems += part.validate(f"{at}.{_camel(name)}")
        if self.cookie_split is not None:
            problems += self.cookie_split.validate(f"{at}.cookieSplit", backends)
        return problems

    def value_problems(self, at: str = "policy") -> list[Problem]:
        problems: list[Problem] = []
        for name in _PARTS:
            part = getattr(self, name)
            if part is not None:
                problems += part.value_problems(f"{at}.{_camel(name)}")
        return problems


# The parts with a validate() and a value_problems() of their own.
_PARTS = ("basic_auth", "external_auth", "affinity", "client_certificate")


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(word.title() for word in rest)
