"""The routing model: immutable values the controller compiles into and the proxy serves from.

Where it sits: the controller's translate stage builds these from Kubernetes objects; `_wire`
carries them to the proxy; `_matcher` compiles them into the per-request lookup. Every type is a
frozen, slotted dataclass so a snapshot can be shared across requests without copies or locks.
`validate()` returns named problems instead of raising, so the controller can turn each one
into a status condition naming the object and field. Of those, `value_problems()` are the ones
a value that reaches an HTTP head has (`_values`: a header value carrying CR LF, a path with a
space): `from_wire` refuses those too, so no snapshot however made gets one to the proxy.

A snapshot is a set of *resources* (`HostRoutes`, `TlsStore`, `ClientCaStore`,
`GatewayListeners`, `StreamRoute`, `EndpointSet`), each with a canonical `key`.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING

from coxswain_routing import _values
from coxswain_routing._problem import Problem

if TYPE_CHECKING:
    from coxswain_routing._policy import Policy

__all__ = [
    "Backend",
    "BackendProtocol",
    "ClientCaStore",
    "ClientValidationMode",
    "Cors",
    "Endpoint",
    "EndpointSet",
    "Filter",
    "GatewayListeners",
    "HeaderModifier",
    "HostRoutes",
    "Listener",
    "ListenerProtocol",
    "Match",
    "PathMatch",
    "PathModifier",
    "PathModifierType",
    "PathType",
    "Problem",
    "RequestHeaderModifier",
    "RequestMirror",
    "RequestRedirect",
    "Resource",
    "ResponseHeaderModifier",
    "Retry",
    "RouteId",
    "Rule",
    "StreamMatch",
    "StreamRoute",
    "Timeouts",
    "TlsCertificate",
    "TlsMode",
    "TlsStore",
    "Transport",
    "URLRewrite",
    "UpstreamTLS",
    "ValueMatch",
    "ValueMatchType",
    "WildcardScope",
    "endpoint_set_key",
]


# ---------------------------------------------------------------------------------------------
# Listeners


class ListenerProtocol(StrEnum):
    HTTP = "HTTP"
    HTTPS = "HTTPS"
    TLS = "TLS"
    TCP = "TCP"
    UDP = "UDP"


class TlsMode(StrEnum):
    NONE = "None"
    TERMINATE = "Terminate"
    PASSTHROUGH = "Passthrough"


@dataclass(frozen=True, slots=True)
class Listener:
    name: str  # the Gateway listener's name (a parentRef's sectionName)
    port: int  # the port the Gateway advertises (redirects send clients back to it)
    bind_port: int  # the port the proxy binds; a shared proxy's per-Gateway targetPort
    protocol: ListenerProtocol
    hostname: str = ""  # "" when the listener names none
    tls_mode: TlsMode = TlsMode.NONE


@dataclass(frozen=True, slots=True)
class GatewayListeners:
    """Every listener a proxy binds for one Gateway, and the generation they came from."""

    namespace: str
    name: str
    generation: int
    listeners: tuple[Listener, ...]  # ordered by (bind_port, protocol, name)
    # spec.tls.backend.clientCertificateRef: presented on the TLS connections this Gateway's
    # routes open to backends a BackendTLSPolicy governs; None: no client certificate.
    backend_client_certificate: TlsCertificate | None = None

    @property
    def key(self) -> str:
        return f"listeners/{self.namespace}/{self.name}"

    @property
    def table(self) -> str:
        """The `HostRoutes.table` of this Gateway's routes."""
        return f"gateway/{self.namespace}/{self.name}"


# ---------------------------------------------------------------------------------------------
# Matches


class PathType(StrEnum):
    PATH_PREFIX = "PathPrefix"
    EXACT = "Exact"
    REGULAR_EXPRESSION = "RegularExpression"
    # Ingress only: served as a segment-aware prefix, like Prefix.
    IMPLEMENTATION_SPECIFIC = "ImplementationSpecific"


class ValueMatchType(StrEnum):
    EXACT = "Exact"
    REGULAR_EXPRESSION = "RegularExpression"


