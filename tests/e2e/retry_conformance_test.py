"""End to end: HTTPRoute retry and timeouts, as the Gateway API's conformance cases check them.

One stack (the API emulator serving the experimental channel, where `rules[].retry` lives, the
load balancer, identity, the controller and a shared proxy, each its own OS process, from the
shipped PEX files) serves one Gateway whose HTTPRoute has a rule per case of
HTTPRouteRetryConnectionError, HTTPRouteRetryWithTimeouts and HTTPRouteRetry. The backend is
this test process's own, on 127.0.0.1, written into an EndpointSlice as a cluster's endpoints
controller would; like the conformance echo's retry simulation it counts the requests carrying
each probe's `uuid` and fails the first `succeedAfter` of them, by resetting the connection, by
never answering, or with `responseCode`. Covers: connection resets retried to a good answer
within `attempts`, and 503 once they are used up; a refused endpoint skipped for a live one; a
POST not retried; attempts that outlast `timeouts.backendRequest` retried to a good answer, and
504 when every attempt did; `timeouts.request` ending the retries with 504; a status retried
only when `codes` lists it, and passed on once the attempts are used up; a backoff between
attempts. What is asserted is the answer and how many attempts the backend saw, never a time.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import socket
import socketserver
import struct
import threading
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import kubernetes
import pytest

from coxswain_devkit.stack import Launcher, Stack, StackPorts, free_port
from coxswain_devkit.waiting import until

WAIT = 60.0
GROUP = "gateway.networking.k8s.io"
NS = "e2e-retry"
HOST = "retry.example"


def eventually(predicate: Callable[[], Any], what: str, timeout: float = WAIT) -> Any:
    return until(predicate, what, within=timeout, tolerate=(OSError, http.client.HTTPException))


# ------------------------------------------------------------------------------ the backend


class _Handler(socketserver.StreamRequestHandler):
    """HTTP/1.1 requests on one connection, each met as its query says."""

    def handle(self) -> None:
        server = self.server
        assert isinstance(server, Flaky)
        while True:
            head = self._head()
            if head is None:
                return
            target, length = head
            self.rfile.read(length)
            query = {k: v[0] for k, v in parse_qs(urlsplit(target).query).items()}
            seen = server.count(query.get("uuid", ""))
            if seen > int(query.get("succeedAfter", "0")) and self._answer(200, seen):
                continue
            fail = query.get("failWith", "code")
            if fail == "reset":  # closed with no lingering: an RST, not a FIN
                linger = struct.pack("ii", 1, 0)
                self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, linger)
                self.connection.close()
                return
            if fail == "silent":
                with contextlib.suppress(OSError):
                    self.rfile.read()  # until the proxy gives up and closes
                return
            if not self._answer(int(query.get("responseCode", "500")), seen):
                return

    def _head(self) -> tuple[str, int] | None:
        line = self.rfile.readline()
        if not line:
            return None
        length = 0
        while (field := self.rfile.readline()) not in (b"\r\n", b"\n", b""):
            name, _, value = field.decode("latin-1").partition(":")
            if name.strip().lower() == "content-length":
                length = int(value)
        return line.split()[1].decode("latin-1"), length

    def _answer(self, status: int, seen: int) -> bool:
        body = json.dumps({"attempt": seen}).encode()
        head = f"HTTP/1.1 {status} X\r\nContent-Type: application/json\r\n"
        head += f"Content-Length: {len(body)}\r\n\r\n"
        try:
            self.wfile.write(head.encode() + body)
        except OSError:
            return False
        return True


class Flaky(socketserver.ThreadingTCPServer):
    """Counts the requests per `uuid` (the conformance echo's retry simulation)."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.port = int(self.server_address[1])
        self.seen: Counter[str] = Counter()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self.serve_forever, daemon=True)
        self._thread.start()

    def count(self, probe: str) -> int:
        with self._lock:
            self.seen[probe] += 1
            return self.seen[probe]

    def close(self) -> None:
        self.shutdown()
        self.server_close()


# ------------------------------------------------------------------------------ objects


