"""End to end: client certificates both ways and BackendTLSPolicy subjectAltNames, through the
shipped PEX files.

One stack (the API emulator, identity, controller and shared proxy, each its own OS process)
serves one Gateway: an HTTPS listener whose clients must present a certificate its CA ConfigMap
verifies (spec.tls.frontend.default, AllowValidOnly), an HTTPS listener on another port that
admits every client (perPort AllowInsecureFallback), and an HTTP listener whose route reaches a
TLS backend in this test process under a BackendTLSPolicy with a URI subjectAltName, the
Gateway presenting its spec.tls.backend client certificate, which that backend requires. Every
certificate is minted in the test. Covers: the Gateway's and the policy's status; a client with
a valid certificate served, one without or with a stranger's refused in the handshake; the
fallback port serving anyone; the client CA bundle rotated by editing its ConfigMap, taking
effect on the next handshake with the same proxy process on the same port; the backend seeing
the Gateway's certificate, and the rotated one after its Secret changes; a subjectAltName the
backend's certificate lacks answering 5xx.
"""

from __future__ import annotations

import base64
import http.client
import http.server
import json
import socket
import ssl
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import kubernetes
import pytest

from coxswain_devkit.pki import CertificateAuthority, Issued
from coxswain_devkit.stack import Launcher, Stack, StackPorts
from coxswain_devkit.waiting import until

WAIT = 60.0
GROUP = "gateway.networking.k8s.io"
NS = "e2e-tls"
PLURALS = {
    "GatewayClass": "gatewayclasses",
    "Gateway": "gateways",
    "HTTPRoute": "httproutes",
    "BackendTLSPolicy": "backendtlspolicies",
}
SECURE_NAME = "secure.internal"
SECURE_URI = f"spiffe://cluster.local/ns/{NS}/sa/secure"


def _https_listener(name: str, port: int) -> dict[str, Any]:
    return {
        "name": name,
        "port": port,
        "protocol": "HTTPS",
        "hostname": f"{name}.example",
        "tls": {"certificateRefs": [{"name": "server-cert"}]},
    }


LISTENERS = [
    {"name": "http", "port": 80, "protocol": "HTTP"},
    _https_listener("mtls", 443),
    _https_listener("open", 8443),
]
CLIENT_CA_REF = {"group": "", "kind": "ConfigMap", "name": "client-ca"}
GATEWAY_TLS = {
    "frontend": {
        "default": {"validation": {"caCertificateRefs": [CLIENT_CA_REF]}},
        "perPort": [
            {
                "port": 8443,
                "tls": {
                    "validation": {
                        "mode": "AllowInsecureFallback",
                        "caCertificateRefs": [CLIENT_CA_REF],
                    }
                },
            }
        ],
    },
    "backend": {"clientCertificateRef": {"name": "gateway-client"}},
}


def eventually(predicate: Callable[[], Any], what: str, timeout: float = WAIT) -> Any:
    return until(predicate, what, within=timeout, tolerate=(OSError, http.client.HTTPException))


def _load(context: ssl.SSLContext, issued: Issued, workdir: Path, name: str) -> None:
    path = workdir / f"{name}.pem"
    path.write_bytes(issued.chain_pem + b"\n" + issued.key_pem)
    context.load_cert_chain(path)


# ------------------------------------------------------------------------------ the backend


class _Handler(http.server.BaseHTTPRequestHandler):
    """Answers with its name and the DNS names of the client certificate it verified."""

    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        peer: Any = self.connection.getpeercert() or {}
        names = [str(v) for kind, v in peer.get("subjectAltName", ()) if kind == "DNS"]
        body = json.dumps({"pod": "secure-0", "client": names}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


class TlsBackend(http.server.ThreadingHTTPServer):
    """An HTTPS server on 127.0.0.1 that requires a client certificate from `clients`; each
    handshake runs in its connection's own thread."""

    daemon_threads = True

    def __init__(self, context: ssl.SSLContext) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.context = context
        self.port = int(self.server_address[1])
        self._thread = threading.Thread(target=self.serve_forever, daemon=True)
        self._thread.start()

    def get_request(self) -> tuple[socket.socket, Any]:
        sock, address = self.socket.accept()
        wrapped = self.context.wrap_socket(sock, server_side=True, do_handshake_on_connect=False)
        return wrapped, address

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a refused handshake is what some scenarios want

    def close(self) -> None:
        self.shutdown()
        self.server_close()


# ------------------------------------------------------------------------------ objects


def ca_configmap(name: str, ca: CertificateAuthority) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": NS},
        "data": {"ca.crt": ca.certificate_pem.decode()},
    }


