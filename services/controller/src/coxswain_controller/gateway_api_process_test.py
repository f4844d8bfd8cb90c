"""`coxswain-controller serve`, watching the devkit API emulator, on Gateway API v1.6 as clusters
run it now.

Covers, through the real process and its watches: a listener selecting namespaces by
`kubernetes.io/metadata.name` (the label the API server sets on every Namespace, which the
manifests here never write) admitting a route; a Namespace whose labels change after its route
attached, the route detached (Accepted False, NotAllowedByListeners, attachedRoutes 0) and
attached again when the label returns; the standard channel's TLSRoute, TCPRoute and UDPRoute at
`gateway.networking.k8s.io/v1` (the only version it serves them at) watched, translated into
stream routes a proxy receives, and their status written; and the experimental channel, where a
route created at v1alpha2 is watched and written at v1, its preferred version. Leaves out what
translation's goldens and the status writer's own tests cover.
"""

from __future__ import annotations

import asyncio
import functools
import os
import sys
import time
from collections.abc import Callable, Iterator
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

GROUP = "gateway.networking.k8s.io"
WAIT = 30.0
NAME_LABEL = "kubernetes.io/metadata.name"


def _namespace(name: str, **labels: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}}


def _gateway_api(kind: str, name: str, namespace: str, spec: Any, version: str = "v1") -> Any:
    return {
        "apiVersion": f"{GROUP}/{version}",
        "kind": kind,
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    }


def _service(name: str, namespace: str, port: int, protocol: str = "TCP") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"ports": [{"name": "main", "port": port, "protocol": protocol}]},
    }


CLASS = {
    "apiVersion": f"{GROUP}/v1",
    "kind": "GatewayClass",
    "metadata": {"name": "coxswain"},
    "spec": {"controllerName": "coxswain-labs.dev/gateway-controller"},
}


@pytest.fixture
def ca(tmp_path: Path) -> CertificateAuthority:
    authority = CertificateAuthority.create()
    (tmp_path / "ca.crt").write_bytes(authority.certificate_pem)
    (tmp_path / "ca.key").write_bytes(authority.key_pem)
    return authority


@pytest.fixture
def api() -> Iterator[ThreadedApiServer]:
    with ThreadedApiServer() as server:
        yield server


@pytest.fixture
def custom(api: ThreadedApiServer) -> Iterator[Any]:
    configuration = kubernetes.client.Configuration(host=api.url)
    with kubernetes.client.ApiClient(configuration) as client:
        yield kubernetes.client.CustomObjectsApi(client)


def _controller(api: ThreadedApiServer, tmp_path: Path) -> ServiceProcess:
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
        "c1",
        "--no-leader-election",
    ]
    return ServiceProcess(argv, env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})


def _eventually(read: Callable[[], Any], expected: Any, what: str) -> None:
    deadline = time.monotonic() + WAIT
    while (seen := read()) != expected:
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}: {seen!r} != {expected!r}")
        time.sleep(0.05)


def _accepted(custom: Any, plural: str, namespace: str, name: str, version: str = "v1") -> Any:
    """The route's Accepted (status, reason) on its first parent; None before any status."""
    route = custom.get_namespaced_custom_object(GROUP, version, namespace, plural, name)
    for parent in (route.get("status") or {}).get("parents") or []:
        for condition in parent["conditions"]:
            if condition["type"] == "Accepted":
                return condition["status"], condition["reason"]
    return None


def _attached(custom: Any, namespace: str, name: str) -> dict[str, int]:
    gateway = custom.get_namespaced_custom_object(GROUP, "v1", namespace, "gateways", name)
    listeners = (gateway.get("status") or {}).get("listeners") or []
    return {x["name"]: x["attachedRoutes"] for x in listeners}


ACCEPTED = ("True", "Accepted")
REFUSED = ("False", "NotAllowedByListeners")


def _selected_by(name: str, selector: dict[str, Any], port: int) -> dict[str, Any]:
    namespaces = {"from": "Selector", "selector": selector}
    return {
        "name": name,
        "port": port,
        "protocol": "HTTP",
        "allowedRoutes": {"namespaces": namespaces},
    }


def _http_route(name: str, section: str) -> dict[str, Any]:
    spec = {
        "parentRefs": [{"name": "gw", "namespace": "infra", "sectionName": section}],
        "rules": [{"backendRefs": [{"name": "web", "port": 80}]}],
    }
    return _gateway_api("HTTPRoute", name, "shop", spec)


SELECTING: list[dict[str, Any]] = [
    _namespace("infra"),
    _namespace("shop", team="web"),  # no kubernetes.io/metadata.name here: the server sets it
    CLASS,
    _gateway_api(
        "Gateway",
        "gw",
        "infra",
        {
            "gatewayClassName": "coxswain",
            "listeners": [
                _selected_by("by-name", {"matchLabels": {NAME_LABEL: "shop"}}, 80),
                _selected_by("by-team", {"matchLabels": {"team": "web"}}, 81),
            ],
        },
    ),
    _service("web", "shop", 80),
    _http_route("front", "by-name"),
    _http_route("store", "by-team"),
]


