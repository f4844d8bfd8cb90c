"""The Helm chart (deploy/helm/coxswain): lint, render, and what every rendering must hold.

Covers, over every case of `chart.CASES` (defaults, dedicated-only, ClusterIP VIPs,
Ingress-only, unprivileged ports with the UI's token): `helm lint --strict`; that every
container's args are accepted by its service's own command line parser; the wiring (each
endpoint a component dials is a Service selecting the pods that listen there, with the leader's
label where spec 001 says; certificate names cover the names dialled); spec 000's mounts for the
shared proxy at the paths the proxy reads by default; the security contexts (non-root, read-only
root, every capability dropped, NET_BIND_SERVICE exactly where a port below 1024 is bound);
probes on the admin port; resources and topology spread; who holds RBAC (proxies none; the UI
only the operator API's virtual resource, and only when asked); the identity service's rules;
the per-case differences (PDB and Services at 0 replicas, the VIP type, the classes); the values
schema refusing NodePort; the chart's CRDs being deploy/crds/'s; NOTES saying how to wait for
Programmed. The controller's rules are rbac_test.py's; applying to the emulator is apply_test's.
"""

from __future__ import annotations

import argparse
import functools
import tempfile
from pathlib import Path
from typing import Any

import pytest

from coxswain_controller import cli as controller_cli
from coxswain_controller.leader import pod as leader_pod
from coxswain_identity import cli as identity_cli
from coxswain_proxy import cli as proxy_cli
from coxswain_ui import cli as ui_cli
from helm import chart

CASE_IDS = list(chart.CASES)
Obj = dict[str, Any]