@dataclass(frozen=True, slots=True)
class PathMatch:
    type: PathType = PathType.PATH_PREFIX
    value: str = "/"

    def validate(self, at: str) -> list[Problem]:
        if self.type is PathType.REGULAR_EXPRESSION:
            return _regex_problems(self.value, f"{at}.value")
        if not self.value.startswith("/"):
            return [Problem(f"{at}.value", f"path {self.value!r} must start with '/'")]
        return []


@dataclass(frozen=True, slots=True)
class ValueMatch:
    """A header or query parameter condition; the value is compared whole."""

    name: str  # header names lower-cased (they are case-insensitive); query names as written
    value: str
    type: ValueMatchType = ValueMatchType.EXACT

    def validate(self, at: str) -> list[Problem]:
        if not self.name:
            return [Problem(f"{at}.name", "name must not be empty")]
        if self.type is ValueMatchType.REGULAR_EXPRESSION:
            return _regex_problems(self.value, f"{at}.value")
        return []


@dataclass(frozen=True, slots=True)
class Match:
    path: PathMatch = field(default_factory=PathMatch)
    method: str = ""  # "" matches every method
    headers: tuple[ValueMatch, ...] = ()  # one per name (the first condition of a name wins)
    query: tuple[ValueMatch, ...] = ()

    def validate(self, at: str) -> list[Problem]:
        problems = self.path.validate(f"{at}.path")
        for i, header in enumerate(self.headers):
            problems += header.validate(f"{at}.headers[{i}]")
            if header.name != header.name.lower():
                problems.append(Problem(f"{at}.headers[{i}].name", "must be lower-cased"))
        for i, param in enumerate(self.query):
            problems += param.validate(f"{at}.query[{i}]")
        return problems


def _found(at: str, message: str | None) -> list[Problem]:
    """A `_values` verdict as problems of the field at `at`."""
    return [] if message is None else [Problem(at, message)]


def _regex_problems(pattern: str, at: str) -> list[Problem]:
    try:
        re.compile(pattern)
    except re.error as err:
        return [Problem(at, f"invalid regular expression {pattern!r}: {err}")]
    return []


# ---------------------------------------------------------------------------------------------
# Filters


@dataclass(frozen=True, slots=True)
class HeaderModifier:
    set: tuple[tuple[str, str], ...] = ()  # (name, value), names as written
    add: tuple[tuple[str, str], ...] = ()
    remove: tuple[str, ...] = ()

    def validate(self, at: str) -> list[Problem]:
        # Spec 003 "Filters": "Within one header modifier a header may be named once, across
        # set, add and remove and whatever its case".
        names = [n for n, _ in self.set] + [n for n, _ in self.add] + list(self.remove)
        seen: set[str] = set()
        problems = []
        for name in names:
            if name.lower() in seen:
                problems.append(Problem(at, f"header {name!r} is named more than once"))
            seen.add(name.lower())
        return problems + self.value_problems(at)

    def value_problems(self, at: str) -> list[Problem]:
        problems: list[Problem] = []
        for op, pairs in (("set", self.set), ("add", self.add)):
            for i, (name, value) in enumerate(pairs):
                problems += _found(f"{at}.{op}[{i}].name", _values.header_name(name))
                problems += _found(f"{at}.{op}[{i}].value", _values.field_value(value))
        for i, name in enumerate(self.remove):
            problems += _found(f"{at}.remove[{i}]", _values.header_name(name))
        return problems


@dataclass(frozen=True, slots=True)
class RequestHeaderModifier(HeaderModifier):
    pass


@dataclass(frozen=True, slots=True)
class ResponseHeaderModifier(HeaderModifier):
    pass


class PathModifierType(StrEnum):
    REPLACE_FULL_PATH = "ReplaceFullPath"
    REPLACE_PREFIX_MATCH = "ReplacePrefixMatch"
    # Coxswain's own, for ingress-nginx's rewrite-target: the value is a template whose $1..$9
    # (and $(N)) are the groups of the rule's RegularExpression path match (a URLRewrite's only).
    REPLACE_REGEX_MATCH = "ReplaceRegexMatch"


