"""End to end: ingress-nginx Ingresses through the whole stack, every service its own process.

The devkit API emulator, echo backends, identity, the controller and a shared proxy run from
their PEX files, wired as in production; Ingresses with ingress-nginx annotations are applied
through the real `kubernetes` client and real requests are sent to the proxy's Ingress ports.
Covers: rewrite-target with captures on a host whose older "/" must not take the api path; the
HTTPS redirect ssl-redirect gives a host with a certificate (308 with the HTTPS port), and the
same host served over HTTPS; a canary's weighted split of its main Ingress; a refused
configuration-snippet (an InvalidAnnotation Warning Event on the Ingress, its host answering
404 while the rest is served). The annotations' every case is in the translation tests.
"""

from __future__ import annotations

import http.client
import json
import socket
import ssl
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import kubernetes
import pytest

from coxswain_devkit.pki import CertificateAuthority
from coxswain_devkit.stack import Launcher, Stack, StackPorts, tls_secret
from coxswain_devkit.waiting import until

WAIT = 60.0
NS = "e2e-nginx"
P = "nginx.ingress.kubernetes.io/"


def eventually(predicate: Callable[[], Any], what: str, timeout: float = WAIT) -> Any:
    return until(predicate, what, within=timeout, tolerate=(OSError, http.client.HTTPException))


def request(port: int, host: str, path: str = "/") -> tuple[int, dict[str, str], dict[str, Any]]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request("GET", path, headers={"Host": host})
        response = conn.getresponse()
        body = response.read()
        headers = {k.lower(): v for k, v in response.getheaders()}
        try:
            data = json.loads(body) if body else {}
        except ValueError:
            data = {}
        return response.status, headers, data
    finally:
        conn.close()


def served_by(port: int, host: str, path: str = "/") -> tuple[str, str] | None:
    """(pod, path the backend saw), or None when not answered 200."""
    status, _, body = request(port, host, path)
    return (str(body.get("pod")), str(body.get("path"))) if status == 200 else None


def service(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "namespace": NS},
        "spec": {"ports": [{"name": "http", "port": 80}]},
    }


def ingress(
    name: str,
    host: str,
    path: str,
    backend: str,
    annotations: dict[str, str] | None = None,
    *,
    kind: str = "Prefix",
    tls: str = "",
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "ingressClassName": "coxswain",
        "rules": [
            {
                "host": host,
                "http": {
                    "paths": [
                        {
                            "path": path,
                            "pathType": kind,
                            "backend": {"service": {"name": backend, "port": {"number": 80}}},
                        }
                    ]
                },
            }
        ],
    }
    if tls:
        spec["tls"] = [{"hosts": [host], "secretName": tls}]
    metadata = {
        "name": name,
        "namespace": NS,
        "annotations": {P + k: v for k, v in (annotations or {}).items()},
    }
    return {"apiVersion": "networking.k8s.io/v1", "kind": "Ingress", "metadata": metadata,
            "spec": spec}  # fmt: skip


INGRESS_CLASS = {
    "apiVersion": "networking.k8s.io/v1",
    "kind": "IngressClass",
    "metadata": {"name": "coxswain"},
    "spec": {"controller": "coxswain-labs.dev/ingress-controller"},
}


class Cluster:
    def __init__(self, stack: Stack, ca: CertificateAuthority) -> None:
        self.stack = stack
        self.ca = ca
        self.client = stack.client()
        self.core = kubernetes.client.CoreV1Api(self.client)

    def create(self, *objects: dict[str, Any]) -> None:
        for obj in objects:
            kubernetes.utils.create_from_dict(self.client, obj)

    def events(self, name: str) -> list[tuple[str, str, str]]:
        found = self.core.list_namespaced_event(NS).items
        return [
            (str(e.type), str(e.reason), str(e.message))
            for e in found
            if e.involved_object.name == name
        ]

    @property
    def http(self) -> int:
        return self.stack.ports.ingress_http

    @property
    def https(self) -> int:
        return self.stack.ports.ingress_https


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    tmp_path = tmp_path_factory.mktemp("nginx")
    stack = Stack(
        Launcher.pex_files(Path(".")),
        tmp_path,
        echo_services=[(NS, "one"), (NS, "two")],
        ports=StackPorts.free(),
        gateway_api="none",
        # One worker: the weighted pick is then one smooth round robin the test can count.
        proxy_args=("--workers", "1"),
        extra_objects=[{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}}],
    )
    try:
        stack.start()
        running = Cluster(stack, CertificateAuthority.create())
        running.create(INGRESS_CLASS, service("one"), service("two"))
        yield running
        running.client.close()
    finally:
        statuses = stack.stop()
    assert all(code == 0 for code in statuses.values()), statuses


