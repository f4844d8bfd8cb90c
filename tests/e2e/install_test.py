"""End to end: the Helm chart installed into the emulator with RBAC enforced, and run.

`helm template` renders deploy/helm/coxswain with values fit for one machine (one identity and
one shared proxy, Ingress ports above 1024, the UI on its pod's address); kubectl applies the
CRDs, then everything else, to the devkit API emulator started with `--rbac`, which holds every
request with a token to the chart's Roles and bindings. The devkit node agent runs the chart's
Deployments as processes (each pod with its own loopback IP, the services that talk to the API
with their ServiceAccount's token, and the Services they dial by name relayed to their ready
endpoints), and the devkit load balancer gives each LoadBalancer Service its address. A Gateway
and an HTTPRoute from deploy/examples/demo are then applied beside two echo Deployments.

Covers: every Deployment becomes Available, the GatewayClass Accepted and the Gateway
Programmed, and requests over HTTP and HTTPS reach the echo pods through the Gateway's own
address; the two controllers elect one leader, which labels its pod, and the discovery Service
follows that label; every pod acts as its own ServiceAccount (the controller and identity with
an API token, the proxy and UI with none); a proxy's ServiceAccount token can read nothing (403
for every read, 401 for its discovery token); and a verb taken from the controller's
ClusterRole (watch on HTTPRoutes) makes restarted controllers unready, /readyz naming the verb
and the resource, without a restart loop, until the verb is given back. That the controller
needs no more than its chart role is what the rest shows: it runs the whole install with it.
Leaves out dedicated Gateways (tests/e2e/provisioning_test.py) and upgrades (tests/helm).
"""

from __future__ import annotations

import copy
import functools
import http.client
import json
import socket
import ssl
import subprocess
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import kubernetes
import pytest
import yaml

from coxswain_devkit import stack_objects as objects
from coxswain_devkit.apiserver import kubectl_tool
from coxswain_devkit.pki import CertificateAuthority
from coxswain_devkit.processes import ProcessError, ServiceProcess
from coxswain_devkit.stack import Launcher
from coxswain_devkit.traffic import FAILURES, pod
from coxswain_devkit.waiting import until
from helm import chart

WAIT = 90.0
NS = chart.NAMESPACE
DEMO = "demo"
HOST = "app.demo.example"
EXAMPLES = chart.ROOT / "deploy" / "examples" / "demo"
GATEWAY_LABEL = "gateway.networking.k8s.io/gateway-name"
LEADER_LABEL = "discovery.coxswain-labs.dev/leader"
CONTROLLER = "app.kubernetes.io/name=coxswain-controller"
ECHOES = ("echo-v1", "echo-v2")
RBAC = "rbac.authorization.k8s.io"
# One machine: one identity and one shared proxy with one worker, Ingress ports a non-root
# process may bind, the UI on its pod's address (the node gives each pod its own), and short
# Lease timings so a controller restarted by the test leads at once.
VALUES: dict[str, Any] = {
    "identity": {"replicas": 1},
    "proxy": {
        "shared": {"replicas": 1, "workers": 1, "ingress": {"httpPort": 8080, "httpsPort": 8443}}
    },
    "ui": {"address": "0.0.0.0"},
    "controller": {"leaderElection": {"leaseDuration": 4, "renewInterval": 1, "renewDeadline": 3}},
}
Obj = dict[str, Any]


def eventually(predicate: Callable[[], Any], what: str, timeout: float = WAIT) -> Any:
    return until(
        predicate,
        what,
        within=timeout,
        tolerate=(*FAILURES, kubernetes.client.ApiException, urllib.error.URLError),
    )