@dataclass(frozen=True, slots=True)
class PathModifier:
    type: PathModifierType
    value: str  # the full path, or the prefix replacement ("" replaces the prefix with "/")

    def value_problems(self, at: str) -> list[Problem]:
        # "" is the root ("/") for either type.
        at = f"{at}.{_PATH_FIELD[self.type]}"
        return _found(at, _values.path(self.value)) if self.value else []


# The field each type is written in, as the Gateway API's HTTPPathModifier names it.
_PATH_FIELD = {
    PathModifierType.REPLACE_FULL_PATH: "replaceFullPath",
    PathModifierType.REPLACE_PREFIX_MATCH: "replacePrefixMatch",
    PathModifierType.REPLACE_REGEX_MATCH: "replaceRegexMatch",
}


def _host_problems(hostname: str, at: str) -> list[Problem]:
    return _found(at, _values.hostname(hostname)) if hostname else []


def _path_problems(path: PathModifier | None, at: str) -> list[Problem]:
    return [] if path is None else path.value_problems(at)


@dataclass(frozen=True, slots=True)
class URLRewrite:
    hostname: str = ""  # "" keeps the request's Host
    path: PathModifier | None = None

    def validate(self, at: str) -> list[Problem]:
        return self.value_problems(at)

    def value_problems(self, at: str) -> list[Problem]:
        return _host_problems(self.hostname, f"{at}.hostname") + _path_problems(
            self.path, f"{at}.path"
        )


@dataclass(frozen=True, slots=True)
class RequestRedirect:
    scheme: str = ""  # "" keeps the request's scheme
    hostname: str = ""  # "" keeps the request's host
    port: int = 0  # 0: derived from the scheme or the listener (see redirect_location)
    path: PathModifier | None = None
    status_code: int = 302

    def validate(self, at: str) -> list[Problem]:
        return self.value_problems(at)

    def value_problems(self, at: str) -> list[Problem]:
        # Each of these is a piece of the Location header (or the status line) answered.
        return [
            *_found(f"{at}.statusCode", _values.redirect_status(self.status_code)),
            *_found(f"{at}.scheme", _values.scheme(self.scheme)),
            *_host_problems(self.hostname, f"{at}.hostname"),
            *_found(f"{at}.port", _values.port(self.port)),
            *_path_problems(self.path, f"{at}.path"),
        ]


@dataclass(frozen=True, slots=True)
class RequestMirror:
    backend: Backend
    numerator: int = 100  # mirror numerator/denominator of the requests
    denominator: int = 100

    def validate(self, at: str) -> list[Problem]:
        problems = []
        if self.denominator <= 0 or not 0 < self.numerator <= self.denominator:
            fraction = f"{self.numerator}/{self.denominator}"
            problems.append(Problem(at, f"mirror fraction {fraction} copies nothing or is invalid"))
        return problems + self.value_problems(at)

    def value_problems(self, at: str) -> list[Problem]:
        # The mirror's backend applies no filters of its own, but a snapshot holding a bad
        # value anywhere is refused whole: nothing is left for a later change to start using.
        return [
            p
            for i, flt in enumerate(self.backend.filters)
            for p in flt.value_problems(f"{at}.backendRef.filters[{i}]")
        ]


@dataclass(frozen=True, slots=True)
class Cors:
    allow_origins: tuple[str, ...] = ()  # "*", exact origins, or "https://*.example.com"
    allow_credentials: bool = False
    allow_methods: tuple[str, ...] = ()  # may be ("*",)
    allow_headers: tuple[str, ...] = ()
    expose_headers: tuple[str, ...] = ()
    max_age_seconds: int = 5

    def validate(self, at: str) -> list[Problem]:
        return self.value_problems(at)

    def value_problems(self, at: str) -> list[Problem]:
        problems: list[Problem] = []
        for i, origin in enumerate(self.allow_origins):
            problems += _found(f"{at}.allowOrigins[{i}]", _values.cors_origin(origin))
        # RFC 9110 §9.1: method = token; §5.1: field-name = token. Fetch allows "*" for each.
        lists = (
            ("allowMethods", self.allow_methods, "method"),
            ("allowHeaders", self.allow_headers, "header name"),
            ("exposeHeaders", self.expose_headers, "header name"),
        )
        for name, values, what in lists:
            for i, value in enumerate(values):
                problems += _found(f"{at}.{name}[{i}]", _values.list_token(value, what))
        return problems + _found(f"{at}.maxAge", _values.delta_seconds(self.max_age_seconds))


