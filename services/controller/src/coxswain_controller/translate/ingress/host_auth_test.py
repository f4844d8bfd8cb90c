"""auth-url of `$host` through translation: which Service each host's auth request goes to.

Covers the resolution (`host_auth`) as the compiled snapshot shows it: ingress-nginx's oauth2-proxy
example (the auth request straight to the /oauth2 Ingress's Service with the request's host,
that Ingress's own paths served without auth), the matching rules (longest prefix, Exact, whole
segments, ImplementationSpecific, the http port for an http URL), one target per host, the
class, and each refusal naming the host and path: no path, this Ingress's own path, a path that
redirects, rewrites, splits or checks the request, a backend not spoken to as plain HTTP, a
path with no host or on a wildcard host. A Service that does not exist answers 500 with an
Event. What the proxy does with the policy is in the proxy's tests and the migration e2e; the
`$host` URL's parsing in annotations/policy_test.py; the report in report_test.py.
"""

from __future__ import annotations

from typing import Any

import pytest

from coxswain_controller.translate import Inputs, Options, translate
from coxswain_controller.translate.result import TranslateResult
from coxswain_controller.translate.scopes import SHARED_POOL
from coxswain_routing import Candidate, ExternalAuth, HostRoutes, Router, compile_router

P = "nginx.ingress.kubernetes.io/"
HTTP, HTTPS = 80, 443
AUTH = {"auth-url": "https://$host/oauth2/auth"}


def service(name: str, port: int = 80) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "namespace": "shop"},
            "spec": {"ports": [{"name": "http", "port": port}]}}  # fmt: skip


def ingress(
    name: str,
    *paths: tuple[str, str, str],
    hosts: tuple[str, ...] = ("app.example",),
    at: int = 1,
    annotations: dict[str, str] | None = None,
    cls: str = "coxswain",
) -> dict[str, Any]:
    """An Ingress with each (path, pathType, Service) on each of `hosts`."""
    http = {
        "paths": [{"path": p, "pathType": kind, "backend": _backend(svc)} for p, kind, svc in paths]
    }
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "Ingress",
        "metadata": {
            "name": name,
            "namespace": "shop",
            "uid": f"uid-{name}",
            "creationTimestamp": f"2026-01-01T00:00:{at:02d}Z",
            "annotations": {P + k: v for k, v in (annotations or {}).items()},
        },
        "spec": {"ingressClassName": cls, "rules": [{"host": h, "http": http} for h in hosts]},
    }


def _backend(svc: str) -> dict[str, Any]:
    return {"service": {"name": svc, "port": {"number": 4180 if svc == "oauth2-proxy" else 80}}}


def app(path: str = "/", **annotations: str) -> dict[str, Any]:
    return ingress("app", (path, "Prefix", "web"), annotations={**AUTH, **annotations})


def dashboard() -> dict[str, Any]:
    """An asking Ingress whose own path does not cover the auth path."""
    return app("/dashboard")


def proxy(path: str = "/oauth2", kind: str = "Prefix", **annotations: str) -> dict[str, Any]:
    return ingress("proxy", (path, kind, "oauth2-proxy"), at=2, annotations=annotations)


def ingress_class(name: str = "coxswain") -> dict[str, Any]:
    controller = "coxswain-labs.dev/ingress-controller"
    return {"apiVersion": "networking.k8s.io/v1", "kind": "IngressClass",
            "metadata": {"name": name}, "spec": {"controller": controller}}  # fmt: skip


def run(*objects: dict[str, Any]) -> tuple[Router, TranslateResult]:
    everything = [ingress_class(), service("web"), service("oauth2-proxy", 4180),
                  service("other"), *objects]  # fmt: skip
    result = translate(Inputs.from_objects(everything), Options())
    return compile_router(result.snapshots.get(SHARED_POOL, ())), result


def served(router: Router, path: str, host: str = "app.example", port: int = HTTPS) -> Candidate:
    outcome = router.match(port, host, "GET", path)
    assert isinstance(outcome, Candidate), f"{host}{path}: {outcome}"
    return outcome


def auth(router: Router, path: str = "/", host: str = "app.example") -> ExternalAuth | None:
    policy = served(router, path, host).rule.policy
    return policy.external_auth if policy is not None else None


def events(result: TranslateResult, name: str) -> list[str]:
    return [e.message for e in result.events if e.ref.name == name]


def refusal(*objects: dict[str, Any], name: str = "app") -> str:
    """The one Event of an Ingress left unserved."""
    _, result = run(*objects)
    rules = [r for res in result.snapshots.get(SHARED_POOL, ()) if isinstance(res, HostRoutes)
             for r in res.rules]  # fmt: skip
    assert not [r for r in rules if r.id.name == name]
    [message] = events(result, name)
    assert "not served" in message
    return message


def test_the_upstream_example_asks_the_oauth2_proxy_service_with_the_requests_host() -> None:
    router, result = run(app(), proxy())
    found = auth(router, "/dashboard")
    assert found is not None
    assert (found.endpoints, found.host, found.path) == (
        "endpoints/shop/oauth2-proxy/4180",
        "app.example",
        "/oauth2/auth",
    )
    # The Ingress serving /oauth2 has no auth-url: its paths, sign-in included, ask nothing.
    start = served(router, "/oauth2/start")
    assert start.rule.id.name == "proxy" and start.rule.policy is None
    assert start.backends.pick().endpoints == "endpoints/shop/oauth2-proxy/4180"
    assert events(result, "app") == [] and events(result, "proxy") == []


