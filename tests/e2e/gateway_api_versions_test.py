"""End to end: the stack on Gateway API v1.6 as clusters install it now, through the shipped PEX
files.

One stack (the API emulator serving v1.6's standard channel, the load balancer, identity, the
controller and a shared proxy, each its own OS process). Covers issue 23's items 1 and 6 as a
cluster would meet them: a listener selecting namespaces by `kubernetes.io/metadata.name` (which
no manifest here writes: the API server sets it) serves its route; a route admitted by a
namespace label stops being served, and is refused NotAllowedByListeners, when the label changes,
and is served again when it returns; a TLSRoute and a TCPRoute at `gateway.networking.k8s.io/v1`
(the only version the standard channel serves them at) are watched, accepted and carry traffic
to their backends: TLS passthrough by server name to a backend whose own certificate the client
verifies, TCP to an echo. Backends are the stack's HTTP echo and, for the streams, echo servers
in this test process on 127.0.0.1 written into EndpointSlices.
"""

from __future__ import annotations

import http.client
import json
import socket
import socketserver
import ssl
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import kubernetes
import pytest

from coxswain_devkit.pki import CertificateAuthority
from coxswain_devkit.stack import Launcher, Stack, StackPorts
from coxswain_devkit.waiting import until

WAIT = 60.0
GROUP = "gateway.networking.k8s.io"
INFRA, APPS = "e2e-versions", "e2e-versions-apps"
NAME_LABEL = "kubernetes.io/metadata.name"
PLURALS = {
    "GatewayClass": "gatewayclasses",
    "Gateway": "gateways",
    "HTTPRoute": "httproutes",
    "TLSRoute": "tlsroutes",
    "TCPRoute": "tcproutes",
}


def eventually(predicate: Callable[[], Any], what: str, timeout: float = WAIT) -> Any:
    return until(
        predicate, what, within=timeout, tolerate=(OSError, http.client.HTTPException, ssl.SSLError)
    )


# ------------------------------------------------------------------------------ stream echoes


class _Echo(socketserver.BaseRequestHandler):
    """Sends back its server's name and what it reads, over TLS when its server has a context."""

    def handle(self) -> None:
        server: Any = self.server
        sock: socket.socket = self.request
        try:
            if server.context is not None:
                sock = server.context.wrap_socket(sock, server_side=True)
            sock.sendall(server.name.encode() + b":")
            while data := sock.recv(65536):
                sock.sendall(data)
        except (ssl.SSLError, OSError):
            return
        finally:
            sock.close()


class _Server(socketserver.ThreadingTCPServer):
    daemon_threads = True

    def __init__(self, name: str, context: ssl.SSLContext | None) -> None:
        super().__init__(("127.0.0.1", 0), _Echo)
        self.name, self.context = name, context


class Echo:
    def __init__(self, name: str, context: ssl.SSLContext | None = None) -> None:
        self.server = _Server(name, context)
        self.port = int(self.server.server_address[1])
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self._thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def tls_context(ca: CertificateAuthority, host: str, workdir: Path) -> ssl.SSLContext:
    issued = ca.issue(dns=[host])
    cert, key = workdir / f"{host}.crt", workdir / f"{host}.key"
    cert.write_bytes(issued.chain_pem)
    key.write_bytes(issued.key_pem)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    return context


# ------------------------------------------------------------------------------ objects


def namespace(name: str, **labels: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}}


def gateway_api(kind: str, name: str, ns: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/v1",
        "kind": kind,
        "metadata": {"name": name, "namespace": ns},
        "spec": spec,
    }


def selected_by(name: str, port: int, selector: dict[str, Any]) -> dict[str, Any]:
    namespaces = {"from": "Selector", "selector": selector}
    return {
        "name": name,
        "port": port,
        "protocol": "HTTP",
        "allowedRoutes": {"namespaces": namespaces},
    }


def http_route(name: str, section: str, hostname: str) -> dict[str, Any]:
    spec = {
        "parentRefs": [{"name": "gw", "namespace": INFRA, "sectionName": section}],
        "hostnames": [hostname],
        "rules": [{"backendRefs": [{"name": "web", "port": 80}]}],
    }
    return gateway_api("HTTPRoute", name, APPS, spec)