def backend_service(name: str, *ports: int) -> list[dict[str, Any]]:
    """A Service and the EndpointSlice naming 127.0.0.1:`ports`, one endpoint per port."""
    return [
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": name, "namespace": NS},
            "spec": {"ports": [{"name": "http", "port": 80}]},
        },
        *(
            {
                "apiVersion": "discovery.k8s.io/v1",
                "kind": "EndpointSlice",
                "metadata": {
                    "name": f"{name}-{i}",
                    "namespace": NS,
                    "labels": {"kubernetes.io/service-name": name},
                },
                "addressType": "IPv4",
                "ports": [{"name": "http", "port": port, "protocol": "TCP"}],
                "endpoints": [{"addresses": ["127.0.0.1"], "conditions": {"ready": True}}],
            }
            for i, port in enumerate(ports)
        ),
    ]


def rule(path: str, service: str = "flaky", **settings: Any) -> dict[str, Any]:
    return {
        "matches": [{"path": {"type": "PathPrefix", "value": path}}],
        **settings,
        "backendRefs": [{"name": service, "port": 80}],
    }


RULES = [
    # HTTPRouteRetryConnectionError
    rule("/retry/no-status-code-attempts-3", retry={"attempts": 3}),
    rule("/retry/refused", service="half-dead", retry={"attempts": 1}),
    rule("/retry/backoff", retry={"attempts": 2, "backoff": "200ms"}),
    # HTTPRouteRetryWithTimeouts (backendRequest of 1 s, not 200 ms: a loaded machine's good
    # answer must come in time; the failing attempts never answer at all)
    rule(
        "/retry/backend-request-timeout", retry={"attempts": 2}, timeouts={"backendRequest": "1s"}
    ),
    rule(
        "/retry/request-timeout",
        retry={"codes": [500], "attempts": 5},
        timeouts={"backendRequest": "1s", "request": "2500ms"},
    ),
    # HTTPRouteRetry
    rule("/retry/code-500-attempts-3", retry={"codes": [500], "attempts": 3}),
]


def objects(flaky: int, dead: int) -> list[dict[str, Any]]:
    return [
        {
            "apiVersion": f"{GROUP}/v1",
            "kind": "GatewayClass",
            "metadata": {"name": "coxswain"},
            "spec": {"controllerName": "coxswain-labs.dev/gateway-controller"},
        },
        *backend_service("flaky", flaky),
        *backend_service("half-dead", dead, flaky),
        {
            "apiVersion": f"{GROUP}/v1",
            "kind": "Gateway",
            "metadata": {"name": "gw", "namespace": NS},
            "spec": {
                "gatewayClassName": "coxswain",
                "listeners": [{"name": "http", "port": 80, "protocol": "HTTP"}],
            },
        },
        {
            "apiVersion": f"{GROUP}/v1",
            "kind": "HTTPRoute",
            "metadata": {"name": "retries", "namespace": NS},
            "spec": {"parentRefs": [{"name": "gw"}], "hostnames": [HOST], "rules": RULES},
        },
    ]


# ------------------------------------------------------------------------------ the stack


class Cluster:
    def __init__(self, stack: Stack, flaky: Flaky) -> None:
        self.stack = stack
        self.flaky = flaky
        self.client = stack.client()
        self.custom: Any = kubernetes.client.CustomObjectsApi(self.client)

    def create(self, *documents: dict[str, Any]) -> None:
        create: Any = kubernetes.utils.create_from_dict  # core kinds; it knows no CRDs
        for obj in documents:
            if not obj["apiVersion"].startswith(GROUP):
                create(self.client, obj)
            elif obj["kind"] == "GatewayClass":
                self.custom.create_cluster_custom_object(GROUP, "v1", "gatewayclasses", obj)
            else:
                plural = obj["kind"].lower() + "s"
                self.custom.create_namespaced_custom_object(GROUP, "v1", NS, plural, obj)

    def port(self) -> int:
        return self.stack.bind_ports(NS, "gw")["http"]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    workdir = tmp_path_factory.mktemp("retry")
    flaky = Flaky()
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
        running = Cluster(stack, flaky)
        running.create(*objects(flaky.port, free_port()))
        port = running.port()
        for path in ("/retry/code-500-attempts-3", "/retry/refused"):

            def served(path: str = path) -> bool:
                return probe(port, path)[0] == 200

            eventually(served, f"traffic on {path}")
        yield running
        running.client.close()
    finally:
        statuses = stack.stop()
        flaky.close()
    assert all(code == 0 for code in statuses.values()), statuses


