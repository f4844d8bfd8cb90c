"""The objects translation reads: raw Kubernetes JSON by kind, and the options it honours.

Translation is pure: it reads plain dicts exactly as the API serves them (camelCase keys) from
an `Inputs` view, so the same code runs on the live cache, on golden-test manifests and on
`coxswain-controller translate -f`.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = [
    "Inputs",
    "Obj",
    "Options",
    "created",
    "equivalent",
    "generation",
    "meta",
    "name",
    "namespace",
    "uid",
]

Obj = Mapping[str, Any]
_EMPTY: Mapping[tuple[str, str], Obj] = {}

KINDS = (
    "GatewayClass",
    "Gateway",
    "ListenerSet",
    "HTTPRoute",
    "GRPCRoute",
    "TCPRoute",
    "TLSRoute",
    "UDPRoute",
    "ReferenceGrant",
    "BackendTLSPolicy",
    "Service",
    "EndpointSlice",
    "Secret",
    "ConfigMap",
    "Namespace",
    "Ingress",
    "IngressClass",
    "CoxswainIngressClassParameters",
    "CoxswainGatewayParameters",
    "CoxswainPolicy",
    # Provisioned Deployments: their available replicas pace a switch to dedicated mode
    # (handover.py).
    "Deployment",
)


@dataclass(frozen=True)
class Options:
    gateway_controller: str = "coxswain-labs.dev/gateway-controller"
    ingress_controller: str = "coxswain-labs.dev/ingress-controller"
    ingress_http_port: int = 80
    ingress_https_port: int = 443
    # Shared-mode Gateway listeners bind a port of the shared proxy in this range (spec 002:
    # "maps each of the Gateway's advertised listener ports ... to its own distinct internal
    # targetPort on that pod").
    shared_port_base: int = 20000
    shared_port_span: int = 10000
    # "namespace/name" of the Service in front of the shared proxies, whose addresses shared
    # Gateways report in status.addresses (spec 003); "" reports none.
    published_service: str = ""
    # Provisioning (spec 002). The type of each shared Gateway's VIP Service: LoadBalancer or
    # ClusterIP; "" provisions nothing for shared Gateways, which then report the published
    # Service's addresses (offline translation and tests that leave provisioning out).
    vip_service_type: str = ""
    # "namespace/name" of the Service selecting the shared proxy pods: its EndpointSlices are
    # mirrored next to the VIP Services of Gateways in other namespaces (provision/mirror.py);
    # "" mirrors none.
    shared_proxy_service: str = ""
    # The labels of the shared proxy pods, which each VIP Service selects (--shared-proxy-selector).
    shared_proxy_selector: tuple[tuple[str, str], ...] = (
        ("app.kubernetes.io/name", "coxswain-proxy"),
    )
    # What dedicated proxies run: the image unless parameters name one, and where they reach
    # the controller's discovery stream and the identity service, plus any further flags.
    proxy_image: str = "ghcr.io/coxswain-labs/coxswain-proxy:latest"
    proxy_discovery_endpoint: str = (
        "https://coxswain-controller-discovery.coxswain-system.svc:50051"
    )
    proxy_bootstrap_endpoint: str = (
        "coxswain-controller-discovery-bootstrap.coxswain-system.svc:50052"
    )
    proxy_args: tuple[str, ...] = ()
    # "namespace/name" of the ConfigMap the identity service publishes the trust bundle in
    # (key ca.crt), copied next to each dedicated Gateway for its proxies to mount.
    trust_bundle_configmap: str = "coxswain-system/coxswain-discovery-trust"

    @property
    def published_key(self) -> tuple[str, str] | None:
        if not self.published_service:
            return None
        namespace, _, name = self.published_service.partition("/")
        return (namespace, name)


class Inputs:
    """Objects by kind, then by (namespace, name). Cluster-scoped kinds use namespace ""."""

    def __init__(self, objects: Mapping[str, Mapping[tuple[str, str], Obj]]) -> None:
        self._objects = objects

    @classmethod
    def from_objects(cls, objects: Iterable[Obj]) -> Inputs:
        by_kind: dict[str, dict[tuple[str, str], Obj]] = {}
        for obj in objects:
            kind = str(obj.get("kind", ""))
            by_kind.setdefault(kind, {})[(namespace(obj), name(obj))] = obj
        return cls(by_kind)

    def get(self, kind: str, ns: str, obj_name: str) -> Obj | None:
        return self._objects.get(kind, {}).get((ns, obj_name))

    def table(self, kind: str) -> Mapping[tuple[str, str], Obj]:
        """The whole table of `kind` (its identity changes whenever any object of it does)."""
        return self._objects.get(kind, _EMPTY)

    def size(self) -> int:
        """How many objects there are, of every kind."""
        return sum(len(table) for table in self._objects.values())

    def all(self, kind: str) -> list[Obj]:
        """Every object of `kind`, in (namespace, name) order: translation is deterministic."""
        table = self._objects.get(kind, {})
        return [table[key] for key in sorted(table)]


def meta(obj: Obj) -> Mapping[str, Any]:
    metadata = obj.get("metadata")
    # Names and identities are read everywhere, reports about malformed objects included.
    return metadata if isinstance(metadata, Mapping) else {}


def name(obj: Obj) -> str:
    return str(meta(obj).get("name", ""))


def namespace(obj: Obj) -> str:
    return str(meta(obj).get("namespace", ""))


def generation(obj: Obj) -> int:
    value = meta(obj).get("generation", 0)
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def uid(obj: Obj) -> str:
    return str(meta(obj).get("uid", ""))


def created(obj: Obj) -> int:
    """metadata.creationTimestamp in seconds since the epoch (0 when absent)."""
    stamp = meta(obj).get("creationTimestamp")
    if not stamp:
        return 0
    try:
        parsed = datetime.datetime.fromisoformat(str(stamp).replace("Z", "+00:00"))
    except ValueError:
        return 0  # the API server always sets a valid one; a hand-made object is the oldest
    return int(parsed.timestamp())


def spec(obj: Obj) -> Mapping[str, Any]:
    value: Mapping[str, Any] = obj.get("spec") or {}
    return value


_UNREAD_METADATA = frozenset({"resourceVersion", "managedFields"})


def equivalent(a: Obj, b: Obj) -> bool:
    """Whether two versions of an object translate alike: they differ at most in what
    translation never reads (`status`, `metadata.resourceVersion` and `managedFields`)."""
    if a.keys() - {"status"} != b.keys() - {"status"}:
        return False
    for field, value in a.items():
        if field == "status":
            continue
        other = b[field]
        if field == "metadata" and isinstance(value, Mapping) and isinstance(other, Mapping):
            value = {k: v for k, v in value.items() if k not in _UNREAD_METADATA}
            other = {k: v for k, v in other.items() if k not in _UNREAD_METADATA}
        if not _identical_json(value, other):
            return False
    return True


def _identical_json(a: Any, b: Any) -> bool:
    """JSON equality that tells `true` from `1` and `1.0` from `1`, as translation does."""
    if type(a) is not type(b):
        return False
    if isinstance(a, Mapping):
        return a.keys() == b.keys() and all(_identical_json(v, b[k]) for k, v in a.items())
    if isinstance(a, list):
        return len(a) == len(b) and all(_identical_json(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)
