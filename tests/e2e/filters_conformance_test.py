"""End to end: the Gateway API's backendRef redirect and CORS scenarios through the whole stack.

One stack (the API emulator, identity, controller and shared proxy, each from its shipped PEX
file as its own OS process, and two echo backends) serves one Gateway with an HTTP listener.
The routes are the ones the upstream conformance scenarios apply, and the requests and the
answers they expect are theirs:
- HTTPRouteBackendRequestRedirect: a rule whose only backendRef carries a RequestRedirect
  with ReplaceFullPath, or ReplacePrefixMatch, answers 302 with the redirected path, and never
  reaches the backend; and (the older HTTPRouteBackendPathRedirect) two weighted backendRefs
  each answer their own redirect. Both routes are Accepted with ResolvedRefs True.
- HTTPRouteCORS: preflights from exact, wildcard and any-number-of-labels origins get every
  Access-Control-* field (Expose-Headers included) with a 200; a non-matching origin gets no
  Access-Control-Allow-Origin on either answer; "*" methods answered with the method asked;
  a "*" origin answered "*" or the origin; credentials answer each "*" with what the request
  asked, and a route without credentials never says Access-Control-Allow-Credentials; actual
  requests reach the backend and carry the policy's fields.
Header values are compared as the scenarios do: whitespace ignored, list order free.
"""

from __future__ import annotations

import http.client
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import kubernetes
import pytest

from coxswain_devkit.stack import Launcher, Stack, StackPorts
from coxswain_devkit.waiting import until

WAIT = 60.0
GROUP, VERSION = "gateway.networking.k8s.io", "v1"
NS = "e2e-filters"
HOST = "filters.example"
PLURALS = {"GatewayClass": "gatewayclasses", "Gateway": "gateways", "HTTPRoute": "httproutes"}


def eventually(predicate: Callable[[], Any], what: str, timeout: float = WAIT) -> Any:
    return until(predicate, what, within=timeout, tolerate=(OSError, http.client.HTTPException))


class Answer:
    def __init__(self, status: int, headers: list[tuple[str, str]], body: bytes) -> None:
        self.status = status
        self.headers = headers
        self.body = body

    def values(self, name: str) -> list[str]:
        return [v for n, v in self.headers if n.lower() == name.lower()]

    def header(self, name: str) -> str | None:
        found = self.values(name)
        return found[0] if found else None

    def pod(self) -> str | None:
        try:
            return str(json.loads(self.body)["pod"])
        except (ValueError, KeyError, TypeError):
            return None


def send(
    port: int, path: str, method: str = "GET", headers: dict[str, str] | None = None
) -> Answer:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request(method, path, headers={"Host": HOST, **(headers or {})})
        response = conn.getresponse()
        return Answer(response.status, response.getheaders(), response.read())
    finally:
        conn.close()


# ------------------------------------------------------------------------------ objects


def obj(kind: str, name: str, spec: dict[str, Any]) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name}
    if kind != "GatewayClass":
        metadata["namespace"] = NS
    version = f"{GROUP}/{VERSION}" if kind in PLURALS else "v1"
    return {"apiVersion": version, "kind": kind, "metadata": metadata, "spec": spec}


def http_route(name: str, rules: list[dict[str, Any]]) -> dict[str, Any]:
    return obj("HTTPRoute", name, {"parentRefs": [{"name": "gw"}], "rules": rules})


def prefix(value: str) -> list[dict[str, Any]]:
    return [{"path": {"type": "PathPrefix", "value": value}}]


def redirect(**fields: Any) -> dict[str, Any]:
    return {"type": "RequestRedirect", "requestRedirect": fields}


def cors(**fields: Any) -> list[dict[str, Any]]:
    return [{"type": "CORS", "cors": fields}]


V1 = {"name": "infra-backend-v1", "port": 8080}
V2 = {"name": "infra-backend-v2", "port": 8080}

