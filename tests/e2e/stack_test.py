"""End to end: every service from its shipped PEX file, wired as in production.

The devkit API emulator, echo backends, the identity service, controllers and shared proxies run
as their own OS processes; the proxy bootstraps its SVID and streams its routing over mTLS. Each
test drives the stack by applying objects through the real `kubernetes` client and sending real
requests. Covers: Programmed only after the proxy acked and bound, then traffic; route edits and
deletes followed by traffic; HTTPS by SNI with two certificates; a killed controller (the proxy
keeps serving, then reconnects); leader failover with no failed request; a proxy whose identity
may not hold a dedicated Gateway's scope; Ingress-only mode.
"""

from __future__ import annotations

import http.client
import json
import socket
import ssl
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import kubernetes
import pytest

from coxswain_devkit.pki import CertificateAuthority
from coxswain_devkit.stack import Launcher, Stack, StackPorts, tls_secret
from coxswain_devkit.waiting import until

WAIT = 60.0
GROUP, VERSION = "gateway.networking.k8s.io", "v1"


def eventually(predicate: Callable[[], Any], what: str, timeout: float = WAIT) -> Any:
    return until(predicate, what, within=timeout, tolerate=(OSError, http.client.HTTPException))


def get(
    port: int, host: str, path: str = "/", headers: dict[str, str] | None = None
) -> tuple[int, dict[str, Any]]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request("GET", path, headers={"Host": host, **(headers or {})})
        response = conn.getresponse()
        body = response.read()
        try:
            data = json.loads(body) if body else {}
        except ValueError:
            data = {"raw": body.decode(errors="replace")}
        return response.status, data
    finally:
        conn.close()


def pod(port: int, host: str, path: str = "/") -> str | None:
    status, body = get(port, host, path)
    return str(body.get("pod")) if status == 200 else None


def namespace(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}


def service(ns: str, name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"ports": [{"name": "http", "port": 80}]},
    }


def gateway_class() -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "GatewayClass",
        "metadata": {"name": "coxswain"},
        "spec": {"controllerName": "coxswain-labs.dev/gateway-controller"},
    }


def gateway(ns: str, listeners: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "Gateway",
        "metadata": {"name": "gw", "namespace": ns},
        "spec": {"gatewayClassName": "coxswain", "listeners": listeners},
    }


def route(ns: str, name: str, hostname: str, backend: str, path: str = "/") -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "HTTPRoute",
        "metadata": {"name": name, "namespace": ns},
        "spec": {
            "parentRefs": [{"name": "gw"}],
            "hostnames": [hostname],
            "rules": [
                {
                    "matches": [{"path": {"type": "PathPrefix", "value": path}}],
                    "backendRefs": [{"name": backend, "port": 80}],
                }
            ],
        },
    }


HTTP = {"name": "http", "port": 80, "protocol": "HTTP"}
PLURALS = {"GatewayClass": "gatewayclasses", "Gateway": "gateways", "HTTPRoute": "httproutes"}


class Traffic:
    """Requests sent without pause from background threads; every non-200 is kept."""

    def __init__(self, port: int, host: str, *, threads: int = 1) -> None:
        self.failures: list[str] = []
        self._stop = threading.Event()
        self._threads = [
            threading.Thread(target=self._run, args=(port, host)) for _ in range(threads)
        ]

    def _run(self, port: int, host: str) -> None:
        while not self._stop.is_set():
            try:
                status, _ = get(port, host)
                if status != 200:
                    self.failures.append(str(status))
            except OSError as err:
                self.failures.append(repr(err))

    def __enter__(self) -> Traffic:
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join()


