"""End to end: HTTP listener isolation and ListenerSets through the shipped PEX files.

One stack (the API emulator serving the standard channel of Gateway API v1.6, where ListenerSet
is v1, the load balancer, identity, controller and shared proxy, each its own OS process, and
three echo backends) serves two Gateways:
- `isolation`, the upstream GatewayHTTPListenerIsolation case: four HTTP listeners on port 80
  (no hostname, `*.example.com`, `*.foo.example.com`, `abc.foo.example.com`), a route on each
  for its own path. Every request of the upstream test reaches only the routes of the most
  specific listener matching its host: its own path answers 200, the other listeners' 404.
- `gw`, whose allowedListeners admits ListenerSets of its namespace: its own HTTP and HTTPS
  listeners for gateway.example; ListenerSet `apps` beside it adds api.example (HTTP), a
  listener repeating gateway.example (conflicted: the Gateway's own keeps it) and
  secure.example (HTTPS, its certificate from the set's Secret); ListenerSet `team` in another
  namespace is NotAllowed. Covers: every status as the API defines it (the sets' conditions and
  entries, the Gateway's attachedListenerSets and own listeners, the routes' ListenerSet
  parents); routes naming the Gateway answer only its hosts, routes naming the set only the
  set's, over TLS with the set's certificate, which the client verifies; a ListenerSet created
  once the stack runs is bound and served, and when deleted its hosts answer 404 again.
Certificates are minted in the test.
"""

from __future__ import annotations

import http.client
import json
import socket
import ssl
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
NS, TEAM = "e2e-listeners", "e2e-listeners-team"
PLURALS = {
    "GatewayClass": "gatewayclasses",
    "Gateway": "gateways",
    "ListenerSet": "listenersets",
    "HTTPRoute": "httproutes",
}
CA = CertificateAuthority.create("e2e listeners CA")


def eventually(predicate: Callable[[], Any], what: str, timeout: float = WAIT) -> Any:
    return until(
        predicate, what, within=timeout, tolerate=(OSError, http.client.HTTPException, ssl.SSLError)
    )


def get(port: int, host: str, path: str = "/") -> tuple[int, str | None]:
    """The status and, for a 200, the echo pod that answered."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request("GET", path, headers={"Host": host})
        response = conn.getresponse()
        body = response.read()
    finally:
        conn.close()
    if response.status != 200:
        return response.status, None
    return 200, str(json.loads(body)["pod"])


def https(port: int, host: str, path: str = "/") -> tuple[list[str], str] | None:
    """The certificate's DNS names and the echo pod, over TLS with `host` as the SNI."""
    context = ssl.create_default_context(cadata=CA.certificate_pem.decode())
    with (
        socket.create_connection(("127.0.0.1", port), timeout=10) as raw,
        context.wrap_socket(raw, server_hostname=host) as tls,
    ):
        cert: Any = tls.getpeercert() or {}
        names = [str(value) for kind, value in cert.get("subjectAltName", ()) if kind == "DNS"]
        tls.sendall(f"GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n".encode())
        data = b""
        while chunk := tls.recv(65536):
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    if b" 200 " not in head.split(b"\r\n")[0]:
        return None
    return names, str(json.loads(body)["pod"])


# ------------------------------------------------------------------------------ objects


def obj(kind: str, name: str, spec: dict[str, Any], ns: str = NS) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name}
    if kind != "GatewayClass":
        metadata["namespace"] = ns
    version = f"{GROUP}/{VERSION}" if kind in PLURALS else "v1"
    return {"apiVersion": version, "kind": kind, "metadata": metadata, "spec": spec}


def http_listener(name: str, hostname: str | None = None, port: int = 80) -> dict[str, Any]:
    listener: dict[str, Any] = {"name": name, "port": port, "protocol": "HTTP"}
    if hostname:
        listener["hostname"] = hostname
    return {**listener, "allowedRoutes": {"namespaces": {"from": "All"}}}


def https_listener(name: str, hostname: str, secret: str) -> dict[str, Any]:
    return {
        "name": name,
        "port": 443,
        "protocol": "HTTPS",
        "hostname": hostname,
        "tls": {"certificateRefs": [{"name": secret}]},
    }


def route(name: str, parent: dict[str, Any], backend: str, path: str = "/") -> dict[str, Any]:
    rule = {
        "matches": [{"path": {"type": "PathPrefix", "value": path}}],
        "backendRefs": [{"name": backend, "port": 80}],
    }
    return obj("HTTPRoute", name, {"parentRefs": [parent], "rules": [rule]})


def listener_set(name: str, listeners: list[dict[str, Any]], ns: str = NS) -> dict[str, Any]:
    spec = {"parentRef": {"name": "gw", "namespace": NS}, "listeners": listeners}
    return obj("ListenerSet", name, spec, ns)