def tls_secret(name: str, issued: Issued) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "kubernetes.io/tls",
        "metadata": {"name": name, "namespace": NS},
        "data": {
            "tls.crt": base64.b64encode(issued.chain_pem).decode(),
            "tls.key": base64.b64encode(issued.key_pem).decode(),
        },
    }


def secure_backend(port: int) -> list[dict[str, Any]]:
    named = {"name": "https", "port": 443, "protocol": "TCP"}
    return [
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": "secure", "namespace": NS},
            "spec": {"ports": [named]},
        },
        {
            "apiVersion": "discovery.k8s.io/v1",
            "kind": "EndpointSlice",
            "metadata": {
                "name": "secure-local",
                "namespace": NS,
                "labels": {"kubernetes.io/service-name": "secure"},
            },
            "addressType": "IPv4",
            "ports": [{**named, "port": port}],
            "endpoints": [{"addresses": ["127.0.0.1"], "conditions": {"ready": True}}],
        },
    ]


def policy(uri: str) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/v1",
        "kind": "BackendTLSPolicy",
        "metadata": {"name": "secure-tls", "namespace": NS},
        "spec": {
            "targetRefs": [{"group": "", "kind": "Service", "name": "secure"}],
            "validation": {
                "caCertificateRefs": [{"group": "", "kind": "ConfigMap", "name": "backend-ca"}],
                "hostname": SECURE_NAME,
                "subjectAltNames": [{"type": "URI", "uri": uri}],
            },
        },
    }


def http_route(name: str, hostname: str, section: str, service: str, port: int) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/v1",
        "kind": "HTTPRoute",
        "metadata": {"name": name, "namespace": NS},
        "spec": {
            "parentRefs": [{"name": "gw", "sectionName": section}],
            "hostnames": [hostname],
            "rules": [{"backendRefs": [{"name": service, "port": port}]}],
        },
    }


