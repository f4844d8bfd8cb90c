"""An Ingress read once into plain values: its paths, default backend, TLS entries, policy.

Where it sits: the Ingress stage reads every claimed Ingress here first, each under the
malformed-object guard, so that the stages after it (regex hosts, canaries, lowering) work on
values that cannot raise; an Ingress that cannot be read costs only itself. The policy is its
ingress-nginx annotations over its class's defaults (`annotations.policy`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from coxswain_controller.translate.ingress.annotations.policy import Policy, read
from coxswain_controller.translate.inputs import Obj, created, meta, name, namespace, spec, uid
from coxswain_controller.translate.result import ObjectRef
from coxswain_routing import Backend, BasicAuth, PathType, UpstreamTLS

__all__ = [
    "DEFAULT_BACKEND_INDEX",
    "AuthTarget",
    "IngressPlan",
    "PathPlan",
    "ServiceRef",
    "read_plan",
]

# Rule index of a defaultBackend: after every rule of its Ingress.
DEFAULT_BACKEND_INDEX = 1_000_000
PATH_TYPES = {
    "Prefix": PathType.PATH_PREFIX,
    "Exact": PathType.EXACT,
    "ImplementationSpecific": PathType.IMPLEMENTATION_SPECIFIC,
}


@dataclass(frozen=True, slots=True)
class ServiceRef:
    """An Ingress backend: a Service and its port by number or name; "" name: not a Service."""

    name: str
    number: int | None
    port_name: str


@dataclass(frozen=True, slots=True)
class PathPlan:
    host: str  # lower-cased; "" for every host
    type: PathType
    value: str  # the path as written
    backend: ServiceRef
    index: int  # the rule index its rules carry
    default: bool = False  # the Ingress's defaultBackend: every host's "/" (host "")


@dataclass(frozen=True, slots=True)
class AuthTarget:
    """Where an auth-url of `$host` sends the auth request for one host (`host_auth`): the
    backend of the Ingress path serving the URL's path on that host."""

    backend: Backend  # its endpoint set (unresolved: the auth answers 500, as nginx's would)
    service: str  # the Service, by name, port number and namespace (the migration report's)
    port: int
    namespace: str
    via: str  # "<namespace>/<name>" of the Ingress whose path it is


@dataclass
class IngressPlan:
    obj: Obj
    class_name: str
    policy: Policy
    paths: list[PathPlan] = field(default_factory=list)  # the defaultBackend last
    tls: list[tuple[str, tuple[str, ...]]] = field(default_factory=list)  # (secret, hosts)
    # Why the Ingress is not served beyond its annotations (a path no regex can read).
    refusals: list[str] = field(default_factory=list)
    tls_problems: list[str] = field(default_factory=list)  # Secrets that serve nothing
    # auth-type: basic, its Secret read (`policies.load_secrets`); None: no basic auth.
    basic: BasicAuth | None = None
    access_log: bool = False  # its class's accessLog.enabled: the proxy logs its requests
    # proxy-ssl-*, its Secret read (`tls_secrets`): the TLS its backends are dialled with.
    backend_tls: UpstreamTLS | None = None
    # auth-tls-secret's ca.crt and "Secret <namespace>/<name>" (`tls_secrets`).
    client_ca: tuple[bytes, str] | None = None
    # auth-url of $host: each host's auth target (`host_auth.resolve`); empty before it ran.
    auth_targets: dict[str, AuthTarget] = field(default_factory=dict)

    @property
    def ref(self) -> ObjectRef:
        return ObjectRef("Ingress", namespace(self.obj), name(self.obj))

    @property
    def uid(self) -> str:
        return uid(self.obj)

    @property
    def age(self) -> tuple[int, str, str]:
        return (created(self.obj), namespace(self.obj), name(self.obj))

    @property
    def served(self) -> bool:
        return self.policy.served and not self.refusals

    @property
    def canary(self) -> bool:
        return self.policy.canary is not None


def read_plan(ingress: Obj, class_name: str, defaults: Mapping[str, str]) -> IngressPlan:
    """Everything translation reads of the Ingress; raises on a malformed one (guard.py)."""
    annotations = meta(ingress).get("annotations") or {}
    plan = IngressPlan(ingress, class_name, read(annotations, defaults, class_name))
    index = 0
    for rule in spec(ingress).get("rules") or []:
        host = str(rule.get("host") or "").lower()
        for path in (rule.get("http") or {}).get("paths") or []:
            kind = PATH_TYPES.get(
                str(path.get("pathType", "ImplementationSpecific")),
                PathType.IMPLEMENTATION_SPECIFIC,
            )
            value = str(path.get("path") or "/")
            plan.paths.append(PathPlan(host, kind, value, _service(path.get("backend")), index))
            index += 1
    backend = spec(ingress).get("defaultBackend")
    if backend:
        default = PathPlan("", PathType.PATH_PREFIX, "/", _service(backend), DEFAULT_BACKEND_INDEX)
        plan.paths.append(replace(default, default=True))
    for entry in spec(ingress).get("tls") or []:
        hosts = tuple(sorted({str(h).lower() for h in entry.get("hosts") or []}))
        plan.tls.append((str(entry.get("secretName", "")), hosts))
    return plan


def _service(backend: Any) -> ServiceRef:
    service = (backend or {}).get("service")
    if not service:
        return ServiceRef("", None, "")
    port = service.get("port") or {}
    number = port.get("number")
    return ServiceRef(
        str(service.get("name", "")),
        None if number is None else int(number),
        str(port.get("name", "")),
    )