def to_set(name: str, section: str | None = None) -> dict[str, Any]:
    ref = {"group": GROUP, "kind": "ListenerSet", "name": name}
    return {**ref, "sectionName": section} if section else ref


# The upstream GatewayHTTPListenerIsolation case: listener name -> hostname.
ISOLATION = {
    "empty-hostname": None,
    "wildcard-example-com": "*.example.com",
    "wildcard-foo-example-com": "*.foo.example.com",
    "abc-foo-example-com": "abc.foo.example.com",
}
# Each request host and the listener claiming it.
CLAIMS = {
    "bar.com": "empty-hostname",
    "bar.example.com": "wildcard-example-com",
    "bar.foo.example.com": "wildcard-foo-example-com",
    "abc.foo.example.com": "abc-foo-example-com",
}

OBJECTS: list[dict[str, Any]] = [
    obj("GatewayClass", "coxswain", {"controllerName": "coxswain-labs.dev/gateway-controller"}),
    *(obj("Service", n, {"ports": [{"name": "http", "port": 80}]}) for n in ("v1", "v2", "v3")),
    obj(
        "Gateway",
        "isolation",
        {
            "gatewayClassName": "coxswain",
            "listeners": [http_listener(n, h) for n, h in ISOLATION.items()],
        },
    ),
    *(
        route(f"attaches-to-{n}", {"name": "isolation", "sectionName": n}, "v1", f"/{n}")
        for n in ISOLATION
    ),
    tls_secret(NS, "gateway-cert", CA, ["gateway.example"]),
    tls_secret(NS, "secure-cert", CA, ["secure.example"]),
    obj(
        "Gateway",
        "gw",
        {
            "gatewayClassName": "coxswain",
            "allowedListeners": {"namespaces": {"from": "Same"}},
            "listeners": [
                http_listener("http", "gateway.example"),
                https_listener("https", "gateway.example", "gateway-cert"),
            ],
        },
    ),
    listener_set(
        "apps",
        [
            http_listener("api", "api.example"),
            http_listener("www", "gateway.example"),  # the Gateway's own comes first
            https_listener("secure", "secure.example", "secure-cert"),
        ],
    ),
    listener_set("team", [http_listener("team", "team.example")], TEAM),
    route("gateway-route", {"name": "gw"}, "v1"),
    route("apps-route", to_set("apps"), "v2"),
    route("secure-route", to_set("apps", "secure"), "v3", "/secure"),
]


class Cluster:
    def __init__(self, stack: Stack) -> None:
        self.stack = stack
        self.client = stack.client()
        self.custom: Any = kubernetes.client.CustomObjectsApi(self.client)

    def create(self, *objects: dict[str, Any]) -> None:
        create: Any = kubernetes.utils.create_from_dict  # core kinds; it knows no CRDs
        for item in objects:
            group, _, version = item["apiVersion"].rpartition("/")
            if group != GROUP:
                create(self.client, item)
            elif item["kind"] == "GatewayClass":
                self.custom.create_cluster_custom_object(group, version, "gatewayclasses", item)
            else:
                ns, plural = item["metadata"]["namespace"], PLURALS[item["kind"]]
                self.custom.create_namespaced_custom_object(group, version, ns, plural, item)

    def delete(self, kind: str, name: str, ns: str = NS) -> None:
        self.custom.delete_namespaced_custom_object(GROUP, VERSION, ns, PLURALS[kind], name)

    def status(self, kind: str, name: str, ns: str = NS) -> dict[str, Any]:
        found = self.custom.get_namespaced_custom_object(GROUP, VERSION, ns, PLURALS[kind], name)
        return dict(found.get("status") or {})


def conditions(entries: list[dict[str, Any]] | None) -> dict[str, tuple[str, str]]:
    return {c["type"]: (c["status"], c["reason"]) for c in entries or []}


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Cluster, dict[str, int]]]:
    """The stack with every object applied; the bind ports of `isolation` and `gw` by name."""
    namespaces = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": n}} for n in (NS, TEAM)
    ]
    stack = Stack(
        Launcher.pex_files(Path(".")),
        tmp_path_factory.mktemp("listeners"),
        echo_services=[(NS, "v1"), (NS, "v2"), (NS, "v3")],
        ports=StackPorts.free(),
        extra_objects=namespaces,
    )
    try:
        stack.start()
        cluster = Cluster(stack)
        cluster.create(*OBJECTS)
        ports = {
            "isolation": stack.bind_ports(NS, "isolation")["empty-hostname"],
            **stack.bind_ports(NS, "gw"),
        }
        eventually(lambda: get(ports["http"], "api.example") == (200, "v2-0"), "traffic")
        eventually(lambda: get(ports["isolation"], "bar.com", "/empty-hostname")[0] == 200, "iso")
        yield cluster, ports
        cluster.client.close()
    finally:
        statuses = stack.stop()
    assert all(code == 0 for code in statuses.values()), statuses


