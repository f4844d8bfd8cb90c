"""`coxswain-controller serve` as real processes against the devkit API emulator.

Covers the wiring of sources, publishing, status, leader election and discovery: Ingress-only
mode when the Gateway API CRDs are absent (a proxy still receives the Ingress routes over mTLS);
a standby that never writes status while another replica holds the Lease; takeover when the Lease
frees up; failover to a second process when the leader dies, with status following an edit.
Leaves out the details each module's own tests cover.
"""

from __future__ import annotations

import asyncio
import datetime
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import grpc.aio
import kubernetes
import pytest

from coxswain_devkit import crds
from coxswain_devkit.apiserver import ThreadedApiServer
from coxswain_devkit.pki import CertificateAuthority
from coxswain_devkit.processes import ServiceProcess
from coxswain_proto import discovery as pb
from coxswain_proto import rpc

GROUP, VERSION = "gateway.networking.k8s.io", "v1"
WAIT = 30.0
SYSTEM: dict[str, Any] = {
    "apiVersion": "v1",
    "kind": "Namespace",
    "metadata": {"name": "coxswain-system"},
}
SHOP: dict[str, Any] = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "shop"}}
BACKEND: list[dict[str, Any]] = [
    {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "web", "namespace": "shop"},
        "spec": {"ports": [{"name": "http", "port": 80}]},
    },
    {
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {
            "name": "web-1",
            "namespace": "shop",
            "labels": {"kubernetes.io/service-name": "web"},
        },
        "addressType": "IPv4",
        "ports": [{"name": "http", "port": 8080}],
        "endpoints": [{"addresses": ["10.0.0.1"]}],
    },
]
GATEWAY: list[dict[str, Any]] = [
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
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "HTTPRoute",
        "metadata": {"name": "web", "namespace": "shop"},
        "spec": {
            "parentRefs": [{"name": "gw"}],
            "rules": [{"backendRefs": [{"name": "web", "port": 80}]}],
        },
    },
]
INGRESS: list[dict[str, Any]] = [
    {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "IngressClass",
        "metadata": {"name": "coxswain"},
        "spec": {"controller": "coxswain-labs.dev/ingress-controller"},
    },
    {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "Ingress",
        "metadata": {"name": "shop", "namespace": "shop"},
        "spec": {
            "ingressClassName": "coxswain",
            "rules": [
                {
                    "host": "shop.example.com",
                    "http": {
                        "paths": [
                            {
                                "path": "/",
                                "pathType": "Prefix",
                                "backend": {"service": {"name": "web", "port": {"number": 80}}},
                            }
                        ]
                    },
                }
            ],
        },
    },
]


@pytest.fixture
def ca(tmp_path: Path) -> CertificateAuthority:
    authority = CertificateAuthority.create()
    (tmp_path / "ca.crt").write_bytes(authority.certificate_pem)
    (tmp_path / "ca.key").write_bytes(authority.key_pem)
    return authority


def _controller(api: ThreadedApiServer, tmp_path: Path, name: str, *extra: str) -> ServiceProcess:
    argv = [
        sys.executable,
        "-m",
        "coxswain_controller",
        "serve",
        "--api-server",
        api.url,
        "--admin-address",
        "127.0.0.1",
        "--admin-port",
        "0",
        "--discovery-address",
        "127.0.0.1",
        "--discovery-port",
        "0",
        "--ca-cert-file",
        str(tmp_path / "ca.crt"),
        "--ca-key-file",
        str(tmp_path / "ca.key"),
        "--pod-name",
        name,
        "--lease-duration",
        "2",
        "--lease-renew-interval",
        "0.3",
        "--lease-renew-deadline",
        "1",
        *extra,
    ]
    return ServiceProcess(argv, env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})


def _custom(api: ThreadedApiServer) -> Any:
    return kubernetes.client.CustomObjectsApi(
        kubernetes.client.ApiClient(kubernetes.client.Configuration(host=api.url))
    )