class Cluster:
    """Talks to the stack's API emulator through the real `kubernetes` client."""

    def __init__(self, stack: Stack) -> None:
        self.stack = stack
        self.client = stack.client()
        self.custom: Any = kubernetes.client.CustomObjectsApi(self.client)

    def create(self, *objects: dict[str, Any]) -> None:
        create: Any = kubernetes.utils.create_from_dict  # core kinds; it knows no CRDs
        for obj in objects:
            group, _, version = obj["apiVersion"].rpartition("/")
            if group != GROUP:
                create(self.client, obj)
                continue
            plural = PLURALS[obj["kind"]]
            if obj["kind"] == "GatewayClass":
                self.custom.create_cluster_custom_object(group, version, plural, obj)
            else:
                ns = obj["metadata"]["namespace"]
                self.custom.create_namespaced_custom_object(group, version, ns, plural, obj)

    def programmed(self, ns: str) -> dict[str, Any] | None:
        gw = self.custom.get_namespaced_custom_object(GROUP, VERSION, ns, "gateways", "gw")
        for condition in (gw.get("status") or {}).get("conditions") or []:
            if condition["type"] == "Programmed":
                return dict(condition)
        return None

    def http_port(self, ns: str) -> int:
        return self.stack.bind_ports(ns, "gw")["http"]

    def serve_web(self, ns: str) -> int:
        """A Gateway with an HTTP listener and route `web` (web.example → Service "one", with
        "two" beside it to switch to); returns the HTTP port once traffic reaches "one"."""
        self.create(
            gateway_class(),
            service(ns, "one"),
            service(ns, "two"),
            gateway(ns, [HTTP]),
            route(ns, "web", "web.example", "one"),
        )
        port = self.http_port(ns)
        eventually(lambda: pod(port, "web.example") == "one-0", f"traffic in {ns}")
        return port


def _stack(tmp_path: Path, echoes: list[tuple[str, str]], **settings: Any) -> Stack:
    ports = StackPorts.free()
    return Stack(
        Launcher.pex_files(Path(".")), tmp_path, echo_services=echoes, ports=ports, **settings
    )


@pytest.fixture
def cluster(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Cluster]:
    marker = request.node.get_closest_marker("stack")
    settings: dict[str, Any] = dict(marker.kwargs) if marker else {}
    with_proxy = settings.pop("with_proxy", True)
    ns = settings.pop("ns")
    stack = _stack(tmp_path, [(ns, "one"), (ns, "two")], extra_objects=[namespace(ns)], **settings)
    try:
        stack.start(with_proxy=with_proxy)
        running = Cluster(stack)
        yield running
        running.client.close()
    finally:
        statuses = stack.stop()
    assert all(code == 0 for code in statuses.values()), statuses


# ------------------------------------------------------------------------------ scenarios


@pytest.mark.stack(ns="e2e-programmed", with_proxy=False)
def test_programmed_only_after_the_proxy_acked_and_bound_then_traffic_flows(
    cluster: Cluster,
) -> None:
    ns = "e2e-programmed"
    cluster.create(
        gateway_class(),
        service(ns, "one"),
        gateway(ns, [HTTP]),
        route(ns, "web", "web.example", "one"),
    )
    pending = eventually(
        lambda: (c := cluster.programmed(ns)) and c["reason"] == "Pending" and c, "Pending"
    )
    assert "to connect" in pending["message"]
    cluster.stack.start_proxy()
    eventually(
        lambda: (c := cluster.programmed(ns)) and c["status"] == "True",
        "Programmed after ack + bind",
    )
    assert pod(cluster.http_port(ns), "web.example") == "one-0"


@pytest.mark.stack(ns="e2e-edits")
def test_route_edits_are_followed_and_a_deleted_route_answers_404(cluster: Cluster) -> None:
    ns = "e2e-edits"
    port = cluster.serve_web(ns)
    patch = {"spec": {"rules": [{"backendRefs": [{"name": "two", "port": 80}]}]}}
    cluster.custom.patch_namespaced_custom_object(GROUP, VERSION, ns, "httproutes", "web", patch)
    eventually(lambda: pod(port, "web.example") == "two-0", "traffic to follow the edit")
    cluster.custom.delete_namespaced_custom_object(GROUP, VERSION, ns, "httproutes", "web")
    eventually(lambda: get(port, "web.example")[0] == 404, "404 once the route is gone")


