"""End to end: TCPRoute, TLSRoute (passthrough and terminate) and UDPRoute through the shipped PEX
files.

One stack (the API emulator serving the experimental channel, the load balancer, identity,
controller and shared proxy, each its own OS process) serves one Gateway with a TCP listener, a
TLS passthrough listener and a TLS Terminate listener sharing one port, and a UDP listener. The
backends are echo servers in this test process on 127.0.0.1, written into EndpointSlices as a
cluster's endpoints controller would. Covers: the Gateway becomes Programmed once the proxy
bound the stream ports; TCP reaches its echo at the Gateway's own load balancer address (the VIP
Service) and at the shared proxy's bind port; TLS passthrough chooses between two TLSRoutes by
server name, and the client verifies each backend's own certificate through the proxy, and a
name no route serves is closed; on the same port, the name the Terminate listener owns is
terminated with the listener's certificate (from its Secret, verified by the client) and its
plaintext reaches a plain TCP echo, a client's close_notify passed on as a half-close; UDP
datagrams come back through the VIP and at the bind port.
"""

from __future__ import annotations

import base64
import contextlib
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

from coxswain_devkit.loadbalancer import PORT_OFFSET_ANNOTATION
from coxswain_devkit.pki import CertificateAuthority
from coxswain_devkit.stack import Launcher, Stack, StackPorts
from coxswain_devkit.waiting import until

WAIT = 60.0
GROUP = "gateway.networking.k8s.io"
NS = "e2e-streams"
GATEWAY_LABEL = "gateway.networking.k8s.io/gateway-name"
# (kind) -> (version, plural) as the experimental channel serves them.
KINDS = {
    "GatewayClass": ("v1", "gatewayclasses"),
    "Gateway": ("v1", "gateways"),
    "TCPRoute": ("v1alpha2", "tcproutes"),
    "TLSRoute": ("v1alpha2", "tlsroutes"),
    "UDPRoute": ("v1alpha2", "udproutes"),
}
TCP_PORT, TLS_PORT, UDP_PORT = 9000, 9443, 9053  # >= 1024: the load balancer binds them as is
TERMINATED = "term.example"  # the name the Terminate listener owns on the TLS port
LISTENERS = [
    {"name": "tcp", "port": TCP_PORT, "protocol": "TCP"},
    {"name": "tls", "port": TLS_PORT, "protocol": "TLS", "tls": {"mode": "Passthrough"}},
    {
        "name": "tls-terminate",
        "port": TLS_PORT,
        "protocol": "TLS",
        "hostname": TERMINATED,
        "tls": {"mode": "Terminate", "certificateRefs": [{"name": "term-cert"}]},
    },
    {"name": "udp", "port": UDP_PORT, "protocol": "UDP"},
]


def eventually(predicate: Callable[[], Any], what: str, timeout: float = WAIT) -> Any:
    return until(
        predicate, what, within=timeout, tolerate=(OSError, http.client.HTTPException, ssl.SSLError)
    )


# ------------------------------------------------------------------------------ backends


class _TcpEcho(socketserver.BaseRequestHandler):
    """Sends back what it reads, prefixed by its server's name, until the client half-closes."""

    def handle(self) -> None:
        sock: socket.socket = self.request
        server: Any = self.server
        context: ssl.SSLContext | None = server.context
        if context is None:
            self._echo(sock, server.name)
            return
        try:
            wrapped = context.wrap_socket(sock, server_side=True)
        except (ssl.SSLError, OSError):
            return
        with wrapped:
            self._echo(wrapped, server.name)

    @staticmethod
    def _echo(sock: socket.socket, name: str) -> None:
        try:
            sock.sendall(name.encode() + b":")
            while data := sock.recv(65536):
                sock.sendall(data)
        except (ssl.SSLError, OSError):
            return  # the client went away