# HTTPRouteBackendRequestRedirect's route, and the older HTTPRouteBackendPathRedirect's.
REDIRECT_ROUTES = [
    http_route(
        "backend-request-redirect",
        [
            {
                "matches": prefix("/full"),
                "backendRefs": [
                    {
                        **V1,
                        "filters": [
                            redirect(
                                path={
                                    "type": "ReplaceFullPath",
                                    "replaceFullPath": "/redirected-full",
                                }
                            )
                        ],
                    }
                ],
            },
            {
                "matches": prefix("/prefix"),
                "backendRefs": [
                    {
                        **V1,
                        "filters": [
                            redirect(
                                path={
                                    "type": "ReplacePrefixMatch",
                                    "replacePrefixMatch": "/redirected-prefix",
                                }
                            )
                        ],
                    }
                ],
            },
        ],
    ),
    http_route(
        "backend-path-redirect",
        [
            {
                "matches": prefix("/split"),
                "backendRefs": [
                    {
                        **V1,
                        "filters": [
                            redirect(
                                scheme="https",
                                hostname="redirect-example.com",
                                port=443,
                                statusCode=302,
                            )
                        ],
                    },
                    {
                        **V2,
                        "filters": [
                            redirect(
                                scheme="http",
                                hostname="redirect-example.com",
                                port=80,
                                statusCode=301,
                            )
                        ],
                    },
                ],
            }
        ],
    ),
]

# HTTPRouteCORS's routes.
CORS_ROUTES = [
    http_route(
        "cors-multiple-origins-methods-headers",
        [
            {
                "filters": cors(
                    allowOrigins=["https://www.foo.com", "https://*.bar.com"],
                    allowMethods=["GET", "OPTIONS"],
                    allowHeaders=["x-header-1", "x-header-2"],
                    exposeHeaders=["x-header-3", "x-header-4"],
                    allowCredentials=True,
                    maxAge=3600,
                ),
                "matches": prefix("/cors-1"),
                "backendRefs": [V1],
            }
        ],
    ),
    http_route(
        "cors-wildcard-methods",
        [
            {
                "filters": cors(allowOrigins=["https://www.foo.com"], allowMethods=["*"]),
                "matches": prefix("/cors-2"),
                "backendRefs": [V1],
            }
        ],
    ),
    http_route(
        "cors-wildcard-origin",
        [
            {
                "filters": cors(allowOrigins=["*"], allowMethods=["PUT"]),
                "matches": prefix("/cors-wildcard-origin"),
                "backendRefs": [V1],
            }
        ],
    ),
    http_route(
        "cors-wildcard-methods-headers",
        [
            {
                "filters": cors(
                    allowOrigins=["*"],
                    allowMethods=["*"],
                    allowHeaders=["*"],
                    allowCredentials=True,
                ),
                "matches": prefix("/cors-wildcard-methods-headers"),
                "backendRefs": [V1],
            },
            {
                "filters": cors(allowOrigins=["*"], allowMethods=["*"], allowHeaders=["*"]),
                "matches": prefix("/cors-wildcard-methods-headers-unauth"),
                "backendRefs": [V1],
            },
        ],
    ),
]


class Cluster:
    def __init__(self, stack: Stack) -> None:
        self.stack = stack
        self.client = stack.client()
        self.custom: Any = kubernetes.client.CustomObjectsApi(self.client)

    def create(self, *objects: dict[str, Any]) -> None:
        create: Any = kubernetes.utils.create_from_dict  # core kinds; it knows no CRDs
        for o in objects:
            if o["kind"] not in PLURALS:
                create(self.client, o)
            elif o["kind"] == "GatewayClass":
                self.custom.create_cluster_custom_object(GROUP, VERSION, PLURALS[o["kind"]], o)
            else:
                self.custom.create_namespaced_custom_object(
                    GROUP, VERSION, NS, PLURALS[o["kind"]], o
                )

    def route_conditions(self, name: str) -> dict[str, str]:
        route = self.custom.get_namespaced_custom_object(GROUP, VERSION, NS, "httproutes", name)
        parents = (route.get("status") or {}).get("parents") or []
        return {c["type"]: c["status"] for p in parents for c in p.get("conditions") or []}


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Cluster, int]]:
    """The stack, and the shared proxy's port for the Gateway's HTTP listener once every
    route is Accepted with its references resolved and traffic flows."""
    workdir = tmp_path_factory.mktemp("filters")
    namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}}
    stack = Stack(
        Launcher.pex_files(Path(".")),
        workdir,
        echo_services=[(NS, "infra-backend-v1"), (NS, "infra-backend-v2")],
        ports=StackPorts.free(),
        gateway_api="experimental",
        extra_objects=[namespace],
    )
    try:
        stack.start()
        cluster = Cluster(stack)
        services = [
            obj("Service", name, {"ports": [{"name": "http", "port": 8080}]})
            for name in ("infra-backend-v1", "infra-backend-v2")
        ]
        cluster.create(
            obj(
                "GatewayClass",
                "coxswain",
                {"controllerName": "coxswain-labs.dev/gateway-controller"},
            ),
            *services,
            obj(
                "Gateway",
                "gw",
                {
                    "gatewayClassName": "coxswain",
                    "listeners": [{"name": "http", "port": 80, "protocol": "HTTP"}],
                },
            ),
            *REDIRECT_ROUTES,
            *CORS_ROUTES,
        )
        for route in (*REDIRECT_ROUTES, *CORS_ROUTES):
            name = str(route["metadata"]["name"])

            def accepted(name: str = name) -> bool:
                return cluster.route_conditions(name) == {
                    "Accepted": "True",
                    "ResolvedRefs": "True",
                }

            eventually(accepted, f"{name} Accepted with its references resolved")
        port = stack.bind_ports(NS, "gw")["http"]
        eventually(lambda: send(port, "/cors-1").pod() == "infra-backend-v1-0", "traffic")
        yield cluster, port
        cluster.client.close()
    finally:
        statuses = stack.stop()
    assert all(code == 0 for code in statuses.values()), statuses