@pytest.mark.stack(ns="e2e-sni")
def test_https_by_sni_with_two_certificates(cluster: Cluster) -> None:
    ns = "e2e-sni"
    ca = CertificateAuthority.create("e2e CA")
    listeners = [
        {
            "name": name,
            "port": 443,
            "protocol": "HTTPS",
            "hostname": f"{name}.example",
            "tls": {"certificateRefs": [{"name": f"{name}-cert"}]},
        }
        for name in ("alpha", "beta")
    ]
    cluster.create(
        gateway_class(),
        service(ns, "one"),
        service(ns, "two"),
        tls_secret(ns, "alpha-cert", ca, ["alpha.example"]),
        tls_secret(ns, "beta-cert", ca, ["beta.example"]),
        gateway(ns, listeners),
        route(ns, "a", "alpha.example", "one"),
        route(ns, "b", "beta.example", "two"),
    )
    port = eventually(lambda: cluster.stack.bind_ports(ns, "gw").get("alpha"), "bind ports")
    context = ssl.create_default_context(cadata=ca.certificate_pem.decode())
    for host, backend in (("alpha.example", "one-0"), ("beta.example", "two-0")):

        def answered(host: str = host) -> tuple[list[str], dict[str, Any]] | None:
            return _https(port, host, context)

        names, body = eventually(answered, f"HTTPS for {host}")
        assert names == [host]  # the certificate SNI selected
        assert body["pod"] == backend


def _https(
    port: int, host: str, context: ssl.SSLContext
) -> tuple[list[str], dict[str, Any]] | None:
    with (
        socket.create_connection(("127.0.0.1", port), timeout=10) as raw,
        context.wrap_socket(raw, server_hostname=host) as tls,
    ):
        cert: Any = tls.getpeercert() or {}
        names = [str(value) for kind, value in cert.get("subjectAltName", ()) if kind == "DNS"]
        tls.sendall(f"GET / HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n".encode())
        data = b""
        while chunk := tls.recv(65536):
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    if b" 200 " not in head.split(b"\r\n")[0]:
        return None
    return names, json.loads(body)


@pytest.mark.stack(ns="e2e-restart")
def test_a_killed_controller_leaves_traffic_served_and_the_proxy_reconnects(
    cluster: Cluster,
) -> None:
    ns = "e2e-restart"
    port = cluster.serve_web(ns)
    discovery = cluster.stack.discovery_ports[0]
    cluster.stack.processes.pop("controller").kill()
    for _ in range(20):
        assert pod(port, "web.example") == "one-0"  # the last snapshot keeps serving
    admin = _admin_port(cluster.stack.processes["proxy"])
    readyz = eventually(lambda: "degraded" in (r := _admin(admin, "/readyz"))[1] and r, "degraded")
    assert readyz[0] == 200  # still ready: it serves what it holds
    health = json.loads(_admin(admin, "/api/v1/health")[1])
    assert health["ready"] is True and any("degraded" in w for w in health["warnings"])
    cluster.stack.start_controller("controller-2", port=discovery)
    patch = {"spec": {"rules": [{"backendRefs": [{"name": "two", "port": 80}]}]}}
    cluster.custom.patch_namespaced_custom_object(GROUP, VERSION, ns, "httproutes", "web", patch)
    eventually(lambda: pod(port, "web.example") == "two-0", "the proxy to reconnect and follow")


def _admin_port(process: Any) -> int:
    return next(int(e["port"]) for e in process.lines if e.get("msg") == "admin server listening")


def _admin(port: int, path: str) -> tuple[int, str]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request("GET", path)
        response = conn.getresponse()
        return response.status, response.read().decode()
    finally:
        conn.close()


