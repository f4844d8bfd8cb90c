"""ingress-nginx annotations end to end through translation and the real matcher.

Covers what the golden cases show as data, asked as requests: each translated snapshot is
compiled by `coxswain_routing.compile_router` and asked where a request goes and how it is
rewritten or redirected — rewrite-target captures on a regex host whose older "/" must not win,
case-insensitive regex paths, app-root, the HTTPS redirect's Location, canary splits by weight
and by header, defaultAnnotations layered under an Ingress's own, and every kind of refusal
leaving the Ingress unserved with an InvalidAnnotation Event naming the key. Annotation value
parsing is covered in annotations/policy_test.py, the bytes on the wire in the proxy's own
tests and tests/e2e/ingress_nginx_test.py.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
import yaml

from coxswain_controller.translate import Inputs, Options, translate
from coxswain_controller.translate.goldens import TESTDATA
from coxswain_controller.translate.result import TranslateResult
from coxswain_controller.translate.scopes import SHARED_POOL
from coxswain_routing import (
    Candidate,
    RequestRedirect,
    RequestTarget,
    Router,
    URLRewrite,
    compile_router,
    redirect_location,
    rewrite_path,
)

P = "nginx.ingress.kubernetes.io/"
HTTP, HTTPS = 80, 443


def service(name: str, port: int = 80, ns: str = "shop") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"ports": [{"name": "http", "port": port}]},
    }


def ingress(
    name: str,
    host: str,
    path: str = "/",
    *,
    backend: str = "web",
    at: int = 1,
    annotations: dict[str, str] | None = None,
    kind: str = "Prefix",
    cls: str = "coxswain",
    tls: bool = False,
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "ingressClassName": cls,
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
        spec["tls"] = [{"hosts": [host], "secretName": "cert"}]
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
        "spec": spec,
    }


def ingress_class(name: str = "coxswain", parameters: str = "") -> dict[str, Any]:
    spec: dict[str, Any] = {"controller": "coxswain-labs.dev/ingress-controller"}
    if parameters:
        spec["parameters"] = {
            "apiGroup": "coxswain-labs.dev",
            "kind": "CoxswainIngressClassParameters",
            "name": parameters,
        }
    return {"apiVersion": "networking.k8s.io/v1", "kind": "IngressClass",
            "metadata": {"name": name}, "spec": spec}  # fmt: skip


def run(*objects: dict[str, Any]) -> tuple[Router, TranslateResult]:
    everything = [ingress_class(), service("web"), service("api"), service("canary"), *objects]
    result = translate(Inputs.from_objects(everything), Options())
    return compile_router(result.snapshots[SHARED_POOL]), result


def served(
    router: Router, host: str, path: str, port: int = HTTPS, headers: dict[str, str] | None = None
) -> Candidate:
    outcome = router.match(port, host, "GET", path, headers or {})
    assert isinstance(outcome, Candidate), f"{host}{path}: {outcome}"
    return outcome


def upstream(router: Router, host: str, path: str, **headers: str) -> tuple[str, str]:
    """(Service, path sent upstream) for a request on the HTTPS port."""
    cand = served(router, host, path, headers=headers)
    rewritten = path
    for flt in cand.rule.filters:
        if isinstance(flt, URLRewrite) and flt.path is not None:
            rewritten = rewrite_path(path, flt.path, cand.match.path.value)
    backend = cand.backends.pick()
    return backend.endpoints.split("/")[2], rewritten


def location(router: Router, host: str, path: str, port: int) -> tuple[int, str]:
    cand = served(router, host, path, port)
    redirect = next(f for f in cand.rule.filters if isinstance(f, RequestRedirect))
    target = RequestTarget("http" if port == HTTP else "https", host, path, "")
    return redirect.status_code, redirect_location(
        redirect, target, listener_port=port, matched_prefix=cand.match.path.value
    )


def events(result: TranslateResult, name: str) -> list[str]:
    return [e.message for e in result.events if e.ref.name == name]


# ---------------------------------------------------------------------------------------------
# Rewrites and regex hosts


def test_rewrite_target_captures_and_nginx_order_on_the_regex_host() -> None:
    # ingress-nginx's documented example, beside an older "/" on the same host: nginx enforces
    # regexes on the whole host and tries the longer path first, so the api path wins.
    front = ingress("front", "app.example", at=0)
    api = ingress(
        "api",
        "app.example",
        "/api(/|$)(.*)",
        backend="api",
        kind="ImplementationSpecific",
        annotations={"rewrite-target": "/$2", "use-regex": "true"},
    )
    router, _ = run(front, api)
    assert upstream(router, "app.example", "/api") == ("api", "/")
    assert upstream(router, "app.example", "/api/") == ("api", "/")
    assert upstream(router, "app.example", "/api/orders/7") == ("api", "/orders/7")
    assert upstream(router, "app.example", "/API/orders") == ("api", "/orders")
    assert upstream(router, "app.example", "/apiary") == ("web", "/apiary")
    assert upstream(router, "app.example", "/") == ("web", "/")


def test_groups_are_renumbered_past_an_earlier_path_with_groups_of_its_own() -> None:
    longer = ingress(
        "longer",
        "app.example",
        "/v1/(users|teams)/(.*)",
        backend="api",
        at=0,
        annotations={"rewrite-target": "/$1/$2"},
    )
    shorter = ingress(
        "shorter", "app.example", "/v(.)/(.*)", backend="web", annotations={"rewrite-target": "/$2"}
    )
    router, _ = run(longer, shorter)
    assert upstream(router, "app.example", "/v1/teams/a") == ("api", "/teams/a")
    assert upstream(router, "app.example", "/v2/things") == ("web", "/things")


def test_a_fixed_rewrite_target_replaces_the_whole_path_as_nginx_does() -> None:
    router, _ = run(ingress("static", "s.example", "/static", annotations={"rewrite-target": "/"}))
    assert upstream(router, "s.example", "/static/app.js") == ("web", "/")
    assert upstream(router, "s.example", "/STATIC") == ("web", "/")


def test_app_root_redirects_exactly_the_root() -> None:
    router, _ = run(ingress("dash", "d.example", annotations={"app-root": "/dashboard"}))
    assert location(router, "d.example", "/", HTTPS) == (302, "https://d.example/dashboard")
    assert upstream(router, "d.example", "/dashboard") == ("web", "/dashboard")


# ---------------------------------------------------------------------------------------------
# HTTPS redirects


def _cert() -> dict[str, Any]:
    """A TLS Secret named "cert" (the golden cases' own certificate and key)."""
    case = TESTDATA / "ingress-paths-tls-and-default-backend" / "input.yaml"
    secret = next(d for d in yaml.safe_load_all(case.read_text()) if d["kind"] == "Secret")
    secret["metadata"]["name"] = "cert"
    return dict(secret)


def test_ssl_redirect_is_on_for_a_host_with_a_certificate() -> None:
    router, _ = run(_cert(), ingress("secure", "a.example", tls=True))
    status, where = location(router, "a.example", "/cart?x", HTTP)
    assert (status, where) == (308, "https://a.example/cart?x")
    assert upstream(router, "a.example", "/cart") == ("web", "/cart")


def test_ssl_redirect_false_serves_both_ports_and_force_redirects_without_tls() -> None:
    opt_out = ingress("opt-out", "a.example", tls=True, annotations={"ssl-redirect": "false"})
    forced = ingress("forced", "b.example", annotations={"force-ssl-redirect": "true"})
    router, _ = run(_cert(), opt_out, forced)
    assert not any(
        isinstance(f, RequestRedirect) for f in served(router, "a.example", "/", HTTP).rule.filters
    )
    assert location(router, "b.example", "/", HTTP) == (308, "https://b.example/")


# ---------------------------------------------------------------------------------------------
# Canaries


def test_canary_weight_splits_the_main_rule() -> None:
    main = ingress("main", "shop.example", at=0)
    canary = ingress(
        "canary",
        "shop.example",
        backend="canary",
        annotations={"canary": "true", "canary-weight": "25"},
    )
    router, _ = run(main, canary)
    picks = Counter(upstream(router, "shop.example", "/")[0] for _ in range(400))
    assert picks == {"web": 300, "canary": 100}


def test_canary_by_header_always_and_never_before_the_weights() -> None:
    main = ingress("main", "shop.example", at=0)
    canary = ingress(
        "canary",
        "shop.example",
        backend="canary",
        annotations={"canary": "true", "canary-by-header": "X-Canary", "canary-weight": "100"},
    )
    router, _ = run(main, canary)
    assert upstream(router, "shop.example", "/", **{"x-canary": "always"})[0] == "canary"
    assert upstream(router, "shop.example", "/", **{"x-canary": "never"})[0] == "web"
    assert upstream(router, "shop.example", "/", **{"x-canary": "other"})[0] == "canary"


def test_a_deleted_main_leaves_the_canary_unserved() -> None:
    canary = ingress("canary", "shop.example", annotations={"canary": "true"})
    router, result = run(canary)
    assert router.match(HTTPS, "shop.example", "GET", "/").status == 404
    assert any("no served Ingress has this host and path" in m for m in events(result, "canary"))


# ---------------------------------------------------------------------------------------------
# Class defaults


def _parameters(defaults: dict[str, str]) -> list[dict[str, Any]]:
    params = {
        "apiVersion": "coxswain-labs.dev/v1alpha1",
        "kind": "CoxswainIngressClassParameters",
        "metadata": {"name": "defaults"},
        "spec": {"defaultAnnotations": {P + k: v for k, v in defaults.items()}},
    }
    return [ingress_class("compat", "defaults"), params]


def test_default_annotations_lie_under_the_ingress_own() -> None:
    defaults = _parameters({"rewrite-target": "/", "x-forwarded-prefix": "/from-class"})
    inherits = ingress("inherits", "a.example", "/a", cls="compat")
    overrides = ingress(
        "overrides", "b.example", "/b", cls="compat", annotations={"rewrite-target": "/b-own"}
    )
    router, _ = run(*defaults, inherits, overrides)
    assert upstream(router, "a.example", "/a/x") == ("web", "/")
    assert upstream(router, "b.example", "/b/x") == ("web", "/b-own")
    prefix = [
        f for f in served(router, "b.example", "/b").rule.filters if not isinstance(f, URLRewrite)
    ]
    assert [h for f in prefix for h in getattr(f, "set", ())] == [
        ("X-Forwarded-Prefix", "/from-class")
    ]


def test_a_refused_default_refuses_every_ingress_of_the_class_and_says_whose_it_is() -> None:
    router, result = run(
        *_parameters({"limit-rate": "100"}), ingress("i", "a.example", cls="compat")
    )
    assert router.match(HTTPS, "a.example", "GET", "/").status == 404
    [message] = events(result, "i")
    assert "limit-rate" in message and "default of IngressClass compat" in message
    assert "not supported yet" in message and "not served" in message


# ---------------------------------------------------------------------------------------------
# Refusals


@pytest.mark.parametrize(
    ("annotations", "path", "said"),
    [
        pytest.param(
            {"configuration-snippet": "deny all;"}, "/", "snippets are never run", id="snippet"
        ),
        pytest.param({"server-snippet": "x"}, "/", "snippets are never run", id="server-snippet"),
        pytest.param({"auth-snippet": "x"}, "/", "snippets are never run", id="auth-snippet"),
        pytest.param({"stream-snippet": "x"}, "/", "snippets are never run", id="stream-snippet"),
        pytest.param(
            {"auth-url": "http://auth.example/check"},
            "/",
            "does not name a Service",
            id="auth-url-outside-the-cluster",
        ),
        pytest.param(
            {"auth-url": "https://auth.ns.svc/"}, "/", "not supported yet", id="auth-url-https"
        ),
        pytest.param({"auth-type": "digest"}, "/", "digest", id="digest-auth"),
        pytest.param(
            {"auth-type": "basic", "auth-secret": "missing"}, "/", "not found", id="no-secret"
        ),
        pytest.param({"limit-rate": "100"}, "/", "not supported yet", id="bandwidth-not-yet"),
        pytest.param({"limit-rps": "many"}, "/", "not a whole number", id="bad-rate"),
        pytest.param({"whitelist-source-range": "10.0.0.0/33"}, "/", "not a CIDR", id="bad-range"),
        pytest.param({"affinity": "ip"}, "/", "is not cookie", id="affinity-not-cookie"),
        pytest.param({"proxy-body-size": "8 megs"}, "/", "not an nginx size", id="bad-size"),
        pytest.param(
            {"backend-protocol": "HTTPS", "proxy-ssl-secret": "shop/s"},
            "/",
            "without verifying",
            id="proxy-ssl-verify-off",
        ),
        pytest.param(
            {"backend-protocol": "HTTPS", "proxy-ssl-secret": "shop/s", "proxy-ssl-verify": "on"},
            "/",
            "needs proxy-ssl-name",
            id="proxy-ssl-no-name",
        ),
        pytest.param(
            {
                "backend-protocol": "HTTPS",
                "proxy-ssl-secret": "other/s",
                "proxy-ssl-verify": "on",
                "proxy-ssl-name": "web.shop",
            },
            "/",
            "only the Ingress's own namespace",
            id="proxy-ssl-other-namespace",
        ),
        pytest.param(
            {"auth-tls-secret": "other/ca"},
            "/",
            "only the Ingress's own namespace",
            id="auth-tls-other-namespace",
        ),
        pytest.param({"auth-tls-secret": "missing"}, "/", "not found", id="auth-tls-no-secret"),
        pytest.param(
            {"auth-tls-secret": "ca", "auth-tls-verify-client": "optional_no_ca"},
            "/",
            "no CA of auth-tls-secret signed",
            id="auth-tls-optional-no-ca",
        ),
        pytest.param(
            {"auth-tls-secret": "ca", "auth-tls-error-page": "/denied"},
            "/",
            "internal redirect",
            id="auth-tls-error-page-path",
        ),
        pytest.param(
            {"auth-tls-secret": "ca", "auth-tls-verify-client": "off", "auth-tls-match-cn": "CN=a"},
            "/",
            "every request 403",
            id="auth-tls-match-cn-unasked",
        ),
        pytest.param({"proxy-read-timeout": "ten"}, "/", "not a whole number", id="bad-number"),
        pytest.param({"use-regex": "true"}, "/a(", "not a regular expression", id="bad-regex"),
        pytest.param(
            {"permanent-redirect": "ftp://x"}, "/", "not an http or https URL", id="bad-url"
        ),
        pytest.param({"rewrite-target": "/$host"}, "/", "nginx variable", id="rewrite-variable"),
        pytest.param({"backend-protocol": "FCGI"}, "/", "does not speak", id="fastcgi"),
    ],
)
def test_a_refused_annotation_leaves_the_ingress_unserved(
    annotations: dict[str, str], path: str, said: str
) -> None:
    router, result = run(ingress("refused", "r.example", path, annotations=annotations))
    for port in (HTTP, HTTPS):
        assert router.match(port, "r.example", "GET", "/").status == 404
    messages = events(result, "refused")
    assert [e.reason for e in result.events if e.ref.name == "refused"] == ["InvalidAnnotation"]
    assert said in messages[0] and "not served" in messages[0]


def test_ignored_and_unknown_annotations_are_served_and_told() -> None:
    annotations = {"proxy-buffering": "off", "no-such-thing": "1", "proxy-connect-timeout": "3"}
    router, result = run(ingress("told", "t.example", annotations=annotations))
    assert upstream(router, "t.example", "/") == ("web", "/")
    messages = events(result, "told")
    assert len(messages) == 3 and all("is ignored" in m for m in messages)
    assert any(P + "no-such-thing" in m and "unknown" in m for m in messages)


def test_other_prefixes_are_not_ours_to_judge() -> None:
    obj = ingress("plain", "p.example")
    obj["metadata"]["annotations"] = {"example.com/team": "a", "kubernetes.io/ingress.class": "x"}
    obj["spec"]["ingressClassName"] = "coxswain"
    _, result = run(obj)
    assert events(result, "plain") == []
