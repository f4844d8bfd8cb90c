"""What an Ingress's annotations are read into: plain data, shared by the groups that read them
(`groups`, `access`), `policy.read` and the Ingress stage and report that consume them."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from coxswain_controller.translate.ingress.annotations.catalog import Fate
from coxswain_routing import SessionAffinity

__all__ = [
    "BackendTlsSpec",
    "BasicSpec",
    "Canary",
    "ClientTlsSpec",
    "ExternalSpec",
    "Limits",
    "Policy",
    "Verdict",
]


@dataclass(frozen=True, slots=True)
class Verdict:
    """What became of one annotation."""

    key: str  # the full annotation name
    value: str
    fate: Fate
    note: str  # how it is honoured, or why it is ignored or refused
    origin: str = ""  # "" for the Ingress's own; else the IngressClass whose default it is

    @property
    def message(self) -> str:
        """The Event's message: the key, its value, its fate and why."""
        origin = f" (default of IngressClass {self.origin})" if self.origin else ""
        served = "; the Ingress's paths are not served" if self.fate is Fate.REFUSED else ""
        return f"{self.key}={self.value!r}{origin} is {self.fate}: {self.note}{served}"


@dataclass(frozen=True, slots=True)
class Canary:
    """A canary Ingress's split of the main Ingress's traffic (ingress-nginx's precedence:
    by header, then by weight)."""

    weight: int = 0  # of `total`: the share sent to the canary by weight
    total: int = 100
    header: str = ""  # lower-cased; "" for none
    header_value: str = ""  # the value sending to the canary ("always" when unset)
    header_pattern: str = ""  # a regex on the value, when no header_value is set
    cookie: str = ""  # canary-by-cookie: the cookie whose always/never decides; "" for none


@dataclass(frozen=True, slots=True)
class BasicSpec:
    """auth-type: basic, as written: the Secret is read when the Ingress's stages run."""

    secret: str  # the Secret's name, in the Ingress's namespace
    secret_type: str = "auth-file"  # noqa: S105 (a kind of Secret); or "auth-map"
    realm: str = "Authentication Required"


@dataclass(frozen=True, slots=True)
class ExternalSpec:
    """auth-url and its companions, as written: the Service is resolved when lowering (a
    `$host` URL's by `host_auth`, per host, before)."""

    service: str
    namespace: str  # "" : the Ingress's own
    port: int
    host: str  # the auth request's Host, as the URL names it
    target: str  # path and query
    method: str = "GET"
    response_headers: tuple[str, ...] = ()
    signin: str = ""
    redirect_param: str = "rd"
    # "http" or "https" when the URL's host is `$host`: the auth request goes to the Service
    # that the request's own host serves the URL's path from (`host_auth`), and `service`,
    # `namespace` and `port` are unused; "": the Service the URL names.
    self_scheme: str = ""


@dataclass(frozen=True, slots=True)
class Limits:
    """limit-* as ingress-nginx reads them."""

    rps: int = 0
    rpm: int = 0
    burst_multiplier: int = 5
    connections: int = 0
    exempt: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class BackendTlsSpec:
    """proxy-ssl-*, as written: the Secret is read when the Ingress's stages run."""

    secret: str  # the Secret's name
    namespace: str  # as written before the "/"; "": the Ingress's own (the only one read)
    name: str  # proxy-ssl-name: sent as SNI and verified


@dataclass(frozen=True, slots=True)
class ClientTlsSpec:
    """auth-tls-*, as written: the Secret is read when the Ingress's stages run."""

    secret: str  # the Secret's name
    namespace: str  # as written before the "/"; "": the Ingress's own (the only one read)
    asked: bool = True  # False: auth-tls-verify-client off (no certificate asked for)
    required: bool = True  # auth-tls-verify-client on; False: optional (or off)
    depth: int = 1  # auth-tls-verify-depth
    error_page: str = ""
    pass_certificate: bool = False
    match_cn: str = ""  # auth-tls-match-cn, a regex on the subject DN


@dataclass
class Policy:
    """Everything an Ingress's annotations ask of its paths."""

    verdicts: list[Verdict] = field(default_factory=list)
    use_regex: bool = False
    rewrite_target: str = ""  # "" rewrites nothing
    app_root: str = ""
    ssl_redirect: bool = True  # ingress-nginx's default: redirect hosts that have TLS
    force_ssl_redirect: bool = False
    backend_request_ms: int = 0  # 0: unbounded
    cors: dict[str, Any] | None = None  # an HTTPCORSFilter body
    redirect: dict[str, Any] | None = None  # an HTTPRequestRedirectFilter body
    upstream_vhost: str = ""
    forwarded_prefix: str = ""
    protocol: str = ""  # HTTP, HTTPS, GRPC, GRPCS or H2C; "" lets the Service port say
    canary: Canary | None = None  # set on a canary Ingress
    allow_ranges: tuple[str, ...] = ()  # whitelist/allowlist-source-range
    deny_ranges: tuple[str, ...] = ()  # denylist-source-range
    max_body_bytes: int = 0  # proxy-body-size; 0: no limit
    limits: Limits = field(default_factory=Limits)
    basic: BasicSpec | None = None
    external: ExternalSpec | None = None
    affinity: SessionAffinity | None = None  # its path "" : the Ingress path's own
    backend_tls: BackendTlsSpec | None = None  # proxy-ssl-*, with backend-protocol HTTPS
    client_tls: ClientTlsSpec | None = None  # auth-tls-*: its hosts' client certificates
    passthrough: bool = False  # ssl-passthrough: its hosts' TLS relayed unread

    @property
    def served(self) -> bool:
        return all(v.fate is not Fate.REFUSED for v in self.verdicts)

    @property
    def regex(self) -> bool:
        """Whether its paths are regexes (ingress-nginx: use-regex, or a rewrite-target)."""
        return self.use_regex or bool(self.rewrite_target)

    def events(self) -> list[Verdict]:
        """The verdicts that get a Warning Event: all but the honoured ones."""
        return [v for v in self.verdicts if v.fate is not Fate.HONOURED]