# ------------------------------------------------------------------------------ redirects


@pytest.mark.parametrize(
    ("path", "location"),
    [
        pytest.param("/full/original", f"http://{HOST}/redirected-full", id="replace-full-path"),
        pytest.param(
            "/prefix/original",
            f"http://{HOST}/redirected-prefix/original",
            id="replace-prefix-match",
        ),
    ],
)
def test_a_backendrefs_redirect_answers_instead_of_its_backend(
    served: tuple[Cluster, int], path: str, location: str
) -> None:
    _, port = served
    answer = send(port, path)
    assert answer.status == 302
    assert answer.header("location") == location
    assert answer.pod() is None  # no echo answered: the backend was never asked


def test_each_weighted_backendref_answers_its_own_redirect(served: tuple[Cluster, int]) -> None:
    _, port = served
    seen = {(a.status, a.header("location")) for a in (send(port, "/split") for _ in range(6))}
    assert seen == {
        (302, "https://redirect-example.com/split"),
        (301, "http://redirect-example.com/split"),
    }


# ------------------------------------------------------------------------------ CORS


def tokens(value: str | None) -> set[str]:
    """A list-valued field compared as the scenario does: whitespace ignored, order free."""
    return {t.strip() for t in (value or "").split(",") if t.strip()}


def preflight(port: int, path: str, origin: str, method: str, asked: str = "") -> Answer:
    headers = {"Origin": origin, "Access-Control-Request-Method": method}
    if asked:
        headers["Access-Control-Request-Headers"] = asked
    return send(port, path, "OPTIONS", headers)


@pytest.mark.parametrize(
    "origin",
    [
        pytest.param("https://www.foo.com", id="exact-matching-origin"),
        pytest.param("https://www.bar.com", id="wildcard-matching-origin"),
        pytest.param("https://xpto.www.bar.com", id="wildcard-matching-any-number-of-labels"),
    ],
)
def test_preflight_from_an_allowed_origin_gets_every_field(
    served: tuple[Cluster, int], origin: str
) -> None:
    _, port = served
    answer = preflight(port, "/cors-1", origin, "GET", "x-header-1, x-header-2")
    assert answer.status == 200
    assert answer.pod() is None  # answered by the proxy
    assert answer.header("access-control-allow-origin") == origin
    assert tokens(answer.header("access-control-allow-methods")) == {"GET", "OPTIONS"}
    assert tokens(answer.header("access-control-allow-headers")) == {"x-header-1", "x-header-2"}
    assert tokens(answer.header("access-control-expose-headers")) == {"x-header-3", "x-header-4"}
    assert answer.header("access-control-max-age") == "3600"
    assert answer.header("access-control-allow-credentials") == "true"
    assert "Origin" in tokens(",".join(answer.values("vary")))


