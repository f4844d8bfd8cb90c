"""`coxswain-controller serve` provisioning Gateways, as a real process against the emulator.

Covers the wiring: the watches of CoxswainGatewayParameters and of the Deployments and
ServiceAccounts the controller made, each publish handing its desired objects to the leader's
provisioner, and status.addresses from the Gateway's own Service. A shared Gateway gets its VIP
Service (ClusterIP here, so the emulator gives it an address at once) and inert ServiceAccount,
and reports the cluster IP; moved to dedicated mode it gets a Deployment and its ServiceAccount
and loses the inert one; deleted, everything it owned is garbage-collected. What is rendered
and how it is compared are the translate goldens' and provisioner_test's.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from coxswain_controller.kube import api as kube
from coxswain_controller.kube.client import api_client
from coxswain_devkit import crds
from coxswain_devkit.apiserver import ThreadedApiServer
from coxswain_devkit.pki import CertificateAuthority
from coxswain_devkit.processes import ServiceProcess

GROUP, VERSION = "gateway.networking.k8s.io", "v1"
WAIT = 30.0
GATEWAY = f"/apis/{GROUP}/{VERSION}/namespaces/shop/gateways/gw"
MANIFESTS: list[dict[str, Any]] = [
    {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "coxswain-system"}},
    {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "shop"}},
    {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "coxswain-discovery-trust", "namespace": "coxswain-system"},
        "data": {"ca.crt": "(the discovery CA)"},
    },
    {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "GatewayClass",
        "metadata": {"name": "coxswain"},
        "spec": {"controllerName": "coxswain-labs.dev/gateway-controller"},
    },
    {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "Gateway",
        "metadata": {"name": "gw", "namespace": "shop"},
        "spec": {
            "gatewayClassName": "coxswain",
            "listeners": [{"name": "http", "port": 80, "protocol": "HTTP"}],
        },
    },
    {
        "apiVersion": "coxswain-labs.dev/v1alpha1",
        "kind": "CoxswainGatewayParameters",
        "metadata": {"name": "own", "namespace": "shop"},
        "spec": {"replicas": 2, "image": "example/coxswain-proxy:test"},
    },
]


@pytest.fixture
def api() -> Iterator[ThreadedApiServer]:
    with ThreadedApiServer() as server:
        server.call(lambda s: s.apply(crds.standard() + crds.coxswain()))
        server.call(lambda s: s.apply(MANIFESTS))
        yield server


@pytest.fixture
def controller(api: ThreadedApiServer, tmp_path: Path) -> Iterator[ServiceProcess]:
    ca = CertificateAuthority.create()
    (tmp_path / "ca.crt").write_bytes(ca.certificate_pem)
    (tmp_path / "ca.key").write_bytes(ca.key_pem)
    argv = [
        sys.executable, "-m", "coxswain_controller", "serve", "--api-server", api.url,
        "--no-leader-election", "--admin-address", "127.0.0.1", "--admin-port", "0",
        "--discovery-address", "127.0.0.1", "--discovery-port", "0",
        "--ca-cert-file", str(tmp_path / "ca.crt"), "--ca-key-file", str(tmp_path / "ca.key"),
        "--vip-service-type", "ClusterIP",
    ]  # fmt: skip
    with ServiceProcess(argv, env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}) as p:
        yield p


def _get(client: Any, path: str) -> dict[str, Any] | None:
    try:
        return kube.request(client, "GET", path)
    except kube.KubeError as exc:
        if exc.status == 404:
            return None
        raise


def _eventually(predicate: Callable[[], Any], what: str) -> Any:
    deadline = time.monotonic() + WAIT
    while not (found := predicate()):
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)
    return found


def _gone(client: Any, path: str) -> Callable[[], bool]:
    return lambda: _get(client, path) is None


def test_a_gateway_is_provisioned_switched_to_dedicated_and_collected(
    api: ThreadedApiServer, controller: ServiceProcess
) -> None:
    client = api_client(api_server=api.url, kubeconfig=None)
    assert client is not None
    service_path = "/api/v1/namespaces/shop/services/gw-coxswain"
    shared_sa = "/api/v1/namespaces/shop/serviceaccounts/gw-coxswain-infra"
    service = _eventually(lambda: _get(client, service_path), "the VIP Service")
    assert service["spec"]["selector"] == {"app.kubernetes.io/name": "coxswain-proxy"}
    assert _get(client, shared_sa) is not None

    def address() -> Any:
        status = (_get(client, GATEWAY) or {}).get("status") or {}
        return status.get("addresses")

    (reported,) = _eventually(address, "status.addresses")
    assert reported == {"type": "IPAddress", "value": service["spec"]["clusterIP"]}

    ref = {"group": "coxswain-labs.dev", "kind": "CoxswainGatewayParameters", "name": "own"}
    body = {"spec": {"infrastructure": {"parametersRef": ref}}}
    kube.request(client, "PATCH", GATEWAY, body=body, content_type=kube.MERGE_PATCH)
    deployment = _eventually(
        lambda: _get(client, "/apis/apps/v1/namespaces/shop/deployments/gw-coxswain"),
        "the dedicated Deployment",
    )
    assert deployment["spec"]["replicas"] == 2
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    assert container["image"] == "example/coxswain-proxy:test"
    assert container["args"][:6] == [
        "serve", "--dedicated", "--gateway-name", "gw", "--gateway-namespace", "shop",
    ]  # fmt: skip
    assert _get(client, "/api/v1/namespaces/shop/serviceaccounts/gw-coxswain") is not None
    # No dedicated proxy is available yet (nothing runs pods here): the Service still sends
    # traffic to the shared pool, whose objects stay (translate/handover.py).
    assert _get(client, shared_sa) is not None
    assert (_get(client, service_path) or {})["spec"]["selector"] == service["spec"]["selector"]
    # What the Deployment controller writes once a replica is Ready: the Service moves.
    status = {"observedGeneration": deployment["metadata"]["generation"], "availableReplicas": 1}
    kube.request(
        client,
        "PATCH",
        "/apis/apps/v1/namespaces/shop/deployments/gw-coxswain/status",
        body={"status": status},
        content_type=kube.MERGE_PATCH,
    )
    _eventually(lambda: _get(client, shared_sa) is None, "the inert ServiceAccount pruned")
    moved = _get(client, service_path) or {}
    assert moved["spec"]["selector"]["app.kubernetes.io/component"] == "dedicated-proxy"

    kube.request(client, "DELETE", GATEWAY)
    for path in (
        service_path,
        "/apis/apps/v1/namespaces/shop/deployments/gw-coxswain",
        "/api/v1/namespaces/shop/serviceaccounts/gw-coxswain",
        "/api/v1/namespaces/shop/configmaps/gw-coxswain-trust",
    ):
        _eventually(_gone(client, path), f"{path} collected")
    client.close()
    assert controller.stop() == 0