def local_backend(name: str, port: int, actual: int) -> list[dict[str, Any]]:
    """A Service in INFRA and the EndpointSlice naming the echo on 127.0.0.1:`actual`."""
    named = {"name": "echo", "port": port, "protocol": "TCP"}
    return [
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": name, "namespace": INFRA},
            "spec": {"ports": [named]},
        },
        {
            "apiVersion": "discovery.k8s.io/v1",
            "kind": "EndpointSlice",
            "metadata": {
                "name": f"{name}-local",
                "namespace": INFRA,
                "labels": {"kubernetes.io/service-name": name},
            },
            "addressType": "IPv4",
            "ports": [{**named, "port": actual}],
            "endpoints": [{"addresses": ["127.0.0.1"], "conditions": {"ready": True}}],
        },
    ]


def stream_route(kind: str, name: str, section: str, backend: str, **spec: Any) -> dict[str, Any]:
    body = {
        "parentRefs": [{"name": "streams", "sectionName": section}],
        "rules": [{"backendRefs": [{"name": backend, "port": 7000}]}],
        **spec,
    }
    return gateway_api(kind, name, INFRA, body)


class Cluster:
    def __init__(self, stack: Stack, ca: CertificateAuthority) -> None:
        self.stack = stack
        self.ca = ca
        self.client = stack.client()
        self.custom: Any = kubernetes.client.CustomObjectsApi(self.client)
        self.core: Any = kubernetes.client.CoreV1Api(self.client)

    def create(self, *objects: dict[str, Any]) -> None:
        create: Any = kubernetes.utils.create_from_dict  # core kinds; it knows no CRDs
        for obj in objects:
            if not obj["apiVersion"].startswith(f"{GROUP}/"):
                create(self.client, obj)
            elif obj["kind"] == "GatewayClass":
                self.custom.create_cluster_custom_object(GROUP, "v1", PLURALS[obj["kind"]], obj)
            else:
                ns, plural = obj["metadata"]["namespace"], PLURALS[obj["kind"]]
                self.custom.create_namespaced_custom_object(GROUP, "v1", ns, plural, obj)

    def accepted(self, kind: str, ns: str, name: str) -> tuple[str, str] | None:
        route = self.custom.get_namespaced_custom_object(GROUP, "v1", ns, PLURALS[kind], name)
        for parent in (route.get("status") or {}).get("parents") or []:
            for condition in parent["conditions"]:
                if condition["type"] == "Accepted":
                    return condition["status"], condition["reason"]
        return None

    def attached(self, name: str) -> dict[str, int]:
        gateway = self.custom.get_namespaced_custom_object(GROUP, "v1", INFRA, "gateways", name)
        listeners = (gateway.get("status") or {}).get("listeners") or []
        return {x["name"]: x["attachedRoutes"] for x in listeners}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    workdir = tmp_path_factory.mktemp("versions")
    ca = CertificateAuthority.create("e2e versions CA")
    echoes = [Echo("tcp"), Echo("alpha", tls_context(ca, "alpha.example", workdir))]
    stack = Stack(
        Launcher.pex_files(Path(".")),
        workdir,
        ports=StackPorts.free(),
        gateway_api="standard",
        echo_services=[(APPS, "web")],
        extra_objects=[namespace(INFRA), namespace(APPS, team="web")],
    )
    try:
        stack.start()
        running = Cluster(stack, ca)
        tcp, alpha = echoes
        http_listeners = [
            selected_by("by-name", 8080, {"matchLabels": {NAME_LABEL: APPS}}),
            selected_by("by-team", 8081, {"matchLabels": {"team": "web"}}),
        ]
        stream_listeners = [
            {"name": "tcp", "port": 9000, "protocol": "TCP"},
            {"name": "tls", "port": 9443, "protocol": "TLS", "tls": {"mode": "Passthrough"}},
        ]
        running.create(
            {
                "apiVersion": f"{GROUP}/v1",
                "kind": "GatewayClass",
                "metadata": {"name": "coxswain"},
                "spec": {"controllerName": "coxswain-labs.dev/gateway-controller"},
            },
            gateway_api(
                "Gateway",
                "gw",
                INFRA,
                {"gatewayClassName": "coxswain", "listeners": http_listeners},
            ),
            {
                "apiVersion": "v1",
                "kind": "Service",
                "metadata": {"name": "web", "namespace": APPS},
                "spec": {"ports": [{"name": "http", "port": 80}]},
            },
            http_route("named", "by-name", "named.example"),
            http_route("team", "by-team", "team.example"),
            *local_backend("tcp-echo", 7000, tcp.port),
            *local_backend("alpha", 7000, alpha.port),
            gateway_api(
                "Gateway",
                "streams",
                INFRA,
                {"gatewayClassName": "coxswain", "listeners": stream_listeners},
            ),
            stream_route("TCPRoute", "tcp", "tcp", "tcp-echo"),
            stream_route("TLSRoute", "alpha", "tls", "alpha", hostnames=["alpha.example"]),
        )
        yield running
        running.client.close()
    finally:
        statuses = stack.stop()
        for echo in echoes:
            echo.close()
    assert all(code == 0 for code in statuses.values()), statuses