Filter = (
    RequestHeaderModifier
    | ResponseHeaderModifier
    | URLRewrite
    | RequestRedirect
    | RequestMirror
    | Cors
)


# ---------------------------------------------------------------------------------------------
# Backends


class BackendProtocol(StrEnum):
    HTTP1 = "HTTP/1.1"
    H2C = "h2c"
    WEBSOCKET = "WebSocket"
    GRPC = "gRPC"


@dataclass(frozen=True, slots=True)
class UpstreamTLS:
    sni: str  # sent as the server name; also the name verified, unless SANs are given
    ca_bundle_pem: bytes = b""  # the whole of the trust, unless system_roots
    system_roots: bool = False
    # A BackendTLSPolicy's subjectAltNames: the certificate must carry one of these (DNS names,
    # exact or "*.suffix", and URIs), and then `sni` is not what it is verified against.
    subject_alt_names: tuple[str, ...] = ()
    subject_alt_uris: tuple[str, ...] = ()
    # Presented when the backend asks for one (an Ingress's proxy-ssl-secret), over the
    # Gateway's spec.tls.backend certificate; None: the Gateway's, if it has one.
    client_certificate: TlsCertificate | None = None

    @property
    def verifies_sans(self) -> bool:
        return bool(self.subject_alt_names or self.subject_alt_uris)


class Transport(StrEnum):
    """The transport of the Service port an endpoint set serves (its `protocol`)."""

    TCP = "TCP"
    UDP = "UDP"


def endpoint_set_key(
    namespace: str, service: str, port: int, transport: Transport = Transport.TCP
) -> str:
    """The key of a Service port's endpoint set. A Service may expose one port number over TCP
    and over UDP with different targets, so a UDP port's set has a key of its own (a TCP one
    keeps the key it always had)."""
    key = f"endpoints/{namespace}/{service}/{port}"
    return key if transport is Transport.TCP else f"{key}/{transport.value.lower()}"


@dataclass(frozen=True, slots=True)
class Backend:
    """One weighted slot of a rule: an endpoint set, or an unresolved reference (fixed 500)."""

    weight: int = 1
    endpoints: str = ""  # an EndpointSet key; "" when the reference did not resolve
    unresolved_reason: str = ""  # why it did not: its share of the traffic answers 500
    protocol: BackendProtocol = BackendProtocol.HTTP1
    tls: UpstreamTLS | None = None  # None: plaintext
    filters: tuple[Filter, ...] = ()  # applied after the rule's, to the requests this slot gets

    @property
    def resolved(self) -> bool:
        return bool(self.endpoints)


@dataclass(frozen=True, slots=True)
class Timeouts:
    request_ms: int = 0  # the whole upstream exchange, retries included; 0: unbounded
    backend_request_ms: int = 0  # each attempt; 0: unbounded


@dataclass(frozen=True, slots=True)
class Retry:
    attempts: int = 0  # retries after the first attempt
    codes: tuple[int, ...] = ()  # ascending
    backoff_ms: int = 0


# ---------------------------------------------------------------------------------------------
# Rules and their tables


@dataclass(frozen=True, slots=True, order=True)
class RouteId:
    """Who a rule came from: for metrics, explanations and the age tie-break."""

    creation_seconds: int  # metadata.creationTimestamp; older routes win ties
    namespace: str
    name: str
    kind: str = "HTTPRoute"
    rule_index: int = 0
    rule_name: str = ""

    def __str__(self) -> str:
        rule = self.rule_name or str(self.rule_index)
        return f"{self.kind} {self.namespace}/{self.name} rule {rule}"


