"""The migration report's HTTPRoutes and CoxswainPolicies: the shapes a migration needs, and
that they translate.

Covers the route per listener where ssl-redirect applies (the ACME path served on `http`),
app-root first, a rewrite with captures left out with a note and one without kept, a canary's
header rules ahead of its main's weighted rule, a refused Ingress getting no route, an
Ingress of another controller's class read as if it were ours, and auth-tls-* as the Gateway's
frontend validation (verify "on" alone; notes for the rest). Each report's HTTPRoutes are
translated beside a Gateway and must be accepted; for each policy annotation case, the
reported CoxswainPolicy must be accepted and give the routes' rules the very policy the
annotations give the Ingress's paths. The CLI wiring is in cli_test.py; the controller API's
report over the watch cache in api/migration_test.py.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
import yaml

from coxswain_controller.translate import Inputs, Options, translate
from coxswain_controller.translate.goldens import TESTDATA
from coxswain_controller.translate.ingress.report import migration_report
from coxswain_controller.translate.render import render
from coxswain_controller.translate.result import PolicyVerdict
from coxswain_routing import ClientCaStore, ClientValidationMode, HostRoutes

P = "nginx.ingress.kubernetes.io/"
CASES = ("ingress-nginx-ssl-redirect", "ingress-nginx-rewrite", "ingress-nginx-canary")


def case(name: str, *edits: tuple[str, str]) -> list[dict[str, Any]]:
    text = (TESTDATA / name / "input.yaml").read_text()
    for old, new in edits:
        text = text.replace(old, new)
    return list(yaml.safe_load_all(text))


def entries(*names: str, objects: list[dict[str, Any]] | None = None) -> dict[str, dict[str, Any]]:
    objects = objects or [o for n in names for o in case(n)]
    return {e["ingress"]: e for e in migration_report(objects, Options(), gateway=("gw", "gw"))}


def rules(entry: dict[str, Any], route: str) -> list[dict[str, Any]]:
    [found] = [r for r in entry["httpRoutes"] if r["metadata"]["name"] == route]
    return list(found["spec"]["rules"])


def test_ssl_redirect_splits_the_host_by_listener() -> None:
    report = entries("ingress-nginx-ssl-redirect")
    secure = report["shop/secure"]
    listeners = [r["spec"]["parentRefs"][0].get("sectionName") for r in secure["httpRoutes"]]
    assert listeners == ["http", "https"]
    [redirect] = rules(secure, "secure-http")
    assert redirect["filters"] == [
        {"type": "RequestRedirect", "requestRedirect": {"scheme": "https", "statusCode": 308}}
    ]
    assert any("on by default" in n for n in secure["notes"])
    # The ACME path on the same host is not redirected: its route takes both listeners.
    for plain in ("shop/challenge", "shop/plain"):
        [route] = report[plain]["httpRoutes"]
        assert "sectionName" not in route["spec"]["parentRefs"][0]


def test_rewrites_app_root_and_regex_paths() -> None:
    report = entries("ingress-nginx-rewrite")
    [api] = rules(report["shop/api"], "api")
    assert "filters" not in api  # captures: no Gateway API filter says it
    assert any("no Gateway API filter" in n for n in report["shop/api"]["notes"])
    [static] = rules(report["shop/static"], "static")
    assert static["filters"] == [
        {
            "type": "URLRewrite",
            "urlRewrite": {"path": {"type": "ReplaceFullPath", "replaceFullPath": "/assets"}},
        }
    ]
    root, rest = rules(report["shop/dashboard"], "dashboard")
    assert root["matches"] == [{"path": {"type": "Exact", "value": "/"}}]
    assert rest["matches"][0]["path"] == {"type": "PathPrefix", "value": "/"}


def test_a_canary_is_folded_into_its_main() -> None:
    report = entries("ingress-nginx-canary")
    always, never, split = rules(report["shop/main-b"], "main-b")
    assert always["matches"][0]["headers"] == [{"name": "x-canary", "value": "always"}]
    assert never["matches"][0]["headers"] == [{"name": "x-canary", "value": "never"}]
    assert split["backendRefs"] == [{"name": "web", "port": 80}]
    assert "httpRoutes" not in report["shop/by-weight"]
    assert report["shop/by-weight"]["served"] is True
    assert report["shop/by-cookie"]["served"] is False
    assert "httpRoutes" not in report["shop/by-cookie"]


def test_an_ingress_of_another_class_is_read_as_ours() -> None:
    objects = [o for o in case("ingress-nginx-rewrite") if o["kind"] != "IngressClass"]
    for obj in objects:
        if obj["kind"] == "Ingress":
            obj["spec"]["ingressClassName"] = "nginx"
    report = {e["ingress"]: e for e in migration_report(objects, Options())}
    assert "nginx (not Coxswain's" in report["shop/api"]["ingressClass"]
    assert report["shop/api"]["served"] is True


def test_every_reported_route_is_accepted_beside_a_gateway() -> None:
    for name in CASES:
        report = entries(name)
        routes = [r for e in report.values() for r in e.get("httpRoutes", [])]
        services = [o for o in case(name) if o["kind"] in ("Service", "Secret")]
        listeners = [
            {
                "name": n,
                "port": p,
                "protocol": "HTTP",
                "allowedRoutes": {"namespaces": {"from": "All"}},
            }
            for n, p in (("http", 80), ("https", 8443))
        ]
        controller = "coxswain-labs.dev/gateway-controller"
        gateway = [
            {"apiVersion": "gateway.networking.k8s.io/v1", "kind": "GatewayClass",
             "metadata": {"name": "c"}, "spec": {"controllerName": controller}},
            {"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
             "metadata": {"name": "gw", "namespace": "gw"},
             "spec": {"gatewayClassName": "c", "listeners": listeners}},
        ]  # fmt: skip
        result = translate(Inputs.from_objects([*gateway, *services, *routes]), Options())
        statuses = render(result, Options().gateway_controller)["status"]
        accepted = {
            s["object"]: [
                c["status"]
                for parent in s["status"]["parents"]
                for c in parent["conditions"]
                if c["type"] == "Accepted"
            ]
            for s in statuses
            if s["object"].startswith("HTTPRoute")
        }
        assert len(accepted) == len(routes), name
        assert all(v and set(v) == {"True"} for v in accepted.values()), (name, accepted)


def test_one_ingress_with_a_redirected_and_an_acme_path() -> None:
    objects = case("ingress-nginx-ssl-redirect")
    [secure] = [o for o in objects if o["metadata"]["name"] == "secure"]
    acme = dict(secure["spec"]["rules"][0]["http"]["paths"][0])
    acme = {**acme, "path": "/.well-known/acme-challenge/x", "pathType": "Exact"}
    secure["spec"]["rules"][0]["http"]["paths"].append(acme)
    report = {e["ingress"]: e for e in migration_report(objects, Options())}
    redirect, challenge = rules(report["shop/secure"], "secure-http")
    assert redirect["filters"][0]["type"] == "RequestRedirect"
    assert challenge["matches"][0]["path"]["value"] == "/.well-known/acme-challenge/x"
    assert "filters" not in challenge and challenge["backendRefs"] == [{"name": "web", "port": 80}]


POLICY_CASES = [
    f"ingress-nginx-policy-{name}"
    for name in ("basic-auth", "body-size", "limits", "source-ranges", "external-auth", "affinity")
]


def _gateway_objects() -> list[dict[str, Any]]:
    controller = "coxswain-labs.dev/gateway-controller"
    listener = {"name": "http", "port": 80, "protocol": "HTTP",
                "allowedRoutes": {"namespaces": {"from": "All"}}}  # fmt: skip
    return [
        {"apiVersion": "gateway.networking.k8s.io/v1", "kind": "GatewayClass",
         "metadata": {"name": "c"}, "spec": {"controllerName": controller}},
        {"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
         "metadata": {"name": "gw", "namespace": "gw"},
         "spec": {"gatewayClassName": "c", "listeners": [listener]}},
    ]  # fmt: skip


def _policies(result: Any, kind: str, names: set[str]) -> dict[str, Any]:
    """host -> the policy of the rules of `kind` named `names` (one per host here)."""
    found: dict[str, Any] = {}
    for resources in result.snapshots.values():
        for resource in resources:
            if isinstance(resource, HostRoutes):
                for rule in resource.rules:
                    if rule.id.kind == kind and rule.id.name in names:
                        found[resource.host] = _same_host(rule.policy)
    return found


def _same_host(policy: Any) -> Any:
    # The auth request's Host: a policy names the Service by its full cluster name where an
    # auth-url may shorten it (name.namespace.svc); the same Service either way.
    if policy is None or policy.external_auth is None:
        return policy
    return dataclasses.replace(
        policy, external_auth=dataclasses.replace(policy.external_auth, host="")
    )


# A CoxswainPolicy's externalAuth names a Service of its own namespace: the case's auth Service
# moved next to its Ingresses.
SAME_NAMESPACE = ((".auth.svc", ".shop.svc"), ("namespace: auth", "namespace: shop"))


@pytest.mark.parametrize("name", POLICY_CASES)
def test_the_reported_policy_gives_the_routes_what_the_annotations_give_the_ingress(
    name: str,
) -> None:
    assert _reported_policies_hold(case(name, *SAME_NAMESPACE)), name


def _reported_policies_hold(objects: list[dict[str, Any]]) -> int:
    """How many reported CoxswainPolicies, applied with their routes beside a Gateway, give
    the routes' rules the policy the Ingress's rules get."""
    report = entries(objects=objects)
    plain = translate(Inputs.from_objects(objects), Options())
    kept = [o for o in objects if o["kind"] in ("Service", "EndpointSlice", "Secret")]
    checked = 0
    for entry in report.values():
        # An auth Service that is not found: the Ingress answers 500, a policy is refused.
        if "coxswainPolicies" not in entry or entry.get("problems"):
            continue
        manifests = entry["httpRoutes"] + entry["coxswainPolicies"]
        result = translate(Inputs.from_objects([*_gateway_objects(), *kept, *manifests]), Options())
        [verdict] = [v for v in result.verdicts if isinstance(v, PolicyVerdict)]
        assert verdict.ancestors and all(
            c.status for a in verdict.ancestors for c in a.conditions
        ), (entry["ingress"], verdict)
        routes = {r["metadata"]["name"] for r in entry["httpRoutes"]}
        expected = _policies(plain, "Ingress", {entry["ingress"].split("/")[1]})
        assert _policies(result, "HTTPRoute", routes) == expected, entry["ingress"]
        checked += 1
    return checked


# ingress-nginx's oauth2-proxy example without its certificate (the test's Gateway has an http
# listener only).
NO_TLS = (("  tls:\n  - hosts:\n    - dash.example.com\n    secretName: wild\n", ""),)


def test_an_auth_url_of_host_is_reported_as_the_service_serving_its_path() -> None:
    report = entries(objects=case("ingress-nginx-oauth2-self-host", *NO_TLS))
    dashboard = report["kube-system/dashboard"]
    [policy] = dashboard["coxswainPolicies"]
    external = policy["spec"]["externalAuth"]
    assert external["backendRef"] == {"name": "oauth2-proxy", "port": 4180}
    assert external["path"] == "/oauth2/auth"
    assert any("Host is then the Service's name" in n for n in dashboard["notes"])
    # The Ingress serving /oauth2 is reported as it is, with no policy.
    assert "coxswainPolicies" not in report["kube-system/oauth2-proxy"]
    lonely = report["kube-system/lonely"]
    assert not lonely["served"] and "httpRoutes" not in lonely
    assert any("https://lonely.example.com/oauth2/auth" in p for p in lonely["problems"])
    assert _reported_policies_hold(case("ingress-nginx-oauth2-self-host", *NO_TLS)) == 1


def test_an_auth_url_of_host_served_by_two_services_gets_no_policy() -> None:
    objects = case("ingress-nginx-oauth2-self-host", *NO_TLS)
    [dashboard] = [o for o in objects if o["metadata"]["name"] == "dashboard"]
    [proxy] = [
        o for o in objects if o["kind"] == "Ingress" and o["metadata"]["name"] == "oauth2-proxy"
    ]
    second = yaml.safe_load(yaml.safe_dump(proxy["spec"]["rules"][0]))
    second["host"] = "two.example.com"
    second["http"]["paths"][0]["backend"]["service"]["name"] = "kubernetes-dashboard"
    second["http"]["paths"][0]["backend"]["service"]["port"]["number"] = 80
    proxy["spec"]["rules"].append(second)
    dashboard["spec"]["rules"].append({**dashboard["spec"]["rules"][0], "host": "two.example.com"})
    entry = entries(objects=objects)["kube-system/dashboard"]
    assert entry["served"] and "coxswainPolicies" not in entry
    assert any("different Services" in n for n in entry["notes"])


def test_a_reported_policy_whose_auth_service_is_missing_says_so() -> None:
    objects = case("ingress-nginx-policy-external-auth", *SAME_NAMESPACE)
    gone = entries(objects=objects)["shop/gone"]
    assert gone["coxswainPolicies"][0]["spec"]["externalAuth"]["backendRef"]["name"] == "nothing"
    assert any("apply these routes once it exists" in n for n in gone["notes"])


def test_proxy_ssl_is_reported_as_a_backend_tls_policy_that_translates() -> None:
    objects = case("ingress-nginx-proxy-ssl")
    report = entries(objects=objects)
    [policy] = report["shop/verified"]["backendTLSPolicies"]
    assert policy["spec"]["validation"] == {
        "caCertificateRefs": [{"group": "", "kind": "Secret", "name": "backend-ca"}],
        "hostname": "web.shop.internal",
    }
    assert any("clientCertificateRef" in n for n in report["shop/mtls"]["notes"])
    assert "backendTLSPolicies" not in report["shop/unverified"]
    # The policy gives the backend the very TLS the annotations give it.
    routes = [r for r in report["shop/verified"]["httpRoutes"]]
    gateway = {
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "Gateway",
        "metadata": {"name": "gw", "namespace": "gw"},
        "spec": {
            "gatewayClassName": "coxswain",
            "listeners": [
                {"name": "http", "port": 80, "protocol": "HTTP",
                 "allowedRoutes": {"namespaces": {"from": "All"}}},
            ],
        },
    }  # fmt: skip
    gateway_class = {
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "GatewayClass",
        "metadata": {"name": "coxswain"},
        "spec": {"controllerName": Options().gateway_controller},
    }
    kept = [o for o in objects if o["kind"] in ("Service", "Secret")]
    result = translate(
        Inputs.from_objects([*kept, gateway_class, gateway, *routes, policy]), Options()
    )
    tls = {
        b.tls
        for resources in result.snapshots.values()
        for r in resources
        if isinstance(r, HostRoutes)
        for rule in r.rules
        for b in rule.backends
    }
    [served] = tls
    assert served is not None and served.sni == "web.shop.internal" and served.ca_bundle_pem


def test_ssl_passthrough_is_reported_as_tls_routes() -> None:
    report = entries("ingress-nginx-ssl-passthrough")
    passed = report["shop/pass"]
    assert passed["served"] and "httpRoutes" not in passed
    [route] = passed["tlsRoutes"]
    assert route["spec"]["hostnames"] == ["pass.example.com"]
    assert route["spec"]["rules"] == [{"backendRefs": [{"name": "secure", "port": 443}]}]
    assert route["spec"]["parentRefs"][0]["sectionName"] == "tls-passthrough"
    assert report["shop/named"]["tlsRoutes"][0]["spec"]["rules"][0]["backendRefs"][0]["port"] == 443


def test_auth_tls_is_reported_as_the_gateways_frontend_validation_that_translates() -> None:
    objects = case("ingress-nginx-auth-tls", ("verify-client: optional", 'verify-client: "on"'))
    [entry] = migration_report(objects, Options(), gateway=("shop", "gw"))
    [patch] = entry["gatewayPatches"]
    assert patch["spec"]["tls"]["frontend"]["default"]["validation"] == {
        "caCertificateRefs": [
            {"group": "", "kind": "Secret", "name": "client-ca", "namespace": "shop"}
        ],
        "mode": "AllowValidOnly",
    }
    said = " ".join(entry["notes"])
    assert "per Gateway port" in said
    assert "verify-depth, match-cn, error-page, pass-certificate-to-upstream" in said
    gateway = {
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "Gateway",
        "metadata": {"name": "gw", "namespace": "shop"},
        "spec": {
            "gatewayClassName": "coxswain",
            "listeners": [{"name": "https", "port": 443, "protocol": "HTTPS",
                           "tls": {"certificateRefs": [{"name": "wild"}]}}],
            **patch["spec"],
        },
    }  # fmt: skip
    gateway_class = {
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "GatewayClass",
        "metadata": {"name": "coxswain"},
        "spec": {"controllerName": Options().gateway_controller},
    }
    kept = [o for o in objects if o["kind"] in ("Service", "Secret")]
    result = translate(Inputs.from_objects([*kept, gateway_class, gateway]), Options())
    [store] = [r for rs in result.snapshots.values() for r in rs if isinstance(r, ClientCaStore)]
    assert store.mode is ClientValidationMode.ALLOW_VALID_ONLY and store.sources == (
        "Secret shop/client-ca",
    )


def test_optional_and_off_client_certificates_get_notes_and_no_patch() -> None:
    report = entries(objects=case("ingress-nginx-auth-tls"))
    optional = report["shop/mtls"]
    assert "gatewayPatches" not in optional
    assert any('"optional" has no Gateway API equivalent' in n for n in optional["notes"])
    refused = entries("ingress-nginx-auth-tls-refused")["shop/verify-off"]
    assert any("asks for no certificate" in n for n in refused["notes"])
