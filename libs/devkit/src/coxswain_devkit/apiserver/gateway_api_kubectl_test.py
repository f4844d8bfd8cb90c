"""The real kubectl applies current Gateway API manifests of every kind to the emulator.

With each channel of the bundled release (`crds.RELEASE`) applied through kubectl, as a cluster
operator installs upstream's standard-install.yaml or experimental-install.yaml: manifests of
every kind at the apiVersion current Gateway API documents use (gateway.networking.k8s.io/v1
throughout, v1alpha1 for the experimental gateway.networking.x-k8s.io kinds) are created,
listed by kind and short name, and read back at that version; `api-resources` lists the kinds;
the standard channel refuses a v1alpha2 TCPRoute (its alpha versions are not served there),
while the experimental channel takes it with the deprecation warning kubectl prints. Applied with
kubectl's validation on (the emulator's OpenAPI documents leave it to the server); the bundled
CRDs' schemas are open, so no field of theirs is refused.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from coxswain_devkit import crds
from coxswain_devkit.apiserver.conftest import Kubectl

CRDS = Path(crds.__file__).parent

# Current manifests, in the shape of the Gateway API's own guides and examples.
STANDARD_MANIFESTS = """
apiVersion: v1
kind: Namespace
metadata: {name: infra}
---
apiVersion: v1
kind: Namespace
metadata: {name: shop}
---
apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {name: coxswain}
spec:
  controllerName: coxswain-labs.dev/gateway-controller
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: gw, namespace: infra}
spec:
  gatewayClassName: coxswain
  allowedListeners:
    namespaces: {from: Same}
  listeners:
  - name: http
    port: 80
    protocol: HTTP
    allowedRoutes:
      namespaces:
        from: Selector
        selector:
          matchLabels: {kubernetes.io/metadata.name: shop}
  - name: tls
    port: 443
    protocol: TLS
    tls: {mode: Passthrough}
    allowedRoutes: {namespaces: {from: All}, kinds: [{kind: TLSRoute}]}
  - name: db
    port: 5432
    protocol: TCP
    allowedRoutes: {namespaces: {from: All}, kinds: [{kind: TCPRoute}]}
  - name: dns
    port: 53
    protocol: UDP
    allowedRoutes: {namespaces: {from: All}, kinds: [{kind: UDPRoute}]}
