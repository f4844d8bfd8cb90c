"""The Kubernetes objects the stack writes itself, and small helpers for writing them.

What a Helm install and the cluster's controllers would have made, but that here stand for
processes the stack runs outside any pod: the shared proxies' Service with an EndpointSlice
naming 127.0.0.1, the echo backends' EndpointSlices, and TLS Secrets for tests and the demo.
"""

from __future__ import annotations

import base64
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import kubernetes

from coxswain_devkit.loadbalancer import PORT_OFFSET_ANNOTATION
from coxswain_devkit.pki import CertificateAuthority
from coxswain_devkit.processes import ProcessError

__all__ = [
    "PROXY_ACCOUNT",
    "TRUST_CONFIGMAP",
    "UI_ACCOUNT",
    "UI_USER",
    "create_absent",
    "echo_slice",
    "lb_reach",
    "shared_proxy_service",
    "shared_proxy_slice",
    "tls_secret",
    "wait_for_bundle",
    "write_token",
]

TRUST_CONFIGMAP = ("coxswain-system", "coxswain-discovery-trust")
PROXY_ACCOUNT = ("coxswain-system", "coxswain-proxy")
# The UI's own identity: the controller's operator API allows it (`--api-allowed-users`).
UI_ACCOUNT = ("coxswain-system", "coxswain-ui")
UI_USER = f"system:serviceaccount:{UI_ACCOUNT[0]}:{UI_ACCOUNT[1]}"


def lb_reach(service: dict[str, Any], port: int) -> tuple[str, int] | None:
    """The address and port a LoadBalancer Service's `port` is reached at on this machine: its
    load balancer IP, and the port plus the devkit load balancer's offset for a port below 1024
    it could not bind (it then annotates the Service). None until it has an address, or if the
    Service has no such port."""
    if all(int(p["port"]) != port for p in (service.get("spec") or {}).get("ports") or []):
        return None
    ingress = ((service.get("status") or {}).get("loadBalancer") or {}).get("ingress") or []
    ips = [str(i["ip"]) for i in ingress if i.get("ip")]
    if not ips:
        return None
    offset = (service["metadata"].get("annotations") or {}).get(PORT_OFFSET_ANNOTATION)
    return ips[0], port + int(offset) if offset and port < 1024 else port


def create_absent(create: Any, body: dict[str, Any]) -> None:
    try:
        create(body)
    except kubernetes.client.exceptions.ApiException as err:
        if err.status != 409:
            raise


def write_token(
    client: Any, account: tuple[str, str], *, audiences: Sequence[str], path: Path
) -> None:
    """A ServiceAccount token written to `path`, as a kubelet would mount one (no audiences:
    the API server's own, which the controller's TokenReview asks for)."""
    spec: dict[str, Any] = {"expirationSeconds": 86400}
    if audiences:
        spec["audiences"] = list(audiences)
    core: Any = kubernetes.client.CoreV1Api(client)
    answer = core.create_namespaced_service_account_token(account[1], account[0], {"spec": spec})
    path.write_text(answer.status.token)


def wait_for_bundle(core: Any, timeout: float) -> str:
    deadline = time.monotonic() + timeout
    while True:
        try:
            config_map = core.read_namespaced_config_map(TRUST_CONFIGMAP[1], TRUST_CONFIGMAP[0])
            if (config_map.data or {}).get("ca.crt"):
                return str(config_map.data["ca.crt"])
        except kubernetes.client.exceptions.ApiException as err:
            if err.status != 404:
                raise
        if time.monotonic() > deadline:
            raise ProcessError("the identity service never published the trust bundle")
        time.sleep(0.1)


def shared_proxy_service() -> dict[str, Any]:
    return {
        "metadata": {
            "name": PROXY_ACCOUNT[1],
            "labels": {"app.kubernetes.io/name": "coxswain-proxy"},
        },
        "spec": {"ports": [{"name": "admin", "port": 9092, "protocol": "TCP"}]},
    }


def shared_proxy_slice() -> dict[str, Any]:
    return {
        "metadata": {
            "name": f"{PROXY_ACCOUNT[1]}-local",
            "labels": {"kubernetes.io/service-name": PROXY_ACCOUNT[1]},
        },
        "addressType": "IPv4",
        "ports": [{"name": "admin", "port": 9092, "protocol": "TCP"}],
        "endpoints": [{"addresses": ["127.0.0.1"], "conditions": {"ready": True}}],
    }


def echo_slice(namespace: str, service: str, port: int, grpc_port: int = 0) -> dict[str, Any]:
    """The EndpointSlice of a Service backed by an echo process on 127.0.0.1: its port "http",
    and "grpc" when the echo serves gRPC too."""
    ports = [{"name": "http", "port": port, "protocol": "TCP"}]
    if grpc_port:
        ports.append({"name": "grpc", "port": grpc_port, "protocol": "TCP"})
    return {
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {
            "name": f"{service}-local",
            "labels": {"kubernetes.io/service-name": service},
        },
        "addressType": "IPv4",
        "ports": ports,
        "endpoints": [
            {
                "addresses": ["127.0.0.1"],
                "conditions": {"ready": True},
                "targetRef": {
                    "kind": "Pod",
                    "name": f"{service}-0",
                    "namespace": namespace,
                },
            }
        ],
    }


def tls_secret(
    namespace: str, name: str, ca: CertificateAuthority, hosts: Sequence[str]
) -> dict[str, Any]:
    """A kubernetes.io/tls Secret for `hosts`, signed by `ca` (so clients can trust it)."""
    issued = ca.issue(dns=list(hosts))
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "kubernetes.io/tls",
        "metadata": {"name": name, "namespace": namespace},
        "data": {
            "tls.crt": base64.b64encode(issued.chain_pem).decode(),
            "tls.key": base64.b64encode(issued.key_pem).decode(),
        },
    }