# ------------------------------------------------------------------------------ isolation


@pytest.mark.parametrize("host", sorted(CLAIMS))
@pytest.mark.parametrize("listener", sorted(ISOLATION))
def test_a_host_reaches_only_the_routes_of_the_listener_claiming_it(
    served: tuple[Cluster, dict[str, int]], host: str, listener: str
) -> None:
    _, ports = served
    status, _ = get(ports["isolation"], host, f"/{listener}")
    assert status == (200 if CLAIMS[host] == listener else 404)


# ------------------------------------------------------------------------------ ListenerSets


def test_listenersets_and_their_gateway_report_the_merge(
    served: tuple[Cluster, dict[str, int]],
) -> None:
    cluster, _ = served

    def settled() -> dict[str, Any] | None:
        found = cluster.status("ListenerSet", "apps")
        return found if len(found.get("listeners") or []) == 3 else None

    apps = eventually(settled, "ListenerSet apps written")
    assert conditions(apps["conditions"]) == {
        "Accepted": ("True", "ListenersNotValid"),
        "Programmed": ("True", "Programmed"),
    }
    entries = {x["name"]: x for x in apps["listeners"]}
    assert conditions(entries["www"]["conditions"])["Conflicted"] == ("True", "HostnameConflict")
    assert conditions(entries["api"]["conditions"])["Programmed"] == ("True", "Programmed")
    assert conditions(entries["secure"]["conditions"])["ResolvedRefs"] == ("True", "ResolvedRefs")
    assert {n: x["attachedRoutes"] for n, x in entries.items()} == {
        "api": 1,
        "www": 0,
        "secure": 2,
    }

    team = eventually(lambda: cluster.status("ListenerSet", "team", TEAM), "ListenerSet team")
    assert conditions(team["conditions"])["Accepted"] == ("False", "NotAllowed")

    gateway = cluster.status("Gateway", "gw")
    assert gateway["attachedListenerSets"] == 1
    assert sorted(x["name"] for x in gateway["listeners"]) == ["http", "https"]
    (parent,) = cluster.status("HTTPRoute", "secure-route")["parents"]
    assert parent["parentRef"]["kind"] == "ListenerSet"
    assert conditions(parent["conditions"])["Accepted"] == ("True", "Accepted")


@pytest.mark.parametrize(
    ("host", "answer"),
    [
        pytest.param("gateway.example", (200, "v1-0"), id="gateway-keeps-its-hostname"),
        pytest.param("api.example", (200, "v2-0"), id="set-listener-serves-set-routes"),
        pytest.param("team.example", (404, None), id="refused-set-not-bound"),
        pytest.param("unknown.example", (404, None), id="no-listener"),
    ],
)
def test_routes_answer_only_on_their_parents_listeners(
    served: tuple[Cluster, dict[str, int]], host: str, answer: tuple[int, str | None]
) -> None:
    _, ports = served
    assert get(ports["http"], host) == answer


def test_the_sets_https_listener_serves_its_own_certificate(
    served: tuple[Cluster, dict[str, int]],
) -> None:
    _, ports = served
    # secure-route names the set's HTTPS listener by sectionName, apps-route the whole set (so
    # it answers there too); the Gateway's own route answers only the Gateway's HTTPS host.
    for host, path, pod in (
        ("secure.example", "/secure", "v3-0"),
        ("secure.example", "/", "v2-0"),
        ("gateway.example", "/", "v1-0"),
    ):

        def answered(host: str = host, path: str = path) -> tuple[list[str], str] | None:
            return https(ports["https"], host, path)

        assert eventually(answered, f"HTTPS {host}{path}") == ([host], pod)


def test_a_listenerset_added_later_is_served_and_withdrawn_when_deleted(
    served: tuple[Cluster, dict[str, int]],
) -> None:
    cluster, ports = served
    cluster.create(
        listener_set("late", [http_listener("late", "late.example")]),
        route("late-route", to_set("late"), "v3"),
    )
    eventually(lambda: get(ports["http"], "late.example") == (200, "v3-0"), "late set served")
    eventually(lambda: cluster.status("Gateway", "gw").get("attachedListenerSets") == 2, "count")
    cluster.delete("ListenerSet", "late")
    eventually(lambda: get(ports["http"], "late.example")[0] == 404, "late set withdrawn")
    eventually(lambda: cluster.status("Gateway", "gw").get("attachedListenerSets") == 1, "count")
    assert get(ports["http"], "api.example") == (200, "v2-0")  # the other set is untouched