def _route_accepted_generation(custom: Any) -> int | None:
    route = custom.get_namespaced_custom_object(GROUP, VERSION, "shop", "httproutes", "web")
    for parent in (route.get("status") or {}).get("parents") or []:
        for condition in parent["conditions"]:
            if condition["type"] == "Accepted" and condition["status"] == "True":
                return int(condition["observedGeneration"])
    return None


def _eventually(predicate: Any, what: str) -> None:
    deadline = time.monotonic() + WAIT
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


@pytest.fixture
def api() -> Iterator[ThreadedApiServer]:
    with ThreadedApiServer() as server:
        server.call(lambda s: s.apply([SYSTEM, SHOP, *BACKEND]))
        yield server


def test_ingress_only_mode_serves_ingress_over_discovery(
    api: ThreadedApiServer, tmp_path: Path, ca: CertificateAuthority
) -> None:
    api.call(lambda s: s.apply(INGRESS))
    with _controller(api, tmp_path, "c1", "--no-leader-election") as controller:
        port = controller.wait_for_msg("discovery listening")["port"]
        controller.wait_for_msg("first snapshot published", timeout=WAIT)
        keys = asyncio.run(_subscribe(ca, port))
        assert "routes/ingress/80/shop.example.com" in keys
        assert not any(k.startswith("listeners/") for k in keys)
        assert controller.stop() == 0


async def _subscribe(ca: CertificateAuthority, port: int) -> list[str]:
    svid = ca.issue(uris=["spiffe://cluster.local/ns/coxswain-system/sa/coxswain-proxy"])
    creds = grpc.ssl_channel_credentials(ca.certificate_pem, svid.key_pem, svid.chain_pem)
    options = [("grpc.ssl_target_name_override", "localhost")]
    async with grpc.aio.secure_channel(f"127.0.0.1:{port}", creds, options=options) as channel:
        call = rpc.discovery_stream(channel)()
        await call.write(
            pb.ProxyMessage(
                subscribe=pb.Subscribe(node_id="test-proxy", wire_version=rpc.WIRE_VERSION)
            )
        )
        message = await asyncio.wait_for(call.read(), WAIT)
        call.cancel()
        return [r.key for r in message.snapshot.resources]


def _holder(coordination: Any) -> str:
    lease: Any = coordination.read_namespaced_lease("coxswain-controller", "coxswain-system")
    return str(lease.spec.holder_identity)


def _hold_lease(api: ThreadedApiServer, holder: str) -> None:
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    lease = {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": "coxswain-controller", "namespace": "coxswain-system"},
        "spec": {
            "holderIdentity": holder,
            "leaseDurationSeconds": 3600,
            "acquireTime": now,
            "renewTime": now,
        },
    }
    api.call(lambda s: s.apply([lease]))


def test_a_standby_writes_no_status_until_it_holds_the_lease_then_fails_over(
    api: ThreadedApiServer, tmp_path: Path, ca: CertificateAuthority
) -> None:
    api.call(lambda s: s.apply(crds.standard()))
    api.call(lambda s: s.apply(GATEWAY))
    _hold_lease(api, "somebody-else")
    custom = _custom(api)
    coordination = kubernetes.client.CoordinationV1Api(custom.api_client)
    with _controller(api, tmp_path, "c1") as first, _controller(api, tmp_path, "c2") as second:
        first.wait_for_msg("first snapshot published", timeout=WAIT)
        second.wait_for_msg("first snapshot published", timeout=WAIT)
        assert _route_accepted_generation(custom) is None  # standbys have written nothing

        coordination.delete_namespaced_lease("coxswain-controller", "coxswain-system")
        _eventually(lambda: _route_accepted_generation(custom) == 1, "a new leader to write status")
        holder = _holder(coordination)
        leader, standby = (first, second) if holder == "c1" else (second, first)

        leader.kill()
        patch = {"spec": {"rules": [{"backendRefs": [{"name": "web", "port": 80, "weight": 2}]}]}}
        custom.patch_namespaced_custom_object(GROUP, VERSION, "shop", "httproutes", "web", patch)
        _eventually(
            lambda: _route_accepted_generation(custom) == 2, "the standby to take over and write"
        )
        new_holder = _holder(coordination)
        assert new_holder != holder
        assert standby.stop() == 0
    custom.api_client.close()