# ------------------------------------------------------------------------------ clients


def http_get(port: int, host: str) -> int:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request("GET", "/", headers={"Host": host})
        response = conn.getresponse()
        body = response.read()
        if response.status == 200:
            assert json.loads(body)["namespace"] == APPS
        return response.status
    finally:
        conn.close()


def tcp_echo(port: int, payload: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(payload)
        sock.shutdown(socket.SHUT_WR)
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    return data


def tls_echo(port: int, host: str, context: ssl.SSLContext) -> tuple[str, bytes]:
    with (
        socket.create_connection(("127.0.0.1", port), timeout=10) as raw,
        context.wrap_socket(raw, server_hostname=host) as tls,
    ):
        cert: Any = tls.getpeercert() or {}
        names = [str(v) for kind, v in cert.get("subjectAltName", ()) if kind == "DNS"]
        sent = b"hello " + host.encode()
        tls.sendall(sent)
        data = b""
        while not data.endswith(sent) and (chunk := tls.recv(65536)):
            data += chunk
    return ",".join(names), data


ACCEPTED = ("True", "Accepted")
REFUSED = ("False", "NotAllowedByListeners")


# ------------------------------------------------------------------------------ scenarios


def test_routes_follow_their_namespaces_labels(cluster: Cluster) -> None:
    ports = eventually(lambda: cluster.stack.bind_ports(INFRA, "gw"), "the bind ports")
    named, team = ports["by-name"], ports["by-team"]
    # Selected by the label the API server set: served, as the team-selected route is.
    eventually(lambda: http_get(named, "named.example") == 200, "the name-selected route")
    eventually(lambda: http_get(team, "team.example") == 200, "the label-selected route")
    assert cluster.accepted("HTTPRoute", APPS, "named") == ACCEPTED
    assert cluster.attached("gw") == {"by-name": 1, "by-team": 1}

    cluster.core.patch_namespace(APPS, {"metadata": {"labels": {"team": "ops"}}})
    eventually(lambda: cluster.accepted("HTTPRoute", APPS, "team") == REFUSED, "a refusal")
    eventually(lambda: http_get(team, "team.example") == 404, "the route to stop being served")
    assert cluster.attached("gw") == {"by-name": 1, "by-team": 0}
    assert http_get(named, "named.example") == 200

    cluster.core.patch_namespace(APPS, {"metadata": {"labels": {"team": "web"}}})
    eventually(lambda: http_get(team, "team.example") == 200, "the route to be served again")
    eventually(lambda: cluster.attached("gw") == {"by-name": 1, "by-team": 1}, "both counted")
    assert cluster.accepted("HTTPRoute", APPS, "team") == ACCEPTED


def test_v1_tls_and_tcp_routes_carry_traffic(cluster: Cluster) -> None:
    ports = eventually(lambda: cluster.stack.bind_ports(INFRA, "streams"), "the bind ports")
    eventually(lambda: tcp_echo(ports["tcp"], b"ping") == b"tcp:ping", "TCP through the proxy")
    context = ssl.create_default_context(cadata=cluster.ca.certificate_pem.decode())
    names, data = eventually(
        lambda: tls_echo(ports["tls"], "alpha.example", context), "TLS passthrough"
    )
    assert (names, data) == ("alpha.example", b"alpha:hello alpha.example")
    for kind, name in (("TLSRoute", "alpha"), ("TCPRoute", "tcp")):

        def accepted(kind: str = kind, name: str = name) -> bool:
            return cluster.accepted(kind, INFRA, name) == ACCEPTED

        eventually(accepted, f"{kind} status")
    assert cluster.attached("streams") == {"tcp": 1, "tls": 1}