---
apiVersion: gateway.networking.k8s.io/v1
kind: ListenerSet
metadata: {name: extra, namespace: infra}
spec:
  parentRef: {name: gw, kind: Gateway, group: gateway.networking.k8s.io}
  listeners:
  - name: alt
    port: 8080
    protocol: HTTP
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: web, namespace: shop}
spec:
  parentRefs: [{name: gw, namespace: infra, sectionName: http}]
  hostnames: [shop.example.com]
  rules:
  - matches: [{path: {type: PathPrefix, value: /}}]
    backendRefs: [{name: web, port: 80}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: GRPCRoute
metadata: {name: rpc, namespace: shop}
spec:
  parentRefs: [{name: gw, namespace: infra, sectionName: http}]
  rules:
  - matches: [{method: {service: shop.Cart, method: Get}}]
    backendRefs: [{name: cart, port: 9000}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: TLSRoute
metadata: {name: secure, namespace: shop}
spec:
  parentRefs: [{name: gw, namespace: infra, sectionName: tls}]
  hostnames: [secure.example.com]
  rules:
  - backendRefs: [{name: secure, port: 443}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: TCPRoute
metadata: {name: db, namespace: shop}
spec:
  parentRefs: [{name: gw, namespace: infra, sectionName: db}]
  rules:
  - backendRefs: [{name: db, port: 5432}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: UDPRoute
metadata: {name: dns, namespace: shop}
spec:
  parentRefs: [{name: gw, namespace: infra, sectionName: dns}]
  rules:
  - backendRefs: [{name: dns, port: 53}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: ReferenceGrant
metadata: {name: from-infra, namespace: shop}
spec:
  from: [{group: gateway.networking.k8s.io, kind: Gateway, namespace: infra}]
  to: [{group: "", kind: Secret}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: BackendTLSPolicy
metadata: {name: web-tls, namespace: shop}
spec:
  targetRefs: [{group: "", kind: Service, name: web}]
  validation:
    hostname: web.shop.svc
    wellKnownCACertificates: System
"""

EXPERIMENTAL_MANIFESTS = """
apiVersion: gateway.networking.x-k8s.io/v1alpha1
kind: XBackend
metadata: {name: payments, namespace: shop}
spec:
  type: ExternalHostname
  externalHostname: {hostname: payments.example.net}
  port: {number: 443}
---
apiVersion: gateway.networking.x-k8s.io/v1alpha1
kind: XBackendTrafficPolicy
metadata: {name: retry-budget, namespace: shop}
spec:
  targetRefs: [{group: "", kind: Service, name: web}]
  retryConstraint:
    budget: {percent: 20, interval: 10s}
---
apiVersion: gateway.networking.x-k8s.io/v1alpha1
kind: XMesh
metadata: {name: mesh}
spec:
  controllerName: example.net/mesh
"""

# kind: (the short name or plural kubectl lists it by, namespace, name)
STANDARD_OBJECTS = {
    "GatewayClass": ("gc", "", "coxswain"),
    "Gateway": ("gtw", "infra", "gw"),
    "ListenerSet": ("lset", "infra", "extra"),
    "HTTPRoute": ("httproutes", "shop", "web"),
    "GRPCRoute": ("grpcroutes", "shop", "rpc"),
    "TLSRoute": ("tlsroutes", "shop", "secure"),
    "TCPRoute": ("tcproutes", "shop", "db"),
    "UDPRoute": ("udproutes", "shop", "dns"),
    "ReferenceGrant": ("refgrant", "shop", "from-infra"),
    "BackendTLSPolicy": ("btlspolicy", "shop", "web-tls"),
}
EXPERIMENTAL_OBJECTS = {
    "XBackend": ("xbackend", "shop", "payments"),
    "XBackendTrafficPolicy": ("xbtrafficpolicy", "shop", "retry-budget"),
    "XMesh": ("mesh", "", "mesh"),
}

OLD_TCPROUTE = """
apiVersion: gateway.networking.k8s.io/v1alpha2
kind: TCPRoute
metadata: {name: old, namespace: shop}
spec:
  parentRefs: [{name: gw, namespace: infra, sectionName: db}]
  rules:
  - backendRefs: [{name: db, port: 5432}]
"""


def _install(kubectl: Kubectl, bundle: str) -> None:
    kubectl("apply", "-f", str(CRDS / bundle))
    kubectl("wait", "--for=condition=Established", "crd", "--all", "--timeout=30s")


def _apply(kubectl: Kubectl, tmp_path: Path, manifests: str) -> str:
    path = tmp_path / "manifests.yaml"
    path.write_text(manifests)
    return kubectl("apply", "-f", str(path))


def _check(kubectl: Kubectl, objects: dict[str, tuple[str, str, str]]) -> None:
    for kind, (listed_as, namespace, name) in objects.items():
        scope = ["-n", namespace] if namespace else []
        names = kubectl("get", listed_as, *scope, "-o", "name").split()
        assert [n.rpartition("/")[2] for n in names] == [name], kind
        doc = yaml.safe_load(kubectl("get", listed_as, name, *scope, "-o", "yaml"))
        assert doc["kind"] == kind
        version = "v1alpha1" if kind.startswith("X") else "v1"
        assert doc["apiVersion"].endswith(f"/{version}"), (kind, doc["apiVersion"])


def test_the_standard_channel_takes_every_kind_at_v1(kubectl: Kubectl, tmp_path: Path) -> None:
    _install(kubectl, crds.STANDARD)
    out = _apply(kubectl, tmp_path, STANDARD_MANIFESTS)
    assert "tlsroute.gateway.networking.k8s.io/secure created" in out
    assert "Warning" not in out
    _check(kubectl, STANDARD_OBJECTS)
    kinds = kubectl("api-resources", "--api-group=gateway.networking.k8s.io", "-o", "name")
    assert {k.partition(".")[0] for k in kinds.split()} == {
        "backendtlspolicies",
        "gatewayclasses",
        "gateways",
        "grpcroutes",
        "httproutes",
        "listenersets",
        "referencegrants",
        "tcproutes",
        "tlsroutes",
        "udproutes",
    }
    refused = _apply_old(kubectl, tmp_path, ok=False)
    assert 'no matches for kind "TCPRoute" in version "gateway.networking.k8s.io/v1alpha2"' in (
        refused
    )


def _apply_old(kubectl: Kubectl, tmp_path: Path, *, ok: bool) -> str:
    path = tmp_path / "old.yaml"
    path.write_text(OLD_TCPROUTE)
    return kubectl("apply", "-f", str(path), ok=ok)


@pytest.mark.parametrize("upgrade", [False, True], ids=["fresh", "over-the-standard-channel"])
def test_the_experimental_channel_adds_its_kinds_and_the_alpha_versions(
    kubectl: Kubectl, tmp_path: Path, upgrade: bool
) -> None:
    if upgrade:
        _install(kubectl, crds.STANDARD)
    _install(kubectl, crds.EXPERIMENTAL)
    _apply(kubectl, tmp_path, STANDARD_MANIFESTS + "---" + EXPERIMENTAL_MANIFESTS)
    _check(kubectl, STANDARD_OBJECTS | EXPERIMENTAL_OBJECTS)

    out = _apply_old(kubectl, tmp_path, ok=True)
    assert "tcproute.gateway.networking.k8s.io/old created" in out
    assert (
        "Warning: The v1alpha2 version of TCPRoute has been deprecated and will be removed in a "
        "future release of the API. Please upgrade to v1." in out
    )
    # One object, whichever version asks: the v1alpha2 route reads back at v1.
    doc = yaml.safe_load(
        kubectl("get", "tcproutes.v1.gateway.networking.k8s.io", "old", "-n", "shop", "-o", "yaml")
    )
    assert doc["apiVersion"] == "gateway.networking.k8s.io/v1"
