"""What the controller watches: spec 000's controller RBAC table, as data.

The built-in kinds are always watched. The Gateway API kinds are watched only at a version the
API server serves (learned from discovery, see `probe`), so a cluster without the CRDs runs in
Ingress-only mode (spec 002). One rule picks the version for every kind: of the versions the
controller reads it at (those the current Gateway API release ships it at, whose fields
translation reads alike), the API's preferred one among those it serves the kind at, in
Kubernetes' version order (GA, then beta, then alpha; higher numbers first), which is the order
discovery lists a group's versions in. So Gateway API v1.6 is watched at v1 throughout, in
either channel, and an older experimental channel's stream routes at v1alpha2 (TLSRoute at
v1alpha3 where served). ListenerSet is read at v1 only: the releases before v1.5 served it as
the experimental XListenerSet of gateway.networking.x-k8s.io, another kind, which is not
watched (nor is any other experimental gateway.networking.x-k8s.io kind), so a cluster whose
Gateway API does not serve listenersets at v1 runs without ListenerSets.
CustomResourceDefinitions are watched only to notice the Gateway API appearing or going away.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from coxswain_controller.translate.provision import names

GATEWAY_GROUP = "gateway.networking.k8s.io"
COXSWAIN_GROUP = "coxswain-labs.dev"  # Coxswain's own CRDs (IngressClass parameters)
TLS_SECRET_TYPE = "kubernetes.io/tls"  # noqa: S105 - a Secret type, not a password
# The label every object the provisioner makes carries (translate/provision/names.py).
PROVISIONED = f"{names.MANAGED_BY_LABEL}={names.MANAGED_BY}"


@dataclass(frozen=True, slots=True)
class Kind:
    name: str  # the Kubernetes kind, also the key translation reads the cache by
    group: str  # "" for the core group
    version: str  # the version watched
    plural: str  # the resource in the URL
    namespaced: bool  # False for cluster-scoped kinds
    # Spec 000 grants "Secret (kubernetes.io/tls)": only those are listed and watched across
    # the cluster; a Secret of another type is watched alone, by name (`referenced_secret`).
    field_selector: str = ""
    # Only the objects carrying these labels (k=v,...): the provisioner's own, of kinds the
    # controller does not otherwise read.
    label_selector: str = ""
    # False where only this controller writes status (routes, Gateways, Ingress): a change to
    # it is our own write coming back, and must not trigger another rebuild.
    status_matters: bool = True
    # Only this namespace's collection; "" for every namespace at once.
    namespace: str = ""

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def path(self) -> str:
        """The collection watched: the cluster-wide one, or one namespace's."""
        prefix = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        where = f"/namespaces/{self.namespace}" if self.namespace else ""
        return f"{prefix}{where}/{self.plural}"

    @property
    def label(self) -> str:
        """The watch in a log line: the kind, and what narrows it."""
        narrowed = ",".join(s for s in (self.field_selector, self.label_selector) if s)
        where = f" in {self.namespace}" if self.namespace else ""
        return f"{self.name}{where} ({narrowed})" if narrowed else f"{self.name}{where}"


CORE: tuple[Kind, ...] = (
    Kind("Service", "", "v1", "services", True),
    Kind("Secret", "", "v1", "secrets", True, field_selector=f"type={TLS_SECRET_TYPE}"),
    Kind("ConfigMap", "", "v1", "configmaps", True),
    # Labels of Namespaces decide allowedRoutes.namespaces.from: Selector.
    Kind("Namespace", "", "v1", "namespaces", False),
    Kind("EndpointSlice", "discovery.k8s.io", "v1", "endpointslices", True),
    Kind("Ingress", "networking.k8s.io", "v1", "ingresses", True, status_matters=False),
    Kind("IngressClass", "networking.k8s.io", "v1", "ingressclasses", False),
    # What the provisioner made (spec 000: "Deployment, Service, ServiceAccount"; Services and
    # ConfigMaps are watched whole above): compared with what it should have made. A
    # Deployment's available replicas tell when a Gateway moving to dedicated mode may leave
    # the shared pool (translate/handover.py), so its status counts.
    Kind("Deployment", "apps", "v1", "deployments", True, label_selector=PROVISIONED),
    Kind("ServiceAccount", "", "v1", "serviceaccounts", True, label_selector=PROVISIONED),
)


def referenced_secret(namespace: str, name: str) -> Kind:
    """The watch of one Secret that an Ingress's auth-secret, auth-tls-secret or
    proxy-ssl-secret, or a CoxswainPolicy, names (`references`), in its namespace, by name: the
    controller reads no other Secret that is not kubernetes.io/tls. A kubernetes.io/tls one is
    left out (`type!=`): the TLS watch already holds it, so no two watches ever deliver the same
    Secret."""
    selector = f"metadata.name={name},type!={TLS_SECRET_TYPE}"
    return Kind("Secret", "", "v1", "secrets", True, field_selector=selector, namespace=namespace)


CRD = Kind(
    "CustomResourceDefinition", "apiextensions.k8s.io", "v1", "customresourcedefinitions", False
)


