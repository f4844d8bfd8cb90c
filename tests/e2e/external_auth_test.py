"""End to end: the Gateway API's ExternalAuth filter (GEP-1494, protocol HTTP) through the stack.

One stack (the API emulator, identity, controller and shared proxy, each from its shipped PEX
file as its own OS process, and an echo backend) serves one Gateway, and a real auth server in
this process backs the Service the filters name (its EndpointSlice is written by the test, on
127.0.0.1). The routes are shaped like the upstream HTTPRouteExternalAuth* cases' manifests:
- an allowed request reaches the echo with the auth server's `X-User-Id` set on it (the
  client's own forged one replaced), after the auth server was asked the client's method and
  path behind `http.path`, with the allowed `X-Test-Header` and without the client's Cookie;
- a denied one gets the auth server's 403, its `X-Auth-Error` field and its body;
- a route whose auth Service does not exist is Accepted with ResolvedRefs False
  (BackendNotFound) and answers 500, and one asking protocol GRPC is Accepted False
  (UnsupportedValue);
- the GatewayClass lists HTTPRouteExternalAuth and HTTPRouteExternalAuthHTTP among its
  supportedFeatures.
Every case of the filter's translation is the golden `filters-external-auth`; the request path's
are the proxy's `policies/extauthz_test.py`.
"""

from __future__ import annotations

import http.client
import http.server
import json
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import kubernetes
import pytest

from coxswain_devkit.stack import Launcher, Stack, StackPorts
from coxswain_devkit.waiting import until

WAIT = 60.0
GROUP, VERSION = "gateway.networking.k8s.io", "v1"
NS = "e2e-extauth"
HOST = "auth.example"
DENIAL = b"Access denied by external auth server"


def eventually(predicate: Callable[[], Any], what: str, timeout: float = WAIT) -> Any:
    return until(predicate, what, within=timeout, tolerate=(OSError, http.client.HTTPException))


@dataclass
class Answer:
    status: int
    headers: list[tuple[str, str]]
    body: bytes

    def header(self, name: str) -> str | None:
        return next((v for n, v in self.headers if n.lower() == name.lower()), None)

    def echoed(self) -> dict[str, Any]:
        seen: dict[str, Any] = json.loads(self.body)
        return seen


def send(port: int, path: str, headers: dict[str, str] | None = None) -> Answer:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request("GET", path, headers={"Host": HOST, **(headers or {})})
        response = conn.getresponse()
        return Answer(response.status, response.getheaders(), response.read())
    finally:
        conn.close()


def header_values(echoed: dict[str, Any], name: str) -> list[str]:
    return [v for n, vs in echoed["headers"].items() if n.lower() == name.lower() for v in vs]


# ------------------------------------------------------------------ the auth server


@dataclass
class AuthServer:
    """Allows what it is asked under /check/http/allowed (200 with X-User-Id: 42), denies the
    rest (403, X-Auth-Error and a body); keeps each request's path and fields."""

    asked: list[tuple[str, str, dict[str, str]]] = field(default_factory=list)
    server: http.server.ThreadingHTTPServer | None = None

    def start(self) -> int:
        owner = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                fields = {k.lower(): v for k, v in self.headers.items()}
                owner.asked.append((self.command, self.path, fields))
                if self.path.startswith("/check/http/allowed"):
                    self.send_response(200)
                    self.send_header("X-User-Id", "42")
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                self.send_response(403)
                self.send_header("X-Auth-Error", "access-denied")
                self.send_header("Content-Length", str(len(DENIAL)))
                self.end_headers()
                self.wfile.write(DENIAL)

            def log_message(self, format: str, *args: Any) -> None:
                pass  # quiet: the tests assert on `asked`

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return int(self.server.server_address[1])

    def stop(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()


# ------------------------------------------------------------------ objects


def gateway_api(kind: str, name: str, spec: dict[str, Any]) -> dict[str, Any]:
    metadata = {"name": name} if kind == "GatewayClass" else {"name": name, "namespace": NS}
    return {"apiVersion": f"{GROUP}/{VERSION}", "kind": kind, "metadata": metadata, "spec": spec}


def external_auth(service: str, protocol: str = "HTTP", **config: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"protocol": protocol, "backendRef": {"name": service, "port": 9002}}
    body.update(config)
    return {"type": "ExternalAuth", "externalAuth": body}


def route(name: str, path: str, auth: dict[str, Any]) -> dict[str, Any]:
    rule = {
        "matches": [{"path": {"type": "PathPrefix", "value": path}}],
        "filters": [auth],
        "backendRefs": [{"name": "infra-backend-v1", "port": 8080}],
    }
    return gateway_api("HTTPRoute", name, {"parentRefs": [{"name": "gw"}], "rules": [rule]})


HTTP_CONFIG = {
    "path": "/check",
    "allowedHeaders": ["X-Test-Header"],
    "allowedResponseHeaders": ["X-User-Id"],
}
ROUTES = {
    "external-auth-http": route(
        "external-auth-http", "/http", external_auth("external-auth-http", http=HTTP_CONFIG)
    ),
    "external-auth-unknown-backendref": route(
        "external-auth-unknown-backendref", "/unknown", external_auth("missing", http={})
    ),
    "external-auth-grpc": route(
        "external-auth-grpc", "/grpc", external_auth("external-auth-http", "GRPC", grpc={})
    ),
}


def auth_service(port: int) -> list[dict[str, Any]]:
    """The Service the filters name, and the EndpointSlice naming this process's auth server."""
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "external-auth-http", "namespace": NS},
        "spec": {"ports": [{"name": "http", "port": 9002}]},
    }
    endpoints = {
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {
            "name": "external-auth-http-local",
            "namespace": NS,
            "labels": {"kubernetes.io/service-name": "external-auth-http"},
        },
        "addressType": "IPv4",
        "ports": [{"name": "http", "port": port, "protocol": "TCP"}],
        "endpoints": [{"addresses": ["127.0.0.1"], "conditions": {"ready": True}}],
    }
    return [service, endpoints]