class Install:
    """The emulator (RBAC enforced), the load balancer and the node agent, each a process."""

    def __init__(self, launcher: Launcher, workdir: Path) -> None:
        self.launcher = launcher
        self.workdir = workdir
        self.processes: dict[str, ServiceProcess] = {}
        self.api_url = ""
        self.ca = CertificateAuthority.create("coxswain install e2e CA")
        self.rendered: list[Obj] = []  # the chart's objects, as applied

    def start(self) -> None:
        kubeconfig = self.workdir / "kubeconfig"
        line = self._run(
            "apiserver", "apiserver", "--address", "127.0.0.1", "--port", "0", "--rbac",
            "--gateway-api", "standard", "--kubeconfig-out", str(kubeconfig),
            listening="apiserver listening",
        )  # fmt: skip
        self.api_url = f"http://127.0.0.1:{line['port']}"
        self._kubectl = [str(kubectl_tool.kubectl()), "--kubeconfig", str(kubeconfig)]
        self._kubectl += ["--cache-dir", str(self.workdir / "kubectl-cache")]
        self._run("lb", "lb", "--api-server", self.api_url, listening="load balancer started")
        self._run(
            "node", "node", "--api-server", self.api_url, "--workdir", str(self.node_dir),
            "--probe-interval", "0.2", *self.launcher.node_runs(), listening="node agent started",
        )  # fmt: skip

    def stop(self) -> dict[str, int]:
        statuses = {}
        for name, process in reversed(list(self.processes.items())):
            try:  # the node agent stops its pods (each up to 10 s) before it exits
                statuses[name] = process.stop(grace=40.0 if name == "node" else 5.0)
            except ProcessError:
                statuses[name] = process.kill()
        return statuses

    @property
    def node_dir(self) -> Path:
        return self.workdir / "node"

    def _run(self, name: str, *args: str, listening: str) -> dict[str, Any]:
        process = ServiceProcess(self.launcher.argv("devkit", *args))
        self.processes[name] = process.start()
        return process.wait_for_msg(listening, timeout=WAIT)

    def kubectl(self, *args: str, stdin: str | None = None) -> str:
        done = subprocess.run(
            [*self._kubectl, *args],
            input=stdin,
            capture_output=True,
            text=True,
            timeout=WAIT + 30,
            check=False,
        )
        assert done.returncode == 0, f"kubectl {' '.join(args)}: {done.stderr}"
        return done.stdout

    def apply(self, docs: list[Obj]) -> str:
        return self.kubectl("apply", "-f", "-", stdin=yaml.safe_dump_all(docs))

    def client(self, token: str = "") -> kubernetes.client.ApiClient:
        configuration = kubernetes.client.Configuration(host=self.api_url)
        configuration.retries = 0
        if token:
            configuration.api_key = {"authorization": f"Bearer {token}"}
        return kubernetes.client.ApiClient(configuration)

    def pods(self, namespace: str, selector: str) -> list[Obj]:
        listed = self.kubectl("get", "pods", "-n", namespace, "-l", selector, "-o", "json")
        return list(json.loads(listed)["items"])

    def pod_dir(self, pod: Obj) -> Path:
        meta = pod["metadata"]
        return self.node_dir / f"{meta['namespace']}_{meta['name']}_{meta['uid'][:8]}"


# ------------------------------------------------------------------------------ the install


def _example(path: str, kind: str, name: str) -> Obj:
    docs = yaml.safe_load_all((EXAMPLES / path).read_text())
    (found,) = [d for d in docs if d and d["kind"] == kind and d["metadata"]["name"] == name]
    return dict(found)


def _echo(name: str) -> list[Obj]:
    """The example's Service `name`, given a selector, and an echo Deployment it selects."""
    service = _example("40-services.yaml", "Service", name)
    service["spec"]["selector"] = {"app": name}
    container = {
        "name": "echo",
        "image": "ghcr.io/coxswain-labs/coxswain-devkit-echo:dev",
        "args": ["--port", "8080"],
        "ports": [{"name": "http", "containerPort": 8080}],
    }
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": DEMO},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [container]},
            },
        },
    }
    return [service, deployment]