@dataclass(frozen=True, slots=True)
class GatewayKind:
    name: str  # the kind
    plural: str  # the resource
    versions: tuple[str, ...]  # the versions it is read at, most preferred first (`priority`)
    namespaced: bool = True  # False for cluster-scoped kinds
    status_matters: bool = False  # see Kind.status_matters


GATEWAY: tuple[GatewayKind, ...] = (
    GatewayKind("GatewayClass", "gatewayclasses", ("v1", "v1beta1"), namespaced=False),
    GatewayKind("Gateway", "gateways", ("v1", "v1beta1")),
    # GEP-1713: standard since Gateway API v1.5, at v1 only.
    GatewayKind("ListenerSet", "listenersets", ("v1",)),
    GatewayKind("HTTPRoute", "httproutes", ("v1", "v1beta1")),
    # Gateway API v1.1 made GRPCRoute v1; the v1alpha2 of earlier releases is left to them.
    GatewayKind("GRPCRoute", "grpcroutes", ("v1",)),
    GatewayKind("ReferenceGrant", "referencegrants", ("v1", "v1beta1"), status_matters=True),
    GatewayKind("BackendTLSPolicy", "backendtlspolicies", ("v1", "v1alpha3")),
    # Spec 003: "The controller watches the three kinds only in a cluster whose experimental
    # Gateway API channel serves them (gateway.networking.k8s.io/v1alpha2)". They have since
    # reached v1 in the standard channel (TLSRoute in v1.5, TCPRoute and UDPRoute in v1.6),
    # whose fields translation reads alike; TLSRoute had v1alpha3 between.
    GatewayKind("TLSRoute", "tlsroutes", ("v1", "v1alpha3", "v1alpha2")),
    GatewayKind("TCPRoute", "tcproutes", ("v1", "v1alpha2")),
    GatewayKind("UDPRoute", "udproutes", ("v1", "v1alpha2")),
)

# Spec 001: "The controller also watches IngressClass and its associated
# CoxswainIngressClassParameters objects", when their CRD is installed.
COXSWAIN: tuple[GatewayKind, ...] = (
    GatewayKind(
        "CoxswainIngressClassParameters",
        "coxswainingressclassparameters",
        ("v1alpha1",),
        namespaced=False,
        status_matters=True,
    ),
    # Spec 001: "resolves each Gateway's effective CoxswainGatewayParameters".
    GatewayKind(
        "CoxswainGatewayParameters",
        "coxswaingatewayparameters",
        ("v1alpha1",),
        status_matters=True,
    ),
    # Policies for Gateway API routes (translate/policies); only this controller writes status.
    GatewayKind("CoxswainPolicy", "coxswainpolicies", ("v1alpha1",)),
)

GATEWAY_NAMES = frozenset(kind.name for kind in GATEWAY)
# The kinds whose watch comes and goes with their group's CRDs.
OPTIONAL_NAMES = GATEWAY_NAMES | frozenset(kind.name for kind in COXSWAIN)


def gateway_kinds(served: Mapping[str, frozenset[str]]) -> tuple[Kind, ...]:
    """The Gateway API kinds to watch, given the plurals served at each version of the group."""
    return _served_kinds(GATEWAY, GATEWAY_GROUP, served)


def coxswain_kinds(served: Mapping[str, frozenset[str]]) -> tuple[Kind, ...]:
    """Coxswain's own kinds to watch, given the plurals served at each version of its group."""
    return _served_kinds(COXSWAIN, COXSWAIN_GROUP, served)


def preferred(wanted: GatewayKind, served: Mapping[str, frozenset[str]]) -> str | None:
    """The version `wanted` is watched at: the highest in Kubernetes' version order among
    those the API serves its plural at and the controller reads it at; None if none is."""
    candidates = [v for v, plurals in served.items() if wanted.plural in plurals]
    known = [v for v in candidates if v in wanted.versions]
    return max(known, key=priority, default=None)


_VERSION = re.compile(r"^v(\d+)(?:(alpha|beta)(\d+))?$")


def priority(version: str) -> tuple[int, int, int]:
    """Kubernetes' version priority (apimachinery's version.CompareKubeAwareVersionStrings):
    GA before beta before alpha, higher major then minor numbers first."""
    match = _VERSION.match(version)
    if match is None:
        return (-1, 0, 0)
    stage = {"alpha": 0, "beta": 1, None: 2}[match.group(2)]
    return (stage, int(match.group(1)), int(match.group(3) or 0))


def _served_kinds(
    candidates: tuple[GatewayKind, ...], group: str, served: Mapping[str, frozenset[str]]
) -> tuple[Kind, ...]:
    chosen = []
    for wanted in candidates:
        version = preferred(wanted, served)
        if version is not None:
            chosen.append(
                Kind(
                    wanted.name,
                    group,
                    version,
                    wanted.plural,
                    wanted.namespaced,
                    status_matters=wanted.status_matters,
                )
            )
    return tuple(chosen)