class Cluster:
    def __init__(self, stack: Stack, cas: dict[str, CertificateAuthority], workdir: Path):
        self.stack = stack
        self.cas = cas
        self.workdir = workdir
        self.client = stack.client()
        self.custom: Any = kubernetes.client.CustomObjectsApi(self.client)
        self.core: Any = kubernetes.client.CoreV1Api(self.client)
        self.ports: dict[str, int] = {}

    def create(self, *objects: dict[str, Any]) -> None:
        create: Any = kubernetes.utils.create_from_dict  # core kinds; it knows no CRDs
        for obj in objects:
            if obj["kind"] not in PLURALS:
                create(self.client, obj)
            elif obj["kind"] == "GatewayClass":
                self.custom.create_cluster_custom_object(GROUP, "v1", PLURALS["GatewayClass"], obj)
            else:
                plural = PLURALS[obj["kind"]]
                self.custom.create_namespaced_custom_object(GROUP, "v1", NS, plural, obj)

    def get(self, kind: str, name: str) -> dict[str, Any]:
        return dict(self.custom.get_namespaced_custom_object(GROUP, "v1", NS, PLURALS[kind], name))

    def patch(self, kind: str, name: str, body: dict[str, Any]) -> None:
        self.custom.patch_namespaced_custom_object(GROUP, "v1", NS, PLURALS[kind], name, body)

    def conditions(self, kind: str, name: str) -> dict[str, tuple[str, str]]:
        status = self.get(kind, name).get("status") or {}
        return {c["type"]: (c["status"], c["reason"]) for c in status.get("conditions") or []}

    def client_context(self, issuer: str | None, name: str = "client.example") -> ssl.SSLContext:
        """A client trusting the Gateway's certificate, presenting one `issuer` signed."""
        context = ssl.create_default_context(cadata=self.cas["server"].certificate_pem.decode())
        if issuer is not None:
            _load(context, self.cas[issuer].issue(dns=[name]), self.workdir, f"{issuer}-client")
        return context


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    workdir = tmp_path_factory.mktemp("tls")
    names = ("server", "client", "stranger", "backend", "gateway-client", "gateway-other")
    cas = {n: CertificateAuthority.create(f"e2e {n} CA") for n in names}
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.verify_mode = ssl.CERT_REQUIRED
    context.load_verify_locations(cadata=cas["gateway-client"].certificate_pem.decode())
    served = cas["backend"].issue(dns=[SECURE_NAME], uris=[SECURE_URI], ips=["127.0.0.1"])
    _load(context, served, workdir, "secure")
    backend = TlsBackend(context)
    namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}}
    stack = Stack(
        Launcher.pex_files(Path(".")), workdir, ports=StackPorts.free(), extra_objects=[namespace]
    )
    try:
        stack.start()
        running = Cluster(stack, cas, workdir)
        gateway = {
            "apiVersion": f"{GROUP}/v1",
            "kind": "Gateway",
            "metadata": {"name": "gw", "namespace": NS},
            "spec": {"gatewayClassName": "coxswain", "listeners": LISTENERS},
        }
        running.create(
            {
                "apiVersion": f"{GROUP}/v1",
                "kind": "GatewayClass",
                "metadata": {"name": "coxswain"},
                "spec": {"controllerName": "coxswain-labs.dev/gateway-controller"},
            },
            gateway,
        )
        # The bind ports first, from the Gateway alone (`Stack.bind_ports` translates it
        # offline, without the ConfigMaps spec.tls names); spec.tls does not move them.
        running.ports = eventually(lambda: stack.bind_ports(NS, "gw"), "bind ports")
        running.create(
            ca_configmap("client-ca", cas["client"]),
            ca_configmap("backend-ca", cas["backend"]),
            tls_secret("server-cert", cas["server"].issue(dns=["mtls.example", "open.example"])),
            tls_secret("gateway-client", cas["gateway-client"].issue(dns=["gw.internal"])),
            *secure_backend(backend.port),
            policy(SECURE_URI),
            http_route("front", "mtls.example", "mtls", "secure", 443),
            http_route("open", "open.example", "open", "secure", 443),
            http_route("back", "back.example", "http", "secure", 443),
        )
        running.patch("Gateway", "gw", {"spec": {"tls": GATEWAY_TLS}})
        yield running
        running.client.close()
    finally:
        statuses = stack.stop()
        backend.close()
    assert all(code == 0 for code in statuses.values()), statuses


# ------------------------------------------------------------------------------ clients