def test_a_non_matching_origin_is_not_allowed(served: tuple[Cluster, int]) -> None:
    _, port = served
    answer = preflight(port, "/cors-1", "https://foobar.com", "GET")
    assert answer.status in (200, 204, 403)
    assert answer.header("access-control-allow-origin") is None
    actual = send(port, "/cors-1", headers={"Origin": "https://foobar.com"})
    assert actual.header("access-control-allow-origin") is None
    assert actual.pod() == "infra-backend-v1-0"


@pytest.mark.parametrize(
    "origin",
    [
        pytest.param("https://www.foo.com", id="exact-matching-origin"),
        pytest.param("https://www.bar.com", id="wildcard-matching-origin"),
    ],
)
def test_a_simple_request_from_an_allowed_origin(served: tuple[Cluster, int], origin: str) -> None:
    _, port = served
    answer = send(
        port,
        "/cors-1",
        headers={"Origin": origin, "Access-Control-Request-Method": "GET"},
    )
    assert answer.status == 200 and answer.pod() == "infra-backend-v1-0"
    assert answer.header("access-control-allow-origin") == origin
    assert tokens(answer.header("access-control-expose-headers")) == {"x-header-3", "x-header-4"}
    assert answer.header("access-control-allow-credentials") == "true"


def test_wildcard_methods_answer_the_method_and_no_credentials(
    served: tuple[Cluster, int],
) -> None:
    _, port = served
    answer = preflight(port, "/cors-2", "https://www.foo.com", "POST")
    assert answer.status in (200, 204)
    assert answer.header("access-control-allow-methods") in ("POST", "*")
    assert answer.header("access-control-allow-origin") == "https://www.foo.com"
    assert answer.header("access-control-allow-credentials") is None


@pytest.mark.parametrize(
    "origin",
    [
        pytest.param("https://foobar.com", id="origin"),
        pytest.param("https://foobar.com:12345", id="with-port"),
    ],
)
def test_a_wildcard_origin(served: tuple[Cluster, int], origin: str) -> None:
    _, port = served
    answer = preflight(port, "/cors-wildcard-origin", origin, "PUT")
    assert answer.status in (200, 204)
    assert answer.header("access-control-allow-origin") in (origin, "*")
    assert answer.header("access-control-allow-methods") == "PUT"
    assert answer.header("access-control-allow-credentials") is None
    actual = send(port, "/cors-wildcard-origin", "PUT", {"Origin": origin})
    assert actual.status == 200 and actual.pod() == "infra-backend-v1-0"
    assert actual.header("access-control-allow-origin") in (origin, "*")
    assert actual.header("access-control-allow-credentials") is None


def test_credentials_answer_every_wildcard_with_what_was_asked(
    served: tuple[Cluster, int],
) -> None:
    _, port = served
    origin = "https://other.foo.com"
    answer = preflight(
        port, "/cors-wildcard-methods-headers", origin, "PUT", "x-header-1, x-header-2"
    )
    assert answer.status == 200
    assert answer.header("access-control-allow-origin") == origin
    assert answer.header("access-control-allow-methods") == "PUT"
    assert tokens(answer.header("access-control-allow-headers")) == {"x-header-1", "x-header-2"}
    assert answer.header("access-control-allow-credentials") == "true"
    actual = send(
        port,
        "/cors-wildcard-methods-headers",
        headers={"Origin": origin, "Authorization": "Bearer test"},
    )
    assert actual.status == 200 and actual.pod() == "infra-backend-v1-0"
    assert actual.header("access-control-allow-origin") == origin
    assert actual.header("access-control-allow-credentials") == "true"


def test_without_credentials_the_auth_field_is_absent(served: tuple[Cluster, int]) -> None:
    _, port = served
    path = "/cors-wildcard-methods-headers-unauth"
    origin = "https://other.foo.com"
    answer = preflight(port, path, origin, "PUT", "x-header-1, x-header-2")
    assert answer.status == 200
    assert answer.header("access-control-allow-origin") in (origin, "*")
    assert answer.header("access-control-allow-methods") in ("PUT", "*")
    allowed = tokens(answer.header("access-control-allow-headers"))
    assert allowed in ({"x-header-1", "x-header-2"}, {"*"})
    assert answer.header("access-control-allow-credentials") is None
    actual = send(port, path, headers={"Origin": origin, "Authorization": "Bearer test"})
    assert actual.status == 200
    assert actual.header("access-control-allow-origin") == origin  # the scenario takes no "*"
    assert actual.header("access-control-allow-credentials") is None