def test_routes_follow_their_namespaces_labels(
    api: ThreadedApiServer, tmp_path: Path, ca: CertificateAuthority, custom: Any
) -> None:
    api.call(lambda s: s.apply(crds.standard()))
    api.call(lambda s: s.apply(SELECTING))
    core = kubernetes.client.CoreV1Api(custom.api_client)

    def routes() -> tuple[Any, Any, dict[str, int]]:
        front = _accepted(custom, "httproutes", "shop", "front")
        store = _accepted(custom, "httproutes", "shop", "store")
        return front, store, _attached(custom, "infra", "gw")

    with _controller(api, tmp_path) as controller:
        controller.wait_for_msg("first snapshot published", timeout=WAIT)
        attached = (ACCEPTED, ACCEPTED, {"by-name": 1, "by-team": 1})
        _eventually(routes, attached, "both routes to attach")

        core.patch_namespace("shop", {"metadata": {"labels": {"team": "ops"}}})
        _eventually(routes, (ACCEPTED, REFUSED, {"by-name": 1, "by-team": 0}), "store to detach")

        # The server keeps the name label whatever a write says: front stays attached.
        core.patch_namespace("shop", {"metadata": {"labels": {NAME_LABEL: None, "team": "web"}}})
        _eventually(routes, attached, "store to attach again")
        assert controller.stop() == 0


def _listener(name: str, port: int, protocol: str, **extra: Any) -> dict[str, Any]:
    return {"name": name, "port": port, "protocol": protocol, **extra}


def _stream(kind: str, name: str, section: str, backend: str, port: int, version: str) -> Any:
    spec: dict[str, Any] = {
        "parentRefs": [{"name": "gw", "sectionName": section}],
        "rules": [{"backendRefs": [{"name": backend, "port": port}]}],
    }
    if kind == "TLSRoute":
        spec["hostnames"] = ["shop.example.com"]
    return _gateway_api(kind, name, "shop", spec, version)


def _streaming(version: str) -> list[dict[str, Any]]:
    """A Gateway with a TLS passthrough, a TCP and a UDP listener, a route of each kind on it,
    the routes at `version`."""
    listeners = [
        _listener("tls", 443, "TLS", tls={"mode": "Passthrough"}),
        _listener("db", 5432, "TCP"),
        _listener("dns", 53, "UDP"),
    ]
    return [
        _namespace("shop"),
        CLASS,
        _gateway_api(
            "Gateway", "gw", "shop", {"gatewayClassName": "coxswain", "listeners": listeners}
        ),
        _service("shop", "shop", 443),
        _service("db", "shop", 5432),
        _service("dns", "shop", 53, "UDP"),
        _stream("TLSRoute", "shop", "tls", "shop", 443, version),
        _stream("TCPRoute", "db", "db", "db", 5432, version),
        _stream("UDPRoute", "dns", "dns", "dns", 53, version),
    ]


def _watch_started(line: dict[str, Any], kind: str = "") -> bool:
    return line.get("msg") == "watch started" and (not kind or line.get("kind") == kind)


STREAMS = (("tlsroutes", "shop"), ("tcproutes", "db"), ("udproutes", "dns"))


async def _stream_keys(ca: CertificateAuthority, port: int) -> list[str]:
    """The stream routes a shared proxy is sent (its first snapshot)."""
    svid = ca.issue(uris=["spiffe://cluster.local/ns/coxswain-system/sa/coxswain-proxy"])
    creds = grpc.ssl_channel_credentials(ca.certificate_pem, svid.key_pem, svid.chain_pem)
    options = [("grpc.ssl_target_name_override", "localhost")]
    async with grpc.aio.secure_channel(f"127.0.0.1:{port}", creds, options=options) as channel:
        call = rpc.discovery_stream(channel)()
        subscribe = pb.Subscribe(node_id="test-proxy", wire_version=rpc.WIRE_VERSION)
        await call.write(pb.ProxyMessage(subscribe=subscribe))
        message = await asyncio.wait_for(call.read(), WAIT)
        call.cancel()
        return sorted(r.key for r in message.snapshot.resources if r.key.startswith("stream/"))


@pytest.mark.parametrize(
    ("channel", "written_at"),
    [
        # v1.6's standard channel serves the stream routes at v1 alone: v1alpha2 is refused.
        pytest.param(crds.standard, "v1", id="standard-channel-v1"),
        # Its experimental channel serves v1alpha2 too: a route written there is watched at v1.
        pytest.param(crds.experimental, "v1alpha2", id="experimental-channel-v1alpha2"),
    ],
)
def test_stream_routes_are_watched_translated_and_written_at_v1(
    api: ThreadedApiServer,
    tmp_path: Path,
    ca: CertificateAuthority,
    custom: Any,
    channel: Callable[[], list[dict[str, Any]]],
    written_at: str,
) -> None:
    api.call(lambda s: s.apply(channel()))
    api.call(lambda s: s.apply(_streaming(written_at)))
    with _controller(api, tmp_path) as controller:
        port = controller.wait_for_msg("discovery listening")["port"]
        for kind in ("TLSRoute", "TCPRoute", "UDPRoute"):
            controller.wait_for(functools.partial(_watch_started, kind=kind), timeout=WAIT)
        watched = {(x["kind"], x["version"]) for x in controller.lines if _watch_started(x)}
        assert {(k, v) for k, v in watched if k.endswith("Route")} == {
            (kind, "v1") for kind in ("HTTPRoute", "GRPCRoute", "TLSRoute", "TCPRoute", "UDPRoute")
        }

        def statuses() -> list[Any]:
            return [_accepted(custom, plural, "shop", name) for plural, name in STREAMS]

        _eventually(statuses, [ACCEPTED] * 3, "every stream route's status")
        _eventually(
            lambda: _attached(custom, "shop", "gw"),
            {"tls": 1, "db": 1, "dns": 1},
            "the listeners to count their routes",
        )
        keys = asyncio.run(_stream_keys(ca, port))
        assert [k.split("/")[1] for k in keys] == ["tcp", "tls", "udp"], keys
        assert controller.stop() == 0