def https_get(port: int, host: str, context: ssl.SSLContext) -> tuple[int, dict[str, Any]] | None:
    """One request over TLS with `host` as SNI and Host; None when the proxy refused the
    handshake (with TLS 1.3 the client learns it on its first read)."""
    try:
        with (
            socket.create_connection(("127.0.0.1", port), timeout=10) as raw,
            context.wrap_socket(raw, server_hostname=host) as tls,
        ):
            tls.sendall(f"GET / HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n".encode())
            data = b""
            while chunk := tls.recv(65536):
                data += chunk
    except (ssl.SSLError, ConnectionError):
        return None
    if not data:
        return None
    head, _, body = data.partition(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    try:
        return status, json.loads(body) if body else {}
    except ValueError:
        return status, {"raw": body.decode(errors="replace")}


def http_get(port: int, host: str) -> tuple[int, dict[str, Any]]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request("GET", "/", headers={"Host": host})
        response = conn.getresponse()
        body = response.read()
        try:
            return response.status, json.loads(body) if body else {}
        except ValueError:
            return response.status, {"raw": body.decode(errors="replace")}
    finally:
        conn.close()


# ------------------------------------------------------------------------------ scenarios


def test_the_gateway_and_the_policy_report_their_tls(cluster: Cluster) -> None:
    def settled() -> dict[str, tuple[str, str]] | None:
        found = cluster.conditions("Gateway", "gw")
        return found if found.get("Programmed", ("", ""))[0] == "True" else None

    conditions = eventually(settled, "the Gateway Programmed")
    assert eventually(
        lambda: (
            cluster.conditions("Gateway", "gw").get("InsecureFrontendValidationMode")
            == ("True", "ConfigurationChanged")
        ),
        "InsecureFrontendValidationMode",
    )
    assert conditions["Accepted"] == ("True", "Accepted")
    assert cluster.conditions("Gateway", "gw")["ResolvedRefs"] == ("True", "ResolvedRefs")
    listeners = cluster.get("Gateway", "gw")["status"]["listeners"]
    for listener in listeners:
        states = {c["type"]: c["status"] for c in listener["conditions"]}
        assert states["Accepted"] == states["ResolvedRefs"] == "True", listener

    def ancestors() -> list[dict[str, Any]] | None:
        status = cluster.get("BackendTLSPolicy", "secure-tls").get("status") or {}
        return status.get("ancestors")

    (entry,) = eventually(ancestors, "the policy's ancestors")
    assert entry["ancestorRef"]["name"] == "gw" and entry["ancestorRef"]["namespace"] == NS
    assert entry["controllerName"] == "coxswain-labs.dev/gateway-controller"
    assert {c["type"]: c["reason"] for c in entry["conditions"]} == {
        "Accepted": "Accepted",
        "ResolvedRefs": "ResolvedRefs",
    }


def test_a_validated_listener_serves_only_clients_with_a_valid_certificate(
    cluster: Cluster,
) -> None:
    port = cluster.ports["mtls"]
    valid = cluster.client_context("client")
    answered = eventually(lambda: https_get(port, "mtls.example", valid), "a client with a cert")
    assert answered[0] == 200 and answered[1]["pod"] == "secure-0"
    assert https_get(port, "mtls.example", cluster.client_context(None)) is None
    assert https_get(port, "mtls.example", cluster.client_context("stranger")) is None


def test_the_fallback_port_serves_every_client(cluster: Cluster) -> None:
    port = cluster.ports["open"]
    for issuer in (None, "client", "stranger"):
        context = cluster.client_context(issuer)

        def answered(context: ssl.SSLContext = context) -> tuple[int, dict[str, Any]] | None:
            return https_get(port, "open.example", context)

        assert eventually(answered, f"the fallback port for {issuer}")[0] == 200


def test_the_backend_sees_the_gateways_client_certificate_and_its_rotation(
    cluster: Cluster,
) -> None:
    port = cluster.ports["http"]

    def client_names() -> list[str] | None:
        status, body = http_get(port, "back.example")
        return body.get("client") if status == 200 else None

    assert eventually(client_names, "the backend reached over mTLS") == ["gw.internal"]
    rotated = cluster.cas["gateway-client"].issue(dns=["gw-rotated.internal"])
    cluster.core.patch_namespaced_secret(
        "gateway-client", NS, {"data": tls_secret("gateway-client", rotated)["data"]}
    )
    eventually(lambda: client_names() == ["gw-rotated.internal"], "the rotated certificate")


def test_rotating_the_client_ca_takes_effect_without_a_restart(cluster: Cluster) -> None:
    port, pid = cluster.ports["mtls"], cluster.stack.processes["proxy"].pid
    client, stranger = cluster.client_context("client"), cluster.client_context("stranger")
    eventually(lambda: https_get(port, "mtls.example", client), "the first bundle")
    data = {"ca.crt": cluster.cas["stranger"].certificate_pem.decode()}
    cluster.core.patch_namespaced_config_map("client-ca", NS, {"data": data})
    eventually(lambda: https_get(port, "mtls.example", stranger), "the rotated bundle")
    assert https_get(port, "mtls.example", client) is None
    assert cluster.stack.processes["proxy"].pid == pid  # the same process, on the same port


def test_a_subject_alt_name_the_backend_lacks_answers_5xx(cluster: Cluster) -> None:
    port = cluster.ports["http"]
    eventually(lambda: http_get(port, "back.example")[0] == 200, "the backend reached")
    wrong = policy("spiffe://cluster.local/ns/elsewhere/sa/other")["spec"]
    cluster.patch("BackendTLSPolicy", "secure-tls", {"spec": wrong})
    eventually(lambda: http_get(port, "back.example")[0] in (502, 503), "the SAN refused")
    cluster.patch("BackendTLSPolicy", "secure-tls", {"spec": policy(SECURE_URI)["spec"]})
    eventually(lambda: http_get(port, "back.example")[0] == 200, "the SAN accepted again")