def _install_chart(install: Install) -> list[Obj]:
    docs = chart.render(chart.Case(VALUES), "--include-crds").docs
    install.apply([d for d in docs if d["kind"] == "CustomResourceDefinition"])
    install.kubectl("wait", "--for=condition=Established", "crd", "--all", "--timeout=60s")
    install.apply([{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}}])
    rest = [d for d in docs if d["kind"] != "CustomResourceDefinition"]
    out = install.apply(rest)
    assert out.count(" created") == len(rest), out  # every kind served, PDBs included
    return rest


def _install_example(install: Install) -> None:
    namespace = _example("00-namespace.yaml", "Namespace", DEMO)
    install.apply([namespace])
    secret = objects.tls_secret(DEMO, "demo-tls", install.ca, ["*.demo.example"])
    install.apply([secret, *(doc for name in ECHOES for doc in _echo(name))])
    gateway = _example("10-gateway.yaml", "Gateway", DEMO)
    install.apply([gateway, _example("20-routes.yaml", "HTTPRoute", "paths")])


@pytest.fixture(scope="module")
def install(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Install]:
    running = Install(Launcher.pex_files(Path(".")), tmp_path_factory.mktemp("install"))
    try:
        running.start()
        running.rendered = _install_chart(running)
        _install_example(running)
        yield running
    finally:
        statuses = running.stop()
    assert all(code == 0 for code in statuses.values()), statuses


# ------------------------------------------------------------------------------ helpers


def _rolled_out(install: Install) -> None:
    deployments = [
        (NS, d["metadata"]["name"]) for d in install.rendered if d["kind"] == "Deployment"
    ]
    for namespace, name in [*deployments, *((DEMO, echo) for echo in ECHOES)]:
        install.kubectl(
            "-n", namespace, "rollout", "status", f"deployment/{name}", f"--timeout={int(WAIT)}s"
        )


def _address(install: Install, port: int) -> tuple[str, int]:
    """The Gateway's own address for `port`: its Service's load balancer address."""

    def reached() -> tuple[str, int] | None:
        selector = f"{GATEWAY_LABEL}={DEMO}"
        listed = install.kubectl("get", "services", "-n", DEMO, "-l", selector, "-o", "json")
        for service in json.loads(listed)["items"]:
            found = objects.lb_reach(service, port)
            if found is not None:
                return found
        return None

    found: tuple[str, int] = eventually(reached, f"the Gateway's address for port {port}")
    return found


def _https_pod(address: tuple[str, int], ca: CertificateAuthority, path: str) -> str:
    """The echo pod answering `GET path` over TLS with SNI `HOST`, the CA trusted."""
    context = ssl.create_default_context(cadata=ca.certificate_pem.decode())
    with (
        socket.create_connection(address, timeout=10) as raw,
        context.wrap_socket(raw, server_hostname=HOST) as tls,
    ):
        tls.sendall(f"GET {path} HTTP/1.1\r\nHost: {HOST}\r\nConnection: close\r\n\r\n".encode())
        response = http.client.HTTPResponse(tls)
        response.begin()
        body = json.loads(response.read())
    assert response.status == 200, body
    return str(body["pod"])


def _status(call: Callable[[], Any]) -> int:
    try:
        call()
    except kubernetes.client.ApiException as err:
        return int(err.status)
    return 200


def _readyz(pod_: Obj) -> tuple[int, str]:
    url = f"http://{pod_['status']['podIP']}:9090/readyz"
    try:
        with urllib.request.urlopen(url, timeout=5) as answer:
            return int(answer.status), answer.read().decode()
    except urllib.error.HTTPError as err:
        return int(err.code), err.read().decode()


def _writable(obj: Obj) -> Obj:
    """`obj` as an unconditional replacement (no resourceVersion to conflict on)."""
    changed = copy.deepcopy(obj)
    for key in ("resourceVersion", "managedFields", "uid", "creationTimestamp"):
        changed["metadata"].pop(key, None)
    return changed