@pytest.fixture(scope="module", params=CASE_IDS)
def case(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@functools.cache
def _rendered(case: str) -> chart.Rendered:
    return chart.render(chart.CASES[case])


@pytest.fixture(scope="module")
def rendered(case: str) -> chart.Rendered:
    return _rendered(case)


def _parse(deployment: str, args: list[str]) -> argparse.Namespace:
    """A container's args as its service's own parser reads them (SystemExit if refused)."""
    if deployment == "coxswain-controller":
        return controller_cli.parse(args)
    if deployment == "coxswain-identity":
        return identity_cli._parser().parse_args(args)
    if deployment == "coxswain-proxy":
        parser = proxy_cli._parser()
        parsed = parser.parse_args(args)
        proxy_cli._check(parser, parsed)
        return parsed
    assert deployment == "coxswain-ui", deployment
    return ui_cli._parser().parse_args(args)


def test_lint_is_clean(case: str) -> None:
    with tempfile.TemporaryDirectory() as directory:
        values = chart.values_file(chart.CASES[case].values, Path(directory))
        done = chart.helm("lint", "--strict", str(chart.CHART), "--values", str(values))
    assert "0 chart(s) failed" in done.stdout, done.stdout


def test_every_container_is_accepted_by_its_service(rendered: chart.Rendered) -> None:
    assert rendered.names("Deployment") == {
        "coxswain-controller",
        "coxswain-identity",
        "coxswain-proxy",
        "coxswain-ui",
    }
    for name in rendered.names("Deployment"):
        parsed = _parse(name, rendered.args(name))
        assert parsed.command == "serve"
        admin = rendered.container(name)["ports"][0]
        assert admin == {"name": "admin", "containerPort": parsed.admin_port, "protocol": "TCP"}


def _service_target(rendered: chart.Rendered, endpoint: str) -> tuple[Obj, Obj, str]:
    """The Service an endpoint (host:port, https://host:port) names, its port, and the host."""
    host_port = endpoint.removeprefix("https://")
    host, _, port = host_port.rpartition(":")
    name, namespace, svc = host.split(".")
    assert (namespace, svc) == (chart.NAMESPACE, "svc"), endpoint
    service = rendered.get("Service", name)
    (service_port,) = [p for p in service["spec"]["ports"] if p["port"] == int(port)]
    return service, service_port, host


def _serves(rendered: chart.Rendered, service: Obj, port: Obj, deployment: str) -> None:
    """The Service selects the Deployment's pods (the leader's label aside) and its port is
    one they listen on."""
    template = rendered.get("Deployment", deployment)["spec"]["template"]
    selector = dict(service["spec"]["selector"])
    selector.pop(leader_pod.LEADER_LABEL, None)
    assert selector.items() <= template["metadata"]["labels"].items()
    (container,) = template["spec"]["containers"]
    assert port["targetPort"] in {p["name"] for p in container["ports"]}


def test_proxies_dial_services_that_reach_the_leader_and_the_identity_service(
    rendered: chart.Rendered,
) -> None:
    proxy = _parse("coxswain-proxy", rendered.args("coxswain-proxy"))
    controller = _parse("coxswain-controller", rendered.args("coxswain-controller"))
    identity = _parse("coxswain-identity", rendered.args("coxswain-identity"))
    # The shared proxy and the dedicated ones the controller provisions dial the same two.
    assert proxy.discovery_endpoint == controller.proxy_discovery_endpoint
    assert proxy.discovery_bootstrap_endpoint == controller.proxy_bootstrap_endpoint

    discovery, port, host = _service_target(rendered, proxy.discovery_endpoint)
    assert discovery["metadata"]["name"] == "coxswain-controller-discovery"  # spec 001
    # Spec 001: "the leader labels its own pod ... so the coxswain-controller-discovery Service
    # routes dials to it".
    assert discovery["spec"]["selector"][leader_pod.LEADER_LABEL] == "true"
    assert port["port"] == controller.discovery_port == 50051
    _serves(rendered, discovery, port, "coxswain-controller")
    assert host in controller.discovery_dns.split(",")

    bootstrap, port, host = _service_target(rendered, proxy.discovery_bootstrap_endpoint)
    assert bootstrap["metadata"]["name"] == "coxswain-controller-discovery-bootstrap"
    assert leader_pod.LEADER_LABEL not in bootstrap["spec"]["selector"]  # every replica
    assert port["port"] == identity.port == 50052
    _serves(rendered, bootstrap, port, "coxswain-identity")
    assert host in identity.serving_dns


def test_the_ui_reads_the_leaders_api(rendered: chart.Rendered) -> None:
    ui = _parse("coxswain-ui", rendered.args("coxswain-ui"))
    api, port, _ = _service_target(rendered, ui.controller_url.removeprefix("http://"))
    assert api["spec"]["selector"][leader_pod.LEADER_LABEL] == "true"
    _serves(rendered, api, port, "coxswain-controller")
    # Loopback by default (docs/ui.md): reached with kubectl port-forward.
    assert ui.address == "127.0.0.1"


def test_the_identities_agree(rendered: chart.Rendered) -> None:
    controller = _parse("coxswain-controller", rendered.args("coxswain-controller"))
    identity = _parse("coxswain-identity", rendered.args("coxswain-identity"))
    proxy_pod = rendered.get("Deployment", "coxswain-proxy")["spec"]["template"]
    shared = f"{chart.NAMESPACE}/{proxy_pod['spec']['serviceAccountName']}"
    assert controller.shared_proxy_identity == shared
    shared_ref = identity.shared_proxy_service_account
    assert f"{shared_ref.namespace}/{shared_ref.name}" == shared
    assert controller.ca_secret == f"{identity.ca_secret.namespace}/{identity.ca_secret.name}"
    assert controller.trust_domain == identity.trust_domain
    # Spec 002: the VIP Services select the shared proxy pods by --shared-proxy-selector, which
    # the chart fills from the release; a selector matching no pod would serve nothing.
    labels = proxy_pod["metadata"]["labels"]
    assert dict(controller.shared_proxy_selector).items() <= labels.items()
    assert ("app.kubernetes.io/instance", chart.RELEASE) in controller.shared_proxy_selector
    assert ("app.kubernetes.io/component", "shared-proxy") in controller.shared_proxy_selector


def test_the_shared_proxy_mounts_what_spec_000_names(rendered: chart.Rendered) -> None:
    proxy = _parse("coxswain-proxy", rendered.args("coxswain-proxy"))
    pod = rendered.get("Deployment", "coxswain-proxy")["spec"]["template"]["spec"]
    # "Both proxy roles hold zero Kubernetes API credentials".
    assert pod["automountServiceAccountToken"] is False
    volumes = {v["name"]: v for v in pod["volumes"]}
    mounts = {m["mountPath"]: m for m in pod["containers"][0]["volumeMounts"]}
    # Spec 000: the token at /var/run/secrets/coxswain/discovery-token/token, audience
    # coxswain-discovery; the bundle at /var/run/secrets/coxswain/trust-bundle/ca.crt.
    assert proxy.token_path == "/var/run/secrets/coxswain/discovery-token/token"
    assert proxy.trust_bundle_path == "/var/run/secrets/coxswain/trust-bundle/ca.crt"
    token = mounts[str(Path(proxy.token_path).parent)]
    (source,) = volumes[token["name"]]["projected"]["sources"]
    assert source["serviceAccountToken"]["audience"] == "coxswain-discovery"
    assert source["serviceAccountToken"]["path"] == Path(proxy.token_path).name
    bundle = mounts[str(Path(proxy.trust_bundle_path).parent)]
    config_map = volumes[bundle["name"]]["configMap"]
    controller = _parse("coxswain-controller", rendered.args("coxswain-controller"))
    # The one the identity service publishes, which the controller copies for dedicated proxies.
    assert f"{chart.NAMESPACE}/{config_map['name']}" == controller.trust_bundle_configmap
    assert config_map["items"] == [{"key": "ca.crt", "path": Path(proxy.trust_bundle_path).name}]
    assert token["readOnly"] and bundle["readOnly"]


def _binds_low_port(container: Obj) -> bool:
    return any(p["containerPort"] < 1024 for p in container.get("ports") or [])


def test_every_pod_is_locked_down(rendered: chart.Rendered) -> None:
    for name, pod in rendered.pods():
        assert pod["securityContext"]["runAsNonRoot"] is True, name
        assert pod["securityContext"]["runAsUser"] > 0, name
        assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}, name
        for container in pod["containers"]:
            context = container["securityContext"]
            assert context["readOnlyRootFilesystem"] is True, name
            assert context["allowPrivilegeEscalation"] is False, name
            assert context["runAsNonRoot"] is True, name
            assert context["capabilities"]["drop"] == ["ALL"], name
            # NET_BIND_SERVICE only where a port below 1024 is asked for.
            added = context["capabilities"].get("add", [])
            assert added == (["NET_BIND_SERVICE"] if _binds_low_port(container) else []), name
        sysctls = pod["securityContext"].get("sysctls", [])
        low = any(_binds_low_port(c) for c in pod["containers"])
        unprivileged = {"name": "net.ipv4.ip_unprivileged_port_start", "value": "0"}
        assert sysctls == ([unprivileged] if low else []), name