@dataclass
class Served:
    custom: Any
    auth: AuthServer
    port: int

    def conditions(self, name: str) -> dict[str, tuple[str, str]]:
        found = self.custom.get_namespaced_custom_object(GROUP, VERSION, NS, "httproutes", name)
        parents = (found.get("status") or {}).get("parents") or []
        return {
            c["type"]: (c["status"], c["reason"])
            for p in parents
            for c in p.get("conditions") or []
        }


def _create(client: Any, custom: Any, objects: list[dict[str, Any]]) -> None:
    for o in objects:
        plural = {"GatewayClass": "gatewayclasses", "Gateway": "gateways"}.get(o["kind"])
        if o["kind"] == "HTTPRoute":
            custom.create_namespaced_custom_object(GROUP, VERSION, NS, "httproutes", o)
        elif o["kind"] == "GatewayClass":
            custom.create_cluster_custom_object(GROUP, VERSION, str(plural), o)
        elif plural is not None:
            custom.create_namespaced_custom_object(GROUP, VERSION, NS, plural, o)
        else:
            kubernetes.utils.create_from_dict(client, o)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    workdir = tmp_path_factory.mktemp("extauth")
    auth = AuthServer()
    auth_port = auth.start()
    namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}}
    try:
        stack = Stack(
            Launcher.pex_files(Path(".")),
            workdir,
            echo_services=[(NS, "infra-backend-v1")],
            ports=StackPorts.free(),
            gateway_api="experimental",
            extra_objects=[namespace, *auth_service(auth_port)],
        )
        try:
            stack.start()
            with stack.client() as client:
                custom = kubernetes.client.CustomObjectsApi(client)
                backend = {"ports": [{"name": "http", "port": 8080}]}
                gateway = {
                    "gatewayClassName": "coxswain",
                    "listeners": [{"name": "http", "port": 80, "protocol": "HTTP"}],
                }
                controller = {"controllerName": "coxswain-labs.dev/gateway-controller"}
                _create(client, custom, [
                    gateway_api("GatewayClass", "coxswain", controller),
                    {"apiVersion": "v1", "kind": "Service",
                     "metadata": {"name": "infra-backend-v1", "namespace": NS}, "spec": backend},
                    gateway_api("Gateway", "gw", gateway),
                    *ROUTES.values(),
                ])  # fmt: skip
                running = Served(custom, auth, stack.bind_ports(NS, "gw")["http"])
                eventually(
                    lambda: (
                        running.conditions("external-auth-http").get("Accepted")
                        == ("True", "Accepted")
                    ),
                    "external-auth-http Accepted",
                )
                eventually(lambda: send(running.port, "/http/allowed").status == 200, "traffic")
                yield running
        finally:
            statuses = stack.stop()
    finally:
        auth.stop()
    assert all(code == 0 for code in statuses.values()), statuses


# ------------------------------------------------------------------ the tests


def test_an_allowed_request_reaches_the_backend_with_the_auth_servers_fields(
    served: Served,
) -> None:
    served.auth.asked.clear()
    fields = {"X-Test-Header": "hello", "Cookie": "session=1", "X-User-Id": "forged"}
    answer = send(served.port, "/http/allowed?q=1", fields)
    assert answer.status == 200
    echoed = answer.echoed()
    assert echoed["pod"] == "infra-backend-v1-0"
    assert header_values(echoed, "X-User-Id") == ["42"]
    assert header_values(echoed, "Cookie") == ["session=1"]  # the request itself is untouched
    [(method, path, asked)] = served.auth.asked
    assert (method, path) == ("GET", "/check/http/allowed?q=1")
    assert asked["host"] == HOST and asked["x-test-header"] == "hello"
    assert "cookie" not in asked and asked["content-length"] == "0"


def test_a_denied_request_gets_the_auth_servers_answer(served: Served) -> None:
    answer = send(served.port, "/http/denied")
    assert answer.status == 403
    assert answer.header("X-Auth-Error") == "access-denied"
    assert answer.body == DENIAL


def test_an_auth_service_that_does_not_exist_fails_closed(served: Served) -> None:
    conditions = eventually(
        lambda: (
            (c := served.conditions("external-auth-unknown-backendref")).get("ResolvedRefs") and c
        ),
        "external-auth-unknown-backendref's status",
    )
    assert conditions["Accepted"] == ("True", "Accepted")
    assert conditions["ResolvedRefs"] == ("False", "BackendNotFound")
    answer = eventually(lambda: (a := send(served.port, "/unknown")).status != 404 and a, "served")
    assert answer.status == 500


def test_protocol_grpc_is_refused_and_the_features_are_claimed(served: Served) -> None:
    conditions = eventually(
        lambda: served.conditions("external-auth-grpc").get("Accepted"), "its status"
    )
    assert conditions == ("False", "UnsupportedValue")
    assert send(served.port, "/grpc").status == 404  # not served

    def features() -> set[str]:
        cls = served.custom.get_cluster_custom_object(GROUP, VERSION, "gatewayclasses", "coxswain")
        return {f["name"] for f in (cls.get("status") or {}).get("supportedFeatures") or []}

    assert {"HTTPRouteExternalAuth", "HTTPRouteExternalAuthHTTP"} <= eventually(features, "them")
