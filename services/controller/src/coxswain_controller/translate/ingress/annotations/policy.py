"""An Ingress's ingress-nginx annotations, layered and read into one `Policy`.

Where it sits: the Ingress stage reads each claimed Ingress's annotations here, over its
class's `defaultAnnotations` (spec 001: "per-key annotation defaults that per-Ingress
annotations can override"), before any of its paths is compiled; the migration report reads
every Ingress the same way. The result is plain data: a `Verdict` per annotation (what became
of it and why) and the honoured values, in the Gateway API's own shapes where one exists, so
`lowering` compiles them with the HTTPRoute lowering and the report prints them as HTTPRoutes.

Why a canary reads differently: ingress-nginx gives a canary Ingress the main Ingress's
location ("all the other non-canary annotations will be ignored (inherited from the
corresponding main ingress) except ... load-balance, upstream-hash-by, and annotations related
to session affinity"), so on a canary only its canary-* keys are honoured; the rest are
ignored, except what is refused anywhere (snippets, and what is not built yet).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from coxswain_controller.translate.ingress.annotations import groups
from coxswain_controller.translate.ingress.annotations.catalog import (
    OFF_IS_HARMLESS,
    PREFIX,
    Fate,
    entry,
)
from coxswain_controller.translate.ingress.annotations.values import BadValue, boolean
from coxswain_routing import SessionAffinity

__all__ = ["BasicSpec", "Canary", "ExternalSpec", "Limits", "Policy", "Verdict", "read"]

# What ingress-nginx's canary keeps of its own (affinity and hashing): refused here as not
# built, where the rest of a canary's annotations are ignored.
_CANARY_OWN = ("affinity", "session-cookie-", "upstream-hash-by", "load-balance")


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
    """auth-url and its companions, as written: the Service is resolved when lowering."""

    service: str
    namespace: str  # "" : the Ingress's own
    port: int
    host: str  # the auth request's Host, as the URL names it
    target: str  # path and query
    method: str = "GET"
    response_headers: tuple[str, ...] = ()
    signin: str = ""
    redirect_param: str = "rd"


@dataclass(frozen=True, slots=True)
class Limits:
    """limit-* as ingress-nginx reads them."""

    rps: int = 0
    rpm: int = 0
    burst_multiplier: int = 5
    connections: int = 0
    exempt: tuple[str, ...] = ()


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


def layered(
    annotations: Mapping[str, Any], defaults: Mapping[str, str], class_name: str
) -> dict[str, tuple[str, str]]:
    """name (without the prefix) -> (value, origin): the class's defaults under the Ingress's
    own. Keys of other prefixes are not ingress-nginx's and are left alone."""
    found: dict[str, tuple[str, str]] = {}
    for source, origin in ((defaults, class_name), (annotations, "")):
        for key, value in source.items():
            if isinstance(key, str) and key.startswith(PREFIX):
                found[key[len(PREFIX) :]] = (str(value), origin)
    return dict(sorted(found.items()))


def read(
    annotations: Mapping[str, Any], defaults: Mapping[str, str] | None = None, class_name: str = ""
) -> Policy:
    """The Ingress's policy: every ingress-nginx annotation judged, the honoured ones read."""
    values = layered(annotations, defaults or {}, class_name)
    policy = Policy()
    canary = _is_canary(values)
    honoured: dict[str, tuple[str, str]] = {}
    for name, (value, origin) in values.items():
        verdict = _static(name, value, origin, canary)
        if verdict is None:
            honoured[name] = (value, origin)
        else:
            policy.verdicts.append(verdict)
    groups.read_all(honoured, policy, canary=canary)
    policy.verdicts.sort(key=lambda v: v.key)
    return policy


def _is_canary(values: Mapping[str, tuple[str, str]]) -> bool:
    try:
        return "canary" in values and boolean(values["canary"][0])
    except BadValue:
        return False  # refused when the canary group reads it


def _static(name: str, value: str, origin: str, canary: bool) -> Verdict | None:
    """The verdict the catalog alone gives; None for an honoured key, read by `groups`."""
    key = PREFIX + name
    found = entry(name)
    if found is None:
        return Verdict(key, value, Fate.IGNORED, "unknown annotation, not read", origin)
    if found.never:
        return Verdict(key, value, found.fate, found.note, origin)
    if canary and not name.startswith(("canary", *_CANARY_OWN)):
        note = "a canary Ingress takes the main Ingress's behaviour (as in ingress-nginx)"
        return Verdict(key, value, Fate.IGNORED, note, origin)
    if canary and found.fate is Fate.HONOURED and not name.startswith("canary"):
        note = "a canary's own affinity is not built: the main Ingress's cookie applies to both"
        return Verdict(key, value, Fate.IGNORED, note, origin)
    if found.fate is Fate.REFUSED and name in OFF_IS_HARMLESS and _off(value):
        return Verdict(key, value, Fate.IGNORED, "off, which is what Coxswain does", origin)
    if found.fate is not Fate.HONOURED:
        return Verdict(key, value, found.fate, found.note, origin)
    return None


def _off(value: str) -> bool:
    try:
        return not boolean(value)
    except BadValue:
        return False