class _UdpEcho(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        data, sock = self.request
        sock.sendto(b"udp:" + data, self.client_address)


class Echo:
    """A threaded echo server on 127.0.0.1, port 0: TCP, TLS (with `context`) or UDP."""

    def __init__(self, name: str, *, udp: bool = False, context: ssl.SSLContext | None = None):
        kind: Any = socketserver.ThreadingUDPServer if udp else socketserver.ThreadingTCPServer
        kind.daemon_threads = True
        self.server = kind(("127.0.0.1", 0), _UdpEcho if udp else _TcpEcho)
        self.server.name = name
        self.server.context = context
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


def tls_secret(ca: CertificateAuthority, name: str, host: str) -> dict[str, Any]:
    """A kubernetes.io/tls Secret holding a certificate for `host` that `ca` signed."""
    issued = ca.issue(dns=[host])
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name, "namespace": NS},
        "type": "kubernetes.io/tls",
        "data": {
            "tls.crt": base64.b64encode(issued.chain_pem).decode(),
            "tls.key": base64.b64encode(issued.key_pem).decode(),
        },
    }


def backend(name: str, port: int, actual: int, protocol: str = "TCP") -> list[dict[str, Any]]:
    """A Service and the EndpointSlice naming the echo on 127.0.0.1:`actual`."""
    named = {"name": "echo", "port": port, "protocol": protocol}
    return [
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": name, "namespace": NS},
            "spec": {"ports": [named]},
        },
        {
            "apiVersion": "discovery.k8s.io/v1",
            "kind": "EndpointSlice",
            "metadata": {
                "name": f"{name}-local",
                "namespace": NS,
                "labels": {"kubernetes.io/service-name": name},
            },
            "addressType": "IPv4",
            "ports": [{**named, "port": actual}],
            "endpoints": [{"addresses": ["127.0.0.1"], "conditions": {"ready": True}}],
        },
    ]


def stream_route(
    kind: str, name: str, section: str, service: str, port: int, hostnames: tuple[str, ...] = ()
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "parentRefs": [{"name": "gw", "sectionName": section}],
        "rules": [{"backendRefs": [{"name": service, "port": port}]}],
    }
    if hostnames:
        spec["hostnames"] = list(hostnames)
    return {
        "apiVersion": f"{GROUP}/{KINDS[kind][0]}",
        "kind": kind,
        "metadata": {"name": name, "namespace": NS},
        "spec": spec,
    }


class Cluster:
    def __init__(self, stack: Stack, ca: CertificateAuthority) -> None:
        self.stack = stack
        self.ca = ca  # signed the TLS echoes' certificates
        self.client = stack.client()
        self.custom: Any = kubernetes.client.CustomObjectsApi(self.client)
        self.core: Any = kubernetes.client.CoreV1Api(self.client)

    def create(self, *objects: dict[str, Any]) -> None:
        create: Any = kubernetes.utils.create_from_dict  # core kinds; it knows no CRDs
        for obj in objects:
            if obj["kind"] not in KINDS:
                create(self.client, obj)
                continue
            version, plural = KINDS[obj["kind"]]
            if obj["kind"] == "GatewayClass":
                self.custom.create_cluster_custom_object(GROUP, version, plural, obj)
            else:
                self.custom.create_namespaced_custom_object(GROUP, version, NS, plural, obj)

    def gateway(self) -> dict[str, Any]:
        return dict(self.custom.get_namespaced_custom_object(GROUP, "v1", NS, "gateways", "gw"))

    def vip(self, port: int) -> tuple[str, int] | None:
        """The Gateway's load balancer address for a listener port (its VIP Service's status),
        with the load balancer's offset should it have had to move the port."""
        found = self.core.list_namespaced_service(
            NS, label_selector=f"{GATEWAY_LABEL}=gw", _preload_content=False
        )
        for service in json.loads(found.data)["items"]:
            if all(int(p["port"]) != port for p in service["spec"].get("ports") or []):
                continue
            ingress = ((service.get("status") or {}).get("loadBalancer") or {}).get("ingress")
            ips = [str(i["ip"]) for i in ingress or [] if i.get("ip")]
            if ips:
                annotations = service["metadata"].get("annotations") or {}
                offset = annotations.get(PORT_OFFSET_ANNOTATION)
                return ips[0], port + int(offset) if offset and port < 1024 else port
        return None


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    workdir = tmp_path_factory.mktemp("streams")
    ca = CertificateAuthority.create("e2e stream CA")
    echoes = [
        Echo("tcp"),
        Echo("alpha", context=tls_context(ca, "alpha.example", workdir)),
        Echo("beta", context=tls_context(ca, "beta.example", workdir)),
        Echo("udp", udp=True),
    ]
    namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}}
    stack = Stack(
        Launcher.pex_files(Path(".")),
        workdir,
        ports=StackPorts.free(),
        gateway_api="experimental",
        extra_objects=[namespace],
    )
    try:
        stack.start()
        running = Cluster(stack, ca)
        tcp, alpha, beta, udp = echoes
        running.create(
            {
                "apiVersion": f"{GROUP}/v1",
                "kind": "GatewayClass",
                "metadata": {"name": "coxswain"},
                "spec": {"controllerName": "coxswain-labs.dev/gateway-controller"},
            },
            *backend("tcp-echo", 7000, tcp.port),
            *backend("alpha", 7443, alpha.port),
            *backend("beta", 7443, beta.port),
            *backend("udp-echo", 7053, udp.port, "UDP"),
            tls_secret(ca, "term-cert", TERMINATED),
            {
                "apiVersion": f"{GROUP}/v1",
                "kind": "Gateway",
                "metadata": {"name": "gw", "namespace": NS},
                "spec": {"gatewayClassName": "coxswain", "listeners": LISTENERS},
            },
            stream_route("TCPRoute", "tcp", "tcp", "tcp-echo", 7000),
            stream_route("TLSRoute", "alpha", "tls", "alpha", 7443, ("alpha.example",)),
            stream_route("TLSRoute", "beta", "tls", "beta", 7443, ("beta.example",)),
            stream_route("TLSRoute", "term", "tls-terminate", "tcp-echo", 7000),
            stream_route("UDPRoute", "udp", "udp", "udp-echo", 7053),
        )
        yield running
        running.client.close()
    finally:
        statuses = stack.stop()
        for echo in echoes:
            echo.close()
    assert all(code == 0 for code in statuses.values()), statuses