def test_every_pod_is_probed_and_bounded(rendered: chart.Rendered) -> None:
    for name, pod in rendered.pods():
        (container,) = pod["containers"]
        assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "admin"}
        assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "admin"}
        assert container["resources"]["requests"]["memory"], name
        assert container["resources"]["limits"]["memory"], name
        if name != "coxswain-ui":  # one replica by default: nothing to spread
            keys = {c["topologyKey"] for c in pod["topologySpreadConstraints"]}
            assert keys == {"kubernetes.io/hostname", "topology.kubernetes.io/zone"}, name
            selector = rendered.get("Deployment", name)["spec"]["selector"]["matchLabels"]
            for constraint in pod["topologySpreadConstraints"]:
                assert constraint["labelSelector"]["matchLabels"].items() <= selector.items()


def _subjects(rendered: chart.Rendered) -> dict[str, set[str]]:
    """ServiceAccount name -> the roles bound to it (kind/name)."""
    bound: dict[str, set[str]] = {}
    for binding in rendered.all("RoleBinding") + rendered.all("ClusterRoleBinding"):
        for subject in binding["subjects"]:
            assert subject["kind"] == "ServiceAccount"
            assert subject["namespace"] == chart.NAMESPACE
            role = binding["roleRef"]
            bound.setdefault(subject["name"], set()).add(f"{role['kind']}/{role['name']}")
    return bound


def test_proxies_and_the_ui_hold_no_kubernetes_rbac(case: str, rendered: chart.Rendered) -> None:
    bound = _subjects(rendered)
    assert set(bound) <= {"coxswain-controller", "coxswain-identity", "coxswain-ui"}
    assert "coxswain-proxy" not in bound  # spec 001: "No ClusterRole or RoleBinding"
    if not chart.CASES[case].values.get("ui", {}).get("token", {}).get("enabled"):
        assert "coxswain-ui" not in bound
        return
    # Its own token: bound to the operator API's virtual resource only, nothing of the API's.
    (role,) = bound["coxswain-ui"]
    reader = rendered.get("ClusterRole", role.removeprefix("ClusterRole/"))
    assert reader["rules"] == [
        {
            "apiGroups": ["coxswain-labs.dev"],
            "resources": [f"controller-api/{area}" for area in controller_subresources()],
            "verbs": ["get"],
        }
    ]
    ui = _parse("coxswain-ui", rendered.args("coxswain-ui"))
    assert ui.controller_token_file == Path("/var/run/secrets/coxswain/ui-token/token")