@dataclass(frozen=True, slots=True)
class Rule:
    id: RouteId
    matches: tuple[Match, ...] = (Match(),)
    filters: tuple[Filter, ...] = ()  # in declared order: their order is their meaning
    backends: tuple[Backend, ...] = ()  # in declared order
    timeouts: Timeouts = Timeouts()
    retry: Retry = Retry()
    policy: Policy | None = None  # access, limits, auth, affinity (`_policy`); None: none

    def validate(self) -> list[Problem]:
        problems: list[Problem] = []
        for i, match in enumerate(self.matches):
            problems += match.validate(f"matches[{i}]")
        for at, flt in self._filters():
            problems += flt.validate(at)
        problems += _timeout_problems(self.timeouts)
        problems += self._regex_rewrite_problems()
        if not 0 <= self.retry.attempts <= 10:
            problems.append(Problem("retry.attempts", "must be between 0 and 10"))
        if self.policy is not None:
            problems += self.policy.validate("policy", len(self.backends))
        return problems

    def value_problems(self) -> list[Problem]:
        """What `from_wire` refuses: values that would break an HTTP head if written."""
        problems = [p for at, flt in self._filters() for p in flt.value_problems(at)]
        if self.policy is not None:
            problems += self.policy.value_problems("policy")
        return problems

    def _regex_rewrite_problems(self) -> list[Problem]:
        """A ReplaceRegexMatch takes its groups from the rule's path pattern: only a URLRewrite
        carries one, and only on a rule whose every match is a RegularExpression path."""
        problems = []
        regex_paths = all(m.path.type is PathType.REGULAR_EXPRESSION for m in self.matches)
        for at, flt in self._filters():
            path = getattr(flt, "path", None)
            if path is None or path.type is not PathModifierType.REPLACE_REGEX_MATCH:
                continue
            if not isinstance(flt, URLRewrite):
                problems.append(Problem(f"{at}.path", "ReplaceRegexMatch is a URLRewrite's only"))
            elif not regex_paths:
                problems.append(
                    Problem(f"{at}.path", "ReplaceRegexMatch needs RegularExpression path matches")
                )
        return problems

    def _filters(self) -> Iterator[tuple[str, Filter]]:
        """Every filter with the path naming it: the rule's, then each backendRef's."""
        for i, flt in enumerate(self.filters):
            yield f"filters[{i}]", flt
        for i, backend in enumerate(self.backends):
            for j, flt in enumerate(backend.filters):
                yield f"backendRefs[{i}].filters[{j}]", flt


def _timeout_problems(timeouts: Timeouts) -> list[Problem]:
    # Spec 003 "Timeouts and retry": "backendRequest may not exceed request".
    if timeouts.request_ms and timeouts.backend_request_ms > timeouts.request_ms:
        return [Problem("timeouts.backendRequest", "must not exceed timeouts.request")]
    return []


class WildcardScope(StrEnum):
    ANY_LABELS = "AnyLabels"  # Gateway API: *.example.com matches a.b.example.com
    ONE_LABEL = "OneLabel"  # Ingress: *.example.com matches exactly one label


@dataclass(frozen=True, slots=True)
class HostRoutes:
    """Every rule served for one host pattern on one bound port."""

    table: str  # "ingress" or "gateway/<namespace>/<name>"
    bind_port: int
    host: str  # an exact host, "*.suffix", or "" for every host
    rules: tuple[Rule, ...]
    listener_port: int = 0  # the advertised port, for redirects; 0: same as bind_port
    wildcard_scope: WildcardScope = WildcardScope.ANY_LABELS

    @property
    def key(self) -> str:
        return f"routes/{self.table}/{self.bind_port}/{self.host or '*'}"


# ---------------------------------------------------------------------------------------------
# TLS