def _without(role: Obj, resource: str, verb: str) -> Obj:
    """`role` as a replacement with `verb` taken away from `resource` alone."""
    changed = _writable(role)
    rules = []
    for rule in changed["rules"]:
        if resource in rule.get("resources", []) and verb in rule.get("verbs", []):
            rest = [r for r in rule["resources"] if r != resource]
            if rest:
                rules.append({**rule, "resources": rest})
            rules.append(
                {**rule, "resources": [resource], "verbs": [v for v in rule["verbs"] if v != verb]}
            )
        else:
            rules.append(rule)
    changed["rules"] = rules
    return changed


# ------------------------------------------------------------------------------ scenarios


def test_the_chart_runs_and_a_gateway_from_the_examples_serves(install: Install) -> None:
    _rolled_out(install)
    install.kubectl("wait", "--for=condition=Accepted", "gatewayclass/coxswain", "--timeout=60s")
    # What the chart's NOTES tell an operator to run.
    install.kubectl(
        "-n", DEMO, "wait", "--for=condition=Programmed", f"gateway/{DEMO}", "--timeout=120s"
    )
    plain = _address(install, 80)
    for name, path in zip(ECHOES, ("/v1", "/v2"), strict=True):
        answered = eventually(
            functools.partial(pod, plain, HOST, path), f"{path} through the Gateway"
        )
        assert answered.startswith(f"{name}-")  # the echo Deployment's pod
    tls = _address(install, 443)
    assert tls[0] == plain[0]  # one Gateway, one address
    assert _https_pod(tls, install.ca, "/v2").startswith("echo-v2-")


def test_two_controllers_elect_one_leader_and_the_discovery_service_follows_it(
    install: Install,
) -> None:
    def leader() -> tuple[Obj, list[str]] | None:
        pods = install.pods(NS, CONTROLLER)
        labelled = [p for p in pods if p["metadata"]["labels"].get(LEADER_LABEL) == "true"]
        lease = json.loads(
            install.kubectl("-n", NS, "get", "lease", "coxswain-controller", "-o", "json")
        )
        if len(pods) != 2 or len(labelled) != 1:
            return None
        if labelled[0]["metadata"]["name"] != lease["spec"].get("holderIdentity"):
            return None
        selector = "kubernetes.io/service-name=coxswain-controller-discovery"
        slices = json.loads(
            install.kubectl("-n", NS, "get", "endpointslices", "-l", selector, "-o", "json")
        )
        ready = sorted(
            a
            for piece in slices["items"]
            for e in piece.get("endpoints") or []
            if (e.get("conditions") or {}).get("ready")
            for a in e["addresses"]
        )
        return labelled[0], ready

    elected, endpoints = eventually(leader, "one leader, labelled, holding the Lease")
    assert endpoints == [elected["status"]["podIP"]]


def test_each_pod_acts_as_its_own_service_account(install: Install) -> None:
    for name in ("coxswain-controller", "coxswain-identity"):
        for running in install.pods(NS, f"app.kubernetes.io/name={name}"):
            token = (install.pod_dir(running) / "serviceaccount" / "token").read_text()
            with install.client(token) as client:
                auth: Any = kubernetes.client.AuthenticationV1Api(client)
                review = auth.create_self_subject_review({})
            assert review.status.user_info.username == f"system:serviceaccount:{NS}:{name}"
    # Spec 000: "Both proxy roles hold zero Kubernetes API credentials"; nor does the UI.
    for name in ("coxswain-proxy", "coxswain-ui"):
        for running in install.pods(NS, f"app.kubernetes.io/name={name}"):
            assert running["spec"]["automountServiceAccountToken"] is False
            assert not (install.pod_dir(running) / "serviceaccount").exists()