@pytest.mark.parametrize(
    ("paths", "winner"),
    [
        pytest.param([("/oauth2", "Prefix"), ("/oauth2/auth", "Exact")], 1, id="exact-over-prefix"),
        pytest.param([("/oauth2", "Prefix"), ("/oauth2/auth", "Prefix")], 1, id="longest-prefix"),
        pytest.param([("/oauth2/", "Prefix"), ("/oauth", "Prefix")], 0, id="whole-segments"),
        pytest.param([("/oauth2", "ImplementationSpecific")], 0, id="implementation-specific"),
    ],
)
def test_the_auth_path_is_matched_as_a_request_to_it_would_be(
    paths: list[tuple[str, str]], winner: int
) -> None:
    candidates = [
        ingress(f"p{i}", (p, kind, "oauth2-proxy" if i == winner else "other"), at=2 + i)
        for i, (p, kind) in enumerate(paths)
    ]
    router, _ = run(app(), *candidates)
    found = auth(router)
    assert found is not None and found.endpoints == "endpoints/shop/oauth2-proxy/4180"


def test_each_host_asks_the_service_its_own_path_names() -> None:
    hosts = ("a.example", "b.example")
    main = ingress("app", ("/", "Prefix", "web"), hosts=hosts, annotations=AUTH)
    a = ingress("a", ("/oauth2", "Prefix", "oauth2-proxy"), hosts=hosts[:1], at=2)
    b = ingress("b", ("/oauth2", "Prefix", "other"), hosts=hosts[1:], at=3)
    router, _ = run(main, a, b)
    found = {h: auth(router, host=h) for h in hosts}
    assert {h: (f.endpoints, f.host) for h, f in found.items() if f is not None} == {
        "a.example": ("endpoints/shop/oauth2-proxy/4180", "a.example"),
        "b.example": ("endpoints/shop/other/80", "b.example"),
    }


def test_an_http_url_with_a_port_is_found_on_the_http_port() -> None:
    router, _ = run(app(**{"auth-url": "http://$host:8080/oauth2/auth"}), proxy())
    found = auth(router)
    assert found is not None and (found.endpoints, found.host) == (
        "endpoints/shop/oauth2-proxy/4180",
        "app.example:8080",
    )


def test_a_service_that_does_not_exist_answers_500_with_an_event() -> None:
    gone = ingress("proxy", ("/oauth2", "Prefix", "gone"), at=2)
    router, result = run(app(), gone)
    found = auth(router)
    assert found is not None and found.endpoints == ""
    [message] = events(result, "app")
    assert "auth-url:" in message and "gone" in message


def test_only_the_ingress_class_of_the_asking_ingress_is_looked_at() -> None:
    other = ingress("proxy", ("/oauth2", "Prefix", "oauth2-proxy"), at=2, cls="second")
    message = refusal(ingress_class("second"), dashboard(), other)
    assert "no Ingress of class coxswain serves https://app.example/oauth2/auth" in message


@pytest.mark.parametrize(
    ("objects", "said"),
    [
        pytest.param(
            [proxy("/login")],
            "no Ingress of class coxswain serves https://app.example/oauth2/auth",
            id="no-path",
        ),
        pytest.param([proxy("/oauth2", "Exact")], "no Ingress", id="exact-elsewhere"),
        pytest.param([], "this Ingress itself", id="its-own-path"),
        pytest.param([proxy(**{"rewrite-target": "/"})], "changes it", id="rewrite"),
        pytest.param([proxy(**{"upstream-vhost": "x.example"})], "changes it", id="vhost"),
        pytest.param(
            [proxy(**{"permanent-redirect": "https://x.example/"})], "redirect", id="redirect"
        ),
        pytest.param(
            [proxy(**{"whitelist-source-range": "10.0.0.0/8"})], "source ranges", id="source-ranges"
        ),
        pytest.param([proxy(**{"limit-rps": "5"})], "rate limits", id="limits"),
        pytest.param(
            [proxy(**{"auth-url": "http://other.shop.svc/"})], "an auth-url", id="auth-of-its-own"
        ),
        pytest.param([proxy(**{"backend-protocol": "GRPC"})], "plain HTTP", id="grpc"),
        pytest.param(
            [
                proxy(),
                ingress(
                    "canary",
                    ("/oauth2", "Prefix", "other"),
                    at=3,
                    annotations={"canary": "true", "canary-weight": "10"},
                ),
            ],
            "splits it with a canary",
            id="canary",
        ),
    ],
)  # fmt: skip
def test_a_path_nginx_would_serve_otherwise_refuses_the_ingress(
    objects: list[dict[str, Any]], said: str
) -> None:
    asking = app() if said == "this Ingress itself" else dashboard()
    message = refusal(asking, *objects)
    assert message.startswith("auth-url: ") and said in message, message
    assert "app.example/oauth2/auth" in message


def test_an_http_url_where_http_is_redirected_to_https_is_refused() -> None:
    # As ssl-redirect does for a host with a certificate: the http port answers 308.
    forced = proxy(**{"force-ssl-redirect": "true"})
    message = refusal(app("/dashboard", **{"auth-url": "http://$host/oauth2/auth"}), forced)
    assert "http://app.example/oauth2/auth" in message and "redirect" in message


@pytest.mark.parametrize(
    ("host", "said"),
    [
        pytest.param("", "with no host", id="hostless"),
        pytest.param("*.example", "on the wildcard host *.example", id="wildcard"),
    ],
)
def test_a_path_without_one_host_refuses_the_ingress(host: str, said: str) -> None:
    asking = ingress("app", ("/", "Prefix", "web"), hosts=(host,), annotations=AUTH)
    _, result = run(asking, proxy())
    [message] = events(result, "app")
    assert said in message and "not served" in message