# ------------------------------------------------------------------------------ clients


def tcp_echo(address: tuple[str, int], payload: bytes) -> bytes:
    """Sends `payload`, half-closes, and reads to the end: the half-close must pass through."""
    with socket.create_connection(address, timeout=10) as sock:
        sock.sendall(payload)
        sock.shutdown(socket.SHUT_WR)
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    return data


def tls_echo(address: tuple[str, int], host: str, context: ssl.SSLContext) -> tuple[str, bytes]:
    """The DNS name of the certificate the client verified for `host`, and the echo."""
    with (
        socket.create_connection(address, timeout=10) as raw,
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


def tls_half_closed(address: tuple[str, int], host: str, context: ssl.SSLContext) -> bytes:
    """Sends over TLS, then its close_notify while its socket stays open (a TLS half-close,
    which `ssl.SSLSocket` cannot do, hence memory BIOs), and reads to the proxy's close_notify:
    the answer must still come back after the client's end."""
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    tls = context.wrap_bio(incoming, outgoing, server_hostname=host)
    with socket.create_connection(address, timeout=10) as sock:

        def records() -> None:
            sock.sendall(outgoing.read())
            data = sock.recv(65536)
            if data:
                incoming.write(data)
            else:
                incoming.write_eof()

        while True:
            try:
                tls.do_handshake()
                break
            except ssl.SSLWantReadError:
                records()
        tls.write(b"hello " + host.encode())
        with contextlib.suppress(ssl.SSLWantReadError):
            tls.unwrap()  # the close_notify: this direction has ended
        sock.sendall(outgoing.read())
        received = b""
        while True:
            try:
                chunk = tls.read(65536)
            except ssl.SSLWantReadError:
                records()
                continue
            except ssl.SSLZeroReturnError:
                break
            if not chunk:
                break
            received += chunk
    return received


def udp_echo(address: tuple[str, int], payload: bytes) -> bytes | None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.settimeout(1.0)
        sock.sendto(payload, address)
        try:
            return sock.recv(65536)
        except TimeoutError:
            return None  # datagrams may be lost until the path is there; the caller retries


def programmed(cluster: Cluster) -> dict[str, Any] | None:
    for condition in (cluster.gateway().get("status") or {}).get("conditions") or []:
        if condition["type"] == "Programmed" and condition["status"] == "True":
            return dict(condition)
    return None


# ------------------------------------------------------------------------------ scenarios


def test_the_gateway_is_programmed_once_the_stream_ports_are_bound(cluster: Cluster) -> None:
    eventually(lambda: programmed(cluster), "Programmed True")
    listeners = {s["name"]: s for s in cluster.gateway()["status"]["listeners"]}
    expected = {
        "tcp": "TCPRoute",
        "tls": "TLSRoute",
        "tls-terminate": "TLSRoute",
        "udp": "UDPRoute",
    }
    for name, kind in expected.items():
        assert [k["kind"] for k in listeners[name]["supportedKinds"]] == [kind]
        conditions = {c["type"]: c["status"] for c in listeners[name]["conditions"]}
        assert conditions["Accepted"] == conditions["Programmed"] == "True", (name, conditions)
    assert (listeners["tcp"]["attachedRoutes"], listeners["tls"]["attachedRoutes"]) == (1, 2)
    assert (listeners["tls-terminate"]["attachedRoutes"], listeners["udp"]["attachedRoutes"]) == (
        1,
        1,
    )


def test_tcp_reaches_its_echo_through_the_vip_and_at_the_bind_port(cluster: Cluster) -> None:
    vip = eventually(lambda: cluster.vip(TCP_PORT), "the VIP address")
    assert vip[0].startswith("127.0.200.")
    payload = b"x" * 200_000  # more than one read's worth each way
    eventually(lambda: tcp_echo(vip, payload) == b"tcp:" + payload, "TCP through the VIP")
    bind = eventually(lambda: cluster.stack.bind_ports(NS, "gw").get("tcp"), "the bind port")
    assert tcp_echo(("127.0.0.1", bind), b"direct") == b"tcp:direct"


def test_tls_passthrough_routes_by_server_name_to_each_backends_certificate(
    cluster: Cluster,
) -> None:
    vip = eventually(lambda: cluster.vip(TLS_PORT), "the VIP address")
    context = ssl.create_default_context(cadata=cluster.ca.certificate_pem.decode())
    for host, name in (("alpha.example", "alpha"), ("beta.example", "beta")):

        def answered(host: str = host) -> tuple[str, bytes]:
            return tls_echo(vip, host, context)

        names, data = eventually(answered, f"TLS passthrough for {host}")
        assert names == host  # the backend's own certificate, verified by the client
        assert data == f"{name}:hello {host}".encode()
    # A name no TLSRoute serves: the proxy closes the connection, no handshake completes.
    with pytest.raises((ssl.SSLError, OSError)):
        tls_echo(vip, "gamma.example", context)


def test_the_terminate_listeners_name_is_terminated_and_relayed_as_plaintext(
    cluster: Cluster,
) -> None:
    vip = eventually(lambda: cluster.vip(TLS_PORT), "the VIP address")
    context = ssl.create_default_context(cadata=cluster.ca.certificate_pem.decode())

    def answered() -> tuple[str, bytes]:
        return tls_echo(vip, TERMINATED, context)

    names, data = eventually(answered, f"TLS termination for {TERMINATED}")
    assert names == TERMINATED  # the listener's certificate, from its Secret, verified
    assert data == f"tcp:hello {TERMINATED}".encode()  # the plain TCP echo read plaintext
    # The passthrough names on the same port are still the backends' own.
    assert tls_echo(vip, "alpha.example", context) == (
        "alpha.example",
        b"alpha:hello alpha.example",
    )
    # A client's close_notify reaches the backend as its end; the answer still comes back.
    assert tls_half_closed(vip, TERMINATED, context) == f"tcp:hello {TERMINATED}".encode()


def test_udp_datagrams_are_echoed_through_the_vip_and_at_the_bind_port(cluster: Cluster) -> None:
    vip = eventually(lambda: cluster.vip(UDP_PORT), "the VIP address")
    eventually(lambda: udp_echo(vip, b"ping") == b"udp:ping", "UDP through the VIP")
    for index in range(5):
        message = f"datagram {index}".encode()

        def echoed(message: bytes = message) -> bytes | None:
            return udp_echo(vip, message)

        assert eventually(echoed, "an echo") == b"udp:" + message
    bind = eventually(lambda: cluster.stack.bind_ports(NS, "gw").get("udp"), "the bind port")
    assert eventually(lambda: udp_echo(("127.0.0.1", bind), b"direct"), "UDP at the bind port") == (
        b"udp:direct"
    )