@pytest.mark.stack(ns="e2e-failover", with_proxy=False)
def test_leader_failover_keeps_status_flowing_and_no_request_fails(
    cluster: Cluster, tmp_path: Path
) -> None:
    ns = "e2e-failover"
    stack = cluster.stack
    stack.processes.pop("controller").stop()
    stack.discovery_ports.clear()
    stack.start_controller("c1", leader_election=True)
    stack.start_controller("c2", leader_election=True)
    stack.start_proxy()
    port = cluster.serve_web(ns)
    with Traffic(port, "web.example") as traffic:
        coordination: Any = kubernetes.client.CoordinationV1Api(cluster.client)
        leader = coordination.read_namespaced_lease(
            "coxswain-controller", "coxswain-system"
        ).spec.holder_identity
        stack.processes.pop(leader).kill()
        patch = {"spec": {"rules": [{"backendRefs": [{"name": "two", "port": 80}]}]}}
        cluster.custom.patch_namespaced_custom_object(
            GROUP, VERSION, ns, "httproutes", "web", patch
        )

        def accepted_generation() -> bool:
            obj = cluster.custom.get_namespaced_custom_object(
                GROUP, VERSION, ns, "httproutes", "web"
            )
            conditions = obj["status"]["parents"][0]["conditions"]
            return any(c["type"] == "Accepted" and c["observedGeneration"] == 2 for c in conditions)

        eventually(accepted_generation, "the new leader to write status")
        eventually(
            lambda: pod(port, "web.example") == "two-0", "traffic to follow via the new leader"
        )
    assert traffic.failures == []


@pytest.mark.stack(ns="e2e-identity")
def test_a_proxy_with_the_wrong_identity_for_a_dedicated_scope_is_denied(cluster: Cluster) -> None:
    dedicated = cluster.stack.start_proxy(
        "intruder",
        scope=("--dedicated", "--gateway-name", "gw", "--gateway-namespace", "e2e-identity"),
    )
    line = dedicated.wait_for(lambda entry: "PERMISSION_DENIED" in json.dumps(entry), timeout=WAIT)
    assert "may not subscribe" in json.dumps(line) or "not a dedicated Gateway" in json.dumps(line)
    assert _admin(_admin_port(dedicated), "/readyz")[0] == 503


@pytest.mark.stack(ns="e2e-ingress", gateway_api="none")
def test_ingress_only_mode_when_the_gateway_api_is_absent(cluster: Cluster) -> None:
    ns = "e2e-ingress"
    ingress_class = {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "IngressClass",
        "metadata": {"name": "coxswain"},
        "spec": {"controller": "coxswain-labs.dev/ingress-controller"},
    }
    ingress = {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "Ingress",
        "metadata": {"name": "shop", "namespace": ns},
        "spec": {
            "ingressClassName": "coxswain",
            "rules": [
                {
                    "host": "shop.example",
                    "http": {
                        "paths": [
                            {
                                "path": "/",
                                "pathType": "Prefix",
                                "backend": {"service": {"name": "one", "port": {"number": 80}}},
                            }
                        ]
                    },
                }
            ],
        },
    }
    cluster.create(service(ns, "one"), ingress_class, ingress)
    port = cluster.stack.ports.ingress_http
    eventually(lambda: pod(port, "shop.example") == "one-0", "Ingress traffic")


@pytest.mark.stack(ns="e2e-churn")
def test_one_hundred_route_edits_under_continuous_traffic_fail_no_request(cluster: Cluster) -> None:
    _churn(cluster, "e2e-churn")


@pytest.mark.stack(ns="e2e-churn-workers", proxy_args=("--workers", "2"))
def test_route_edits_under_traffic_fail_no_request_with_forked_workers(cluster: Cluster) -> None:
    # The proxy's default is a worker per CPU: each edit reaches both workers as a delta, and
    # the Ack (hence Programmed) waits for both.
    _churn(cluster, "e2e-churn-workers")


def _churn(cluster: Cluster, ns: str) -> None:
    port = cluster.serve_web(ns)
    with Traffic(port, "web.example", threads=2) as traffic:
        for edit in range(100):
            backend = ("two", "one")[edit % 2]
            patch = {"spec": {"rules": [{"backendRefs": [{"name": backend, "port": 80}]}]}}
            cluster.custom.patch_namespaced_custom_object(
                GROUP, VERSION, ns, "httproutes", "web", patch
            )
            expected = f"{backend}-0"

            def followed(expected: str = expected) -> bool:
                return pod(port, "web.example") == expected

            eventually(followed, f"edit {edit}")
    assert traffic.failures == []