def probe(port: int, path: str, method: str = "GET", **query: str) -> tuple[int, str]:
    """One request for a fresh probe (its own `uuid`): its status, and the probe."""
    probe_id = uuid.uuid4().hex
    target = path + "?" + "&".join(f"{k}={v}" for k, v in {"uuid": probe_id, **query}.items())
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        body = b"x" if method != "GET" else None
        conn.request(method, target, body=body, headers={"Host": HOST})
        response = conn.getresponse()
        response.read()
        return response.status, probe_id
    finally:
        conn.close()


def attempted(cluster: Cluster, path: str, method: str = "GET", **query: str) -> tuple[int, int]:
    """The status a probe got, and how many attempts the backend saw of it."""
    status, probe_id = probe(cluster.port(), path, method, **query)
    return status, cluster.flaky.seen[probe_id]


# ------------------------------------------------------------------------------ scenarios


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        # "succeeds after 2 retries on connection errors and max attempts is 3"
        pytest.param({"succeedAfter": "2", "failWith": "reset"}, (200, 3), id="recovers"),
        # "fails when required retries on connection errors exceed max attempts": 500 or 503
        pytest.param({"succeedAfter": "4", "failWith": "reset"}, (503, 4), id="used-up-503"),
    ],
)
def test_retry_on_connection_errors(
    cluster: Cluster, query: dict[str, str], expected: tuple[int, int]
) -> None:
    assert attempted(cluster, "/retry/no-status-code-attempts-3", **query) == expected


def test_a_refused_endpoint_is_retried_on_the_live_one(cluster: Cluster) -> None:
    # Round robin over a dead port and the live one: every other request starts on the dead.
    results = [attempted(cluster, "/retry/refused") for _ in range(6)]
    assert results == [(200, 1)] * 6


def test_a_post_is_not_retried(cluster: Cluster) -> None:
    query = {"succeedAfter": "1", "failWith": "reset"}
    assert attempted(cluster, "/retry/no-status-code-attempts-3", "POST", **query) == (503, 1)


def test_a_backoff_between_attempts(cluster: Cluster) -> None:
    query = {"succeedAfter": "1", "failWith": "reset"}
    assert attempted(cluster, "/retry/backoff", **query) == (200, 2)


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        # "succeeds after 2 retries on backend timeout with max attempts is 3"
        pytest.param({"succeedAfter": "2", "failWith": "silent"}, (200, 3), id="recovers"),
        # "fails when required retries on backend timeout exceed max attempts"
        pytest.param({"succeedAfter": "3", "failWith": "silent"}, (504, 3), id="used-up-504"),
    ],
)
def test_retry_on_backend_request_timeouts(
    cluster: Cluster, query: dict[str, str], expected: tuple[int, int]
) -> None:
    assert attempted(cluster, "/retry/backend-request-timeout", **query) == expected


def test_retries_complete_within_the_request_timeout(cluster: Cluster) -> None:
    query = {"succeedAfter": "1", "responseCode": "500"}
    assert attempted(cluster, "/retry/request-timeout", **query) == (200, 2)


def test_the_request_timeout_ends_the_retries_with_504(cluster: Cluster) -> None:
    # Six attempts allowed, each bounded by 1 s, all within 2.5 s: the request bound ends them
    # (its timer and the attempts' fire in the order of their deadlines: three at most).
    query = {"succeedAfter": "10", "failWith": "silent"}
    status, seen = attempted(cluster, "/retry/request-timeout", **query)
    assert status == 504 and 1 <= seen <= 3


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        pytest.param({"succeedAfter": "2", "responseCode": "500"}, (200, 3), id="500-recovers"),
        pytest.param({"succeedAfter": "4", "responseCode": "500"}, (500, 4), id="500-used-up"),
        pytest.param({"succeedAfter": "2", "responseCode": "503"}, (503, 1), id="503-not-listed"),
    ],
)
def test_retry_on_listed_codes(
    cluster: Cluster, query: dict[str, str], expected: tuple[int, int]
) -> None:
    assert attempted(cluster, "/retry/code-500-attempts-3", **query) == expected