def test_a_proxy_service_account_token_can_read_nothing(install: Install) -> None:
    with install.client() as admin:
        core: Any = kubernetes.client.CoreV1Api(admin)
        requested = core.create_namespaced_service_account_token("coxswain-proxy", NS, {"spec": {}})
    gateway_api = ("gateway.networking.k8s.io", "v1")
    with install.client(requested.status.token) as client:
        core = kubernetes.client.CoreV1Api(client)
        custom: Any = kubernetes.client.CustomObjectsApi(client)
        reads: dict[str, Callable[[], Any]] = {
            "pods": lambda: core.list_namespaced_pod(NS),
            "secrets": lambda: core.list_secret_for_all_namespaces(),
            "the trust bundle": lambda: core.read_namespaced_config_map(
                "coxswain-discovery-trust", NS
            ),
            "services": lambda: core.list_service_for_all_namespaces(),
            "endpointslices": lambda: kubernetes.client.DiscoveryV1Api(
                client
            ).list_endpoint_slice_for_all_namespaces(),
            "gateways": lambda: custom.list_cluster_custom_object(*gateway_api, "gateways"),
            "httproutes": lambda: custom.list_cluster_custom_object(*gateway_api, "httproutes"),
            "leases": lambda: kubernetes.client.CoordinationV1Api(client).list_namespaced_lease(NS),
        }
        assert {what: _status(read) for what, read in reads.items()} == dict.fromkeys(reads, 403)
    # Its pod's one token is for the identity service's audience, not a credential for the API.
    (proxy,) = install.pods(NS, "app.kubernetes.io/name=coxswain-proxy")
    projected = install.pod_dir(proxy) / "volumes" / "discovery-token" / "token"
    with install.client(projected.read_text()) as client:
        assert _status(lambda: kubernetes.client.CoreV1Api(client).list_namespaced_pod(NS)) == 401


def test_a_verb_taken_from_the_controllers_role_shows_in_its_readiness(install: Install) -> None:
    original = json.loads(
        install.kubectl("get", "clusterrole", "coxswain-controller", "-o", "json")
    )
    install.kubectl(
        "replace", "-f", "-", stdin=json.dumps(_without(original, "httproutes", "watch"))
    )
    before = {p["metadata"]["uid"] for p in install.pods(NS, CONTROLLER)}
    try:
        # A watch open before the change runs on; a controller (re)started after it is refused.
        install.kubectl("-n", NS, "delete", "pods", "-l", CONTROLLER, "--wait=false")

        def refused() -> list[tuple[Obj, str]] | None:
            pods = [
                p
                for p in install.pods(NS, CONTROLLER)
                if p["metadata"]["uid"] not in before and (p.get("status") or {}).get("podIP")
            ]
            answers = [(p, *_readyz(p)) for p in pods]
            if len(pods) != 2 or any(
                code != 503 or "httproutes" not in text for _, code, text in answers
            ):
                return None
            return [(p, text) for p, _, text in answers]

        for running, text in eventually(refused, "both new controllers unready on httproutes"):
            assert "forbidden to watch httproutes.gateway.networking.k8s.io" in text
            assert (
                'cannot watch resource "httproutes" in API group "gateway.networking.k8s.io"'
                in text
            )
            assert f'User "system:serviceaccount:{NS}:coxswain-controller"' in text
            (status,) = running["status"]["containerStatuses"]
            assert status["ready"] is False and status["restartCount"] == 0  # no crash loop
    finally:
        install.kubectl("replace", "-f", "-", stdin=json.dumps(_writable(original)))

    def ready_again() -> bool:
        pods = install.pods(NS, CONTROLLER)
        return len(pods) == 2 and all(_readyz(p)[0] == 200 for p in pods)

    eventually(ready_again, "the controllers ready once the verb is back")
    install.kubectl(
        "-n", DEMO, "wait", "--for=condition=Programmed", f"gateway/{DEMO}", "--timeout=60s"
    )
    assert pod(_address(install, 80), HOST, "/v1") is not None