@dataclass(frozen=True, slots=True)
class TlsCertificate:
    server_names: tuple[str, ...]  # exact or "*.suffix"; sorted
    certificate_chain_pem: bytes
    private_key_pem: bytes
    source: str  # "<namespace>/<secret name>"


@dataclass(frozen=True, slots=True)
class TlsStore:
    bind_port: int
    certificates: tuple[TlsCertificate, ...]  # by precedence: the earlier one keeps a name
    default_source: str = ""  # the certificate for clients naming no known server

    @property
    def key(self) -> str:
        return f"tls/{self.bind_port}"


class ClientValidationMode(StrEnum):
    """A Gateway's frontend validation mode (Gateway API FrontendValidationModeType), or an
    Ingress host's (ingress-nginx's auth-tls-verify-client)."""

    ALLOW_VALID_ONLY = "AllowValidOnly"  # no valid client certificate: no handshake
    ALLOW_INSECURE_FALLBACK = "AllowInsecureFallback"  # every client admitted
    # A certificate is asked for and one given must be valid; a client giving none completes
    # its handshake, and the rules' `ClientCertificate` decide its requests (an Ingress host's).
    ALLOW_VALID_OR_NONE = "AllowValidOrNone"


@dataclass(frozen=True, slots=True)
class ClientCaStore:
    """How one HTTPS port, or one TLS server name on it, checks its clients' certificates: the
    trust and the mode. A server name's store outranks its port's for clients offering it."""

    bind_port: int
    ca_bundle_pem: bytes  # the whole of the trust for client certificates
    sources: tuple[str, ...] = ()  # "<Kind> <namespace>/<name>" of each CA reference; sorted
    mode: ClientValidationMode = ClientValidationMode.ALLOW_VALID_ONLY
    server_name: str = ""  # exact or "*.suffix" (an Ingress host); "": the whole port

    @property
    def key(self) -> str:
        where = f"/{self.server_name}" if self.server_name else ""
        return f"client-ca/{self.bind_port}{where}"


# ---------------------------------------------------------------------------------------------
# Streams


@dataclass(frozen=True, slots=True)
class StreamMatch:
    """One route's share of a stream port: the connections (or UDP sessions) it takes.

    Each connection is committed to one of `backends` by weighted round robin; an unresolved
    one (no `endpoints`) keeps its weight and refuses the connections it is given.
    """

    id: RouteId  # the TCPRoute, TLSRoute or UDPRoute (rule 0: a stream route has one rule)
    backends: tuple[Backend, ...]  # in declared order; none at all refuses every connection
    server_name: str = ""  # TLS: exact or "*.suffix"; "" for every name
    # TLS: the listener terminates (the port's TlsStore, by server name) and the decrypted bytes
    # are relayed; False: the session passes through unread. Always False on TCP and UDP.
    terminate: bool = False


@dataclass(frozen=True, slots=True)
class StreamRoute:
    """What one bound port relays, for one transport: a TCP or UDP port carries one match
    (server name ""); a TLS port one per server name, each name once, each passed through or
    terminated as the listener that serves the name says."""

    bind_port: int
    protocol: ListenerProtocol  # TCP, TLS or UDP
    matches: tuple[StreamMatch, ...]  # ordered by server name

    @property
    def key(self) -> str:
        return f"stream/{self.protocol.value.lower()}/{self.bind_port}"


# ---------------------------------------------------------------------------------------------
# Endpoints


@dataclass(frozen=True, slots=True)
class Endpoint:
    address: str
    port: int
    ready: bool = True
    serving: bool = True
    terminating: bool = False
    target: str = ""  # the pod's name, when known


@dataclass(frozen=True, slots=True)
class EndpointSet:
    namespace: str
    service: str
    port: int  # the Service port
    endpoints: tuple[Endpoint, ...]  # ordered by (address, port)
    transport: Transport = Transport.TCP  # the Service port's protocol (UDP: a UDPRoute's)

    @property
    def key(self) -> str:
        return endpoint_set_key(self.namespace, self.service, self.port, self.transport)


Resource = HostRoutes | TlsStore | ClientCaStore | GatewayListeners | StreamRoute | EndpointSet