def controller_subresources() -> tuple[str, ...]:
    from coxswain_controller.api import access

    return access.SUBRESOURCES


def _rules(role: Obj) -> set[tuple[str, str, str, str]]:
    return {
        (group, resource, name, verb)
        for rule in role["rules"]
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for name in rule.get("resourceNames") or ["*"]
        for verb in rule["verbs"]
    }


def test_the_identity_service_gets_its_token_review_and_its_ca_only(
    rendered: chart.Rendered,
) -> None:
    identity = _parse("coxswain-identity", rendered.args("coxswain-identity"))
    bound = _subjects(rendered)["coxswain-identity"]
    cluster = {r for r in bound if r.startswith("ClusterRole/")}
    (cluster_role,) = cluster
    assert _rules(rendered.get("ClusterRole", cluster_role.split("/", 1)[1])) == {
        ("authentication.k8s.io", "tokenreviews", "*", "create"),
        # Which ServiceAccounts may hold SVIDs ({gateway}-{gatewayclass}, spec 001).
        ("gateway.networking.k8s.io", "gateways", "*", "list"),
    }
    assert bound - cluster == {"Role/coxswain-identity"}
    role = rendered.get("Role", "coxswain-identity")
    secret = identity.ca_secret.name
    expected = {("", "secrets", secret, verb) for verb in ("get", "list", "watch")}
    expected |= {("", "secrets", "*", "create")}  # --ca-mode auto creates it
    expected |= {("", "configmaps", "coxswain-discovery-trust", v) for v in ("get", "update")}
    expected |= {("", "configmaps", "*", "create")}
    assert identity.ca_mode == "auto"
    assert _rules(role) == expected


def test_external_ca_mode_drops_secret_creation() -> None:
    rendered = chart.render(chart.Case({"identity": {"ca": {"mode": "external"}}}))
    rules = _rules(rendered.get("Role", "coxswain-identity"))
    assert ("", "secrets", "*", "create") not in rules
    assert ("", "secrets", "coxswain-discovery-ca", "get") in rules
    assert rendered.flag("coxswain-identity", "--ca-mode") == "external"


def test_defaults() -> None:
    rendered = _rendered("defaults")
    assert rendered.get("Deployment", "coxswain-controller")["spec"]["replicas"] == 2
    assert rendered.flag("coxswain-controller", "--leader-election-namespace") == chart.NAMESPACE
    assert rendered.get("Deployment", "coxswain-proxy")["spec"]["replicas"] == 2
    assert rendered.get("PodDisruptionBudget", "coxswain-proxy")["spec"]["maxUnavailable"] == 1
    assert rendered.get("Service", "coxswain-proxy")["spec"]["type"] == "LoadBalancer"
    assert rendered.flag("coxswain-controller", "--vip-service-type") == "LoadBalancer"
    published = f"{chart.NAMESPACE}/coxswain-proxy"
    assert rendered.flag("coxswain-controller", "--published-service") == published
    assert rendered.flag("coxswain-controller", "--shared-proxy-service") == published
    gateway_class = rendered.get("GatewayClass", "coxswain")
    assert gateway_class["spec"] == {
        "controllerName": "coxswain-labs.dev/gateway-controller",
        "description": "Coxswain (the shared proxy pool)",
    }
    assert rendered.get("IngressClass", "coxswain")["spec"] == {
        "controller": "coxswain-labs.dev/ingress-controller"
    }
    # Spec 002's fixed 80/443 Ingress listeners on the shared proxy pod.
    assert rendered.flag("coxswain-proxy", "--ingress-http-port") == "80"
    assert rendered.flag("coxswain-proxy", "--ingress-https-port") == "443"
    # A worker per CPU of the limit (2), not the node's count the container would see.
    assert rendered.flag("coxswain-proxy", "--workers") == "2"