def test_rewrite_target_captures_on_a_regex_host(cluster: Cluster) -> None:
    # The older "/" on the same host does not take the api path: ingress-nginx makes every path
    # of the host a regex and tries the longer one first.
    cluster.create(
        ingress("front", "shop.example", "/", "one"),
        ingress(
            "api",
            "shop.example",
            "/api(/|$)(.*)",
            "two",
            {"rewrite-target": "/$2", "use-regex": "true"},
            kind="ImplementationSpecific",
        ),
    )
    seen = eventually(lambda: served_by(cluster.http, "shop.example", "/api/orders/7?x=1"),
                      "the api path")  # fmt: skip
    assert seen == ("two-0", "/orders/7?x=1")
    assert served_by(cluster.http, "shop.example", "/API") == ("two-0", "/")
    assert served_by(cluster.http, "shop.example", "/cart") == ("one-0", "/cart")


def test_ssl_redirect_for_a_host_with_a_certificate(cluster: Cluster) -> None:
    cluster.create(
        tls_secret(NS, "secure-cert", cluster.ca, ["secure.example"]),
        ingress("secure", "secure.example", "/", "one", tls="secure-cert"),
    )

    def redirected() -> tuple[int, str] | None:
        status, headers, _ = request(cluster.http, "secure.example", "/cart?id=3")
        return (status, headers.get("location", "")) if status == 308 else None

    _, location = eventually(redirected, "the HTTPS redirect")
    assert location == f"https://secure.example:{cluster.https}/cart?id=3"
    context = ssl.create_default_context(cadata=cluster.ca.certificate_pem.decode())
    body = eventually(lambda: _https(cluster.https, "secure.example", context), "HTTPS")
    assert body["pod"] == "one-0" and body["path"] == "/cart?id=3"


def test_a_canary_weight_splits_the_main_ingress(cluster: Cluster) -> None:
    cluster.create(
        ingress("stable", "canary.example", "/", "one"),
        ingress("preview", "canary.example", "/", "two", {"canary": "true", "canary-weight": "50"}),
    )
    eventually(lambda: (served_by(cluster.http, "canary.example") or ("",))[0] == "two-0",
               "the canary's share")  # fmt: skip
    picks = Counter((served_by(cluster.http, "canary.example") or ("none",))[0] for _ in range(40))
    assert picks == {"one-0": 20, "two-0": 20}


def test_a_configuration_snippet_is_refused_and_said_so(cluster: Cluster) -> None:
    cluster.create(
        ingress(
            "snippet",
            "snippet.example",
            "/",
            "one",
            {"configuration-snippet": 'more_set_headers "X-From: snippet";'},
        ),
        ingress("after", "after.example", "/", "two"),
    )
    eventually(lambda: served_by(cluster.http, "after.example"), "a later Ingress served")

    def warned() -> list[tuple[str, str, str]]:
        return [e for e in cluster.events("snippet") if e[1] == "InvalidAnnotation"]

    [(kind, _, message)] = eventually(warned, "the InvalidAnnotation Event")
    assert kind == "Warning"
    assert P + "configuration-snippet" in message and "never run" in message
    assert "not served" in message
    assert request(cluster.http, "snippet.example")[0] == 404


def _https(port: int, host: str, context: ssl.SSLContext) -> dict[str, Any] | None:
    with (
        socket.create_connection(("127.0.0.1", port), timeout=10) as raw,
        context.wrap_socket(raw, server_hostname=host) as tls,
    ):
        tls.sendall(
            f"GET /cart?id=3 HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n".encode()
        )
        data = b""
        while chunk := tls.recv(65536):
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    if b" 200 " not in head.split(b"\r\n")[0]:
        return None
    parsed: dict[str, Any] = json.loads(body)
    return parsed