def test_dedicated_only() -> None:
    rendered = _rendered("dedicated-only")
    # Spec 002: "the shared proxy Deployment is scaled to replicas: 0".
    assert rendered.get("Deployment", "coxswain-proxy")["spec"]["replicas"] == 0
    assert rendered.find("PodDisruptionBudget", "coxswain-proxy") is None
    assert rendered.find("Service", "coxswain-proxy") is None
    # "Classic Ingress is unavailable in this arrangement".
    assert rendered.all("IngressClass") == []
    assert rendered.flag("coxswain-controller", "--published-service") is None
    assert rendered.flag("coxswain-controller", "--shared-proxy-service") == ""
    # Every Gateway of the class opts into dedicated mode through its parameters.
    parameters = rendered.get("CoxswainGatewayParameters", "coxswain")
    assert parameters["spec"] == {"replicas": 2}
    assert rendered.get("GatewayClass", "coxswain")["spec"]["parametersRef"] == {
        "group": "coxswain-labs.dev",
        "kind": "CoxswainGatewayParameters",
        "name": "coxswain",
        "namespace": chart.NAMESPACE,
    }


def test_clusterip_vips() -> None:
    rendered = _rendered("clusterip-vips")
    assert rendered.flag("coxswain-controller", "--vip-service-type") == "ClusterIP"


def test_ingress_only() -> None:
    rendered = _rendered("ingress-only")
    # No Gateway API served: nothing of it rendered (it would fail to apply), Ingress served.
    groups = {doc["apiVersion"].split("/")[0] for doc in rendered.docs}
    assert "gateway.networking.k8s.io" not in groups
    assert "coxswain-labs.dev" not in groups
    assert rendered.get("IngressClass", "coxswain")
    assert rendered.get("Deployment", "coxswain-proxy")["spec"]["replicas"] == 2


def test_unprivileged_ports() -> None:
    rendered = _rendered("unprivileged-ports-ui-token")
    proxy = rendered.container("coxswain-proxy")
    assert "add" not in proxy["securityContext"]["capabilities"]
    assert rendered.flag("coxswain-controller", "--ingress-http-port") == "8080"
    assert rendered.flag("coxswain-proxy", "--ingress-https-port") == "8443"
    service = rendered.get("Service", "coxswain-proxy")
    assert {(p["port"], p["targetPort"]) for p in service["spec"]["ports"]} == {
        (80, "http"),
        (443, "https"),
    }


def test_the_schema_refuses_a_node_port_vip() -> None:
    case = chart.Case({"proxy": {"shared": {"vipServiceType": "NodePort"}}})
    with tempfile.TemporaryDirectory() as directory:
        done = chart.helm("template", *chart.template_args(case, Path(directory)), check=False)
    assert done.returncode != 0
    assert "/proxy/shared/vipServiceType" in done.stderr


def test_the_schema_refuses_an_unknown_value() -> None:
    case = chart.Case({"proxy": {"shared": {"replica": 3}}})
    with tempfile.TemporaryDirectory() as directory:
        done = chart.helm("template", *chart.template_args(case, Path(directory)), check=False)
    assert done.returncode != 0
    assert "replica" in done.stderr


def test_the_charts_crds_are_deploy_crds() -> None:
    shipped = {p.name: p.read_bytes() for p in chart.CRDS.glob("*.yaml")}
    bundled = {p.name: p.read_bytes() for p in (chart.CHART / "crds").glob("*.yaml")}
    assert bundled == shipped
    crds = chart.render(chart.Case(), "--include-crds").all("CustomResourceDefinition")
    assert {c["spec"]["names"]["kind"] for c in crds} == {
        "CoxswainGatewayParameters",
        "CoxswainIngressClassParameters",
        "CoxswainPolicy",
    }


def test_notes_say_how_to_wait_for_programmed() -> None:
    # `helm install --dry-run` takes no --api-versions: the class is asked for outright.
    case = chart.Case({"gatewayClass": {"create": True}}, gateway_api=False)
    with tempfile.TemporaryDirectory() as directory:
        done = chart.helm(
            "install", "--dry-run=client", *chart.template_args(case, Path(directory))
        )
    assert "kubectl -n <namespace> wait --for=condition=Programmed gateway/<name>" in done.stdout
    assert "kubectl wait --for=condition=Accepted gatewayclass/coxswain" in done.stdout
