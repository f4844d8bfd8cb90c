"""The controller's RBAC in the chart, held against spec 000's table and the calls it makes.

Covers: every row of spec 000's "RBAC by mode" controller column is granted, cluster-wide where
the table says "cluster" and in the release's namespace for the Lease; every call the
controller's code names (the kinds it watches, the status it writes, what it provisions, the
Lease, its Pod's label, Events, reviews, pod logs, the CA Secret) is granted; nothing is granted
beyond the table and those calls (least privilege, each extra with its reason in
templates/controller/rbac.yaml); and, with a real controller process run with the chart's own
flags against the devkit API emulator through a recording proxy (watching, electing a leader,
labelling its Pod, writing status and Events, provisioning a dedicated and a shared Gateway,
answering the operator API), every request it made is one the chart's roles allow. That the
check can fail is shown by taking one rule away.
Leaves out enforcement itself: here a denied call is found by comparison; the install e2e
(tests/e2e/install_test.py) runs the chart with the emulator enforcing RBAC, where it is a 403.
"""

from __future__ import annotations

import base64
import os
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from typing import Any

import kubernetes
import pytest

from coxswain_controller.leader import election, pod
from coxswain_controller.provisioner import resources
from coxswain_controller.sources import kinds
from coxswain_controller.status import writer
from coxswain_devkit import crds
from coxswain_devkit.apiserver import ThreadedApiServer
from coxswain_devkit.pki import CertificateAuthority
from coxswain_devkit.processes import ServiceProcess
from helm import chart
from helm.rbac import RecordingProxy, Request, Roles, request_info

NS = chart.NAMESPACE
G = "gateway.networking.k8s.io"
WAIT = 60.0
Obj = dict[str, Any]


def _roles(rendered: chart.Rendered) -> Roles:
    """The roles bound to the controller's ServiceAccount."""
    cluster, namespaced = [], []
    for binding in rendered.all("ClusterRoleBinding") + rendered.all("RoleBinding"):
        if not any(s["name"] == "coxswain-controller" for s in binding["subjects"]):
            continue
        kind, name = binding["roleRef"]["kind"], binding["roleRef"]["name"]
        if kind == "ClusterRole":
            cluster.append(rendered.get("ClusterRole", name))
        else:
            namespaced.append(rendered.get("Role", name))
    assert cluster and namespaced
    return Roles.of(cluster, namespaced)


@pytest.fixture(scope="module")
def rendered() -> chart.Rendered:
    return chart.render(chart.CASES["defaults"])


@pytest.fixture(scope="module")
def roles(rendered: chart.Rendered) -> Roles:
    return _roles(rendered)


# Spec 000, "RBAC by mode", the controller column: (group, resources, verbs, scope).
READ = ("list", "watch", "get")
SPEC_000: list[tuple[str, tuple[str, ...], tuple[str, ...], str]] = [
    (G, ("httproutes", "gateways", "referencegrants", "backendtlspolicies"), READ, "cluster"),
    (G, ("gatewayclasses",), READ, "cluster"),
    ("networking.k8s.io", ("ingresses", "ingressclasses"), READ, "cluster"),
    ("", ("services",), READ, "cluster"),
    ("discovery.k8s.io", ("endpointslices",), READ, "cluster"),
    ("", ("secrets", "configmaps"), READ, "cluster"),
    (G, ("httproutes/status", "gateways/status"), ("update", "patch"), "cluster"),
    ("networking.k8s.io", ("ingresses/status",), ("update", "patch"), "cluster"),
    (G, ("gateways",), ("patch",), "cluster"),  # "finalizers only"
    ("apps", ("deployments",), ("create", "update", "delete"), "cluster"),
    ("", ("services", "serviceaccounts"), ("create", "update", "delete"), "cluster"),
    ("coordination.k8s.io", ("leases",), ("get", "create", "patch"), NS),
    ("authentication.k8s.io", ("tokenreviews",), ("create",), "cluster"),
]  # fmt: skip

# Granted for what admission checks, not for a call: the provisioned objects' owner references
# set blockOwnerDeletion, which OwnerReferencesPermissionEnforcement allows only to whoever may
# update the owner's finalizers.
ADMISSION = {(G, "gateways/finalizers", "update")}


def _request(group: str, resource: str, verb: str, namespace: str, name: str = "x") -> Request:
    plural, _, sub = resource.partition("/")
    named = "" if verb in ("list", "watch", "create") else name
    return Request(verb, group, plural, sub, namespace, named)


def _table_requests() -> Iterator[Request]:
    for group, plurals, verbs, scope in SPEC_000:
        for resource in plurals:
            for verb in verbs:
                if scope == "cluster":
                    # Cluster-wide grants: all namespaces at once, and any one namespace.
                    yield _request(group, resource, verb, "")
                    if "/" in resource or resource not in ("tokenreviews",):
                        yield _request(group, resource, verb, "some-namespace")
                else:
                    yield _request(group, resource, verb, scope, name="coxswain-controller")


def test_every_row_of_spec_000s_table_is_granted(roles: Roles) -> None:
    cluster_only = Roles(roles.cluster_rules, ())
    for request in _table_requests():
        scoped = roles if request.namespace == NS else cluster_only
        assert scoped.allows(request), f"spec 000 grants the controller: {request}"


def _code_requests() -> Iterator[Request]:
    """Every call the controller's code names, from the modules that make them."""
    for kind in (*kinds.CORE, kinds.CRD):  # sources: list, then watch, every namespace
        yield Request("list", kind.group, kind.plural)
        yield Request("watch", kind.group, kind.plural)
    optional = [(kinds.GATEWAY, kinds.GATEWAY_GROUP), (kinds.COXSWAIN, kinds.COXSWAIN_GROUP)]
    for watched, group in optional:  # while their CRDs are served
        for gateway_kind in watched:
            yield Request("list", group, gateway_kind.plural)
            yield Request("watch", group, gateway_kind.plural)
    for written, plural in writer.PLURALS.items():  # status: get, then update the subresource
        group = writer.GROUPS.get(written, (writer.GROUP, writer.VERSION))[0]
        yield Request("get", group, plural, "", "ns", "x")
        yield Request("update", group, plural, "status", "ns", "x")
    for resource in resources.KINDS.values():  # the provisioner: get, create, update, delete
        yield Request("get", resource.group, resource.plural, "", "ns", "x")
        yield Request("create", resource.group, resource.plural, "", "ns")
        yield Request("update", resource.group, resource.plural, "", "ns", "x")
        yield Request("delete", resource.group, resource.plural, "", "ns", "x")
    lease = election.ElectionSettings(identity="me", namespace=NS)  # GET, then POST or PATCH
    yield Request("get", "coordination.k8s.io", "leases", "", NS, lease.name)
    yield Request("create", "coordination.k8s.io", "leases", "", NS)
    yield Request("patch", "coordination.k8s.io", "leases", "", NS, lease.name)
    leader = pod.PodRef(NS, "coxswain-controller-0")  # the leader's label: a merge patch
    yield request_info("PATCH", leader.path, {}) or Request("?", "", "")
    yield Request("create", "", "events", "", "ns")  # status/events.py
    yield Request("create", "authentication.k8s.io", "tokenreviews")  # api/access.py
    yield Request("create", "authorization.k8s.io", "subjectaccessreviews")
    yield Request("get", "", "pods", "log", "ns", "x")  # api/logs.py
    yield Request("get", "", "secrets", "", NS, "coxswain-discovery-ca")  # discovery/ca_secret.py


def test_every_call_the_code_names_is_granted(roles: Roles) -> None:
    missing = [str(r) for r in _code_requests() if not roles.allows(r)]
    assert missing == []


def test_nothing_is_granted_beyond_the_table_and_the_calls(roles: Roles) -> None:
    needed = {
        (group, resource, verb)
        for group, plurals, verbs, _ in SPEC_000
        for resource in plurals
        for verb in verbs
    }
    needed |= {(r.group, r.full_resource, r.verb) for r in _code_requests()}
    assert roles.granted() - needed == ADMISSION


def test_a_missing_rule_is_caught(roles: Roles) -> None:
    # Without the Events rule the controller's Event writes are denied, and the check says so.
    without = Roles(
        tuple(r for r in roles.cluster_rules if r["resources"] != ["events"]),
        roles.namespaced_rules,
    )
    missing = [str(r) for r in _code_requests() if not without.allows(r)]
    assert missing == ["create core/events in ns"]


# --- the controller as a process, every request it makes recorded -----------------------------

CA = CertificateAuthority.create()


def _ns(name: str) -> Obj:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}


def _service(name: str, namespace: str, port: int = 80) -> list[Obj]:
    return [
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"ports": [{"name": "http", "port": port}], "selector": {"app": name}},
        },
        {
            "apiVersion": "discovery.k8s.io/v1",
            "kind": "EndpointSlice",
            "metadata": {
                "name": f"{name}-1",
                "namespace": namespace,
                "labels": {"kubernetes.io/service-name": name},
            },
            "addressType": "IPv4",
            "ports": [{"name": "http", "port": 8080}],
            "endpoints": [{"addresses": ["10.0.0.1"], "conditions": {"ready": True}}],
        },
    ]


LEADER_POD = "coxswain-controller-0"
CLUSTER: list[Obj] = [
    _ns(NS),
    _ns("shop"),
    {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "kubernetes.io/tls",
        "metadata": {"name": "coxswain-discovery-ca", "namespace": NS},
        "data": {
            "tls.crt": base64.b64encode(CA.certificate_pem).decode(),
            "tls.key": base64.b64encode(CA.key_pem).decode(),
        },
    },
    {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "coxswain-discovery-trust", "namespace": NS},
        "data": {"ca.crt": CA.certificate_pem.decode()},
    },
    {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": LEADER_POD, "namespace": NS, "labels": {"app": "controller"}},
        "spec": {"containers": [{"name": "controller", "image": "coxswain-controller"}]},
    },
    {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "ui", "namespace": NS}},
    *_service("coxswain-proxy", NS),
    *_service("web", "shop"),
    {
        "apiVersion": f"{G}/v1",
        "kind": "GatewayClass",
        "metadata": {"name": "coxswain"},
        "spec": {"controllerName": "coxswain-labs.dev/gateway-controller"},
    },
    {
        "apiVersion": f"{G}/v1",
        "kind": "Gateway",
        "metadata": {"name": "shared", "namespace": "shop"},
        "spec": {
            "gatewayClassName": "coxswain",
            "listeners": [{"name": "http", "port": 80, "protocol": "HTTP"}],
        },
    },
    {
        "apiVersion": f"{G}/v1",
        "kind": "Gateway",
        "metadata": {"name": "own", "namespace": "shop"},
        "spec": {
            "gatewayClassName": "coxswain",
            "infrastructure": {
                "parametersRef": {
                    "group": "coxswain-labs.dev",
                    "kind": "CoxswainGatewayParameters",
                    "name": "own",
                }
            },
            "listeners": [{"name": "http", "port": 8080, "protocol": "HTTP"}],
        },
    },
    {
        "apiVersion": "coxswain-labs.dev/v1alpha1",
        "kind": "CoxswainGatewayParameters",
        "metadata": {"name": "own", "namespace": "shop"},
        "spec": {"replicas": 1},
    },
    {
        "apiVersion": f"{G}/v1",
        "kind": "HTTPRoute",
        "metadata": {"name": "web", "namespace": "shop"},
        "spec": {
            "parentRefs": [{"name": "shared"}, {"name": "own"}, {"name": "absent"}],
            "rules": [{"backendRefs": [{"name": "web", "port": 80}]}],
        },
    },
    {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "IngressClass",
        "metadata": {"name": "coxswain"},
        "spec": {"controller": "coxswain-labs.dev/ingress-controller"},
    },
    {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "Ingress",
        "metadata": {"name": "shop", "namespace": "shop"},
        "spec": {
            "ingressClassName": "coxswain",
            "defaultBackend": {"service": {"name": "web", "port": {"number": 80}}},
        },
    },
]


def _eventually(predicate: Callable[[], Any], what: str) -> Any:
    deadline = time.monotonic() + WAIT
    while not (found := predicate()):
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)
    return found


def _controller_argv(rendered: chart.Rendered, api_url: str) -> list[str]:
    """The chart's own controller flags, then what a process on this machine needs instead
    (argparse keeps the last value of a flag)."""
    return [
        sys.executable,
        "-m",
        "coxswain_controller",
        *rendered.args("coxswain-controller"),
        f"--api-server={api_url}",
        "--admin-address=127.0.0.1",
        "--admin-port=0",
        "--discovery-address=127.0.0.1",
        "--discovery-port=0",
        f"--pod-name={LEADER_POD}",
        f"--pod-namespace={NS}",
        "--lease-duration=2",
        "--lease-renew-interval=0.3",
        "--lease-renew-deadline=1",
        "--vip-service-type=ClusterIP",
    ]


@pytest.fixture(scope="module")
def recorded(rendered: chart.Rendered) -> list[tuple[str, str, dict[str, list[str]], int]]:
    with ThreadedApiServer() as api:
        api.call(lambda s: s.apply(crds.standard() + crds.coxswain()))
        api.call(lambda s: s.apply(CLUSTER))
        api.call(lambda s: s.set_pod_log(NS, LEADER_POD, "a line\n"))
        upstream = urllib.parse.urlsplit(api.url)
        with RecordingProxy((upstream.hostname or "", upstream.port or 0)) as proxy:
            env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
            argv = _controller_argv(rendered, proxy.url)
            with ServiceProcess(argv, env=env) as controller:
                admin = controller.wait_for_msg("admin server listening")["port"]
                _drive(api, admin)
                assert controller.stop() == 0
        return proxy.recorded()


def _drive(api: ThreadedApiServer, admin: int) -> None:
    """Wait until the controller has made each kind of call, then use its operator API."""
    with kubernetes.client.ApiClient(kubernetes.client.Configuration(host=api.url)) as client:
        core: Any = kubernetes.client.CoreV1Api(client)
        apps: Any = kubernetes.client.AppsV1Api(client)
        slices: Any = kubernetes.client.DiscoveryV1Api(client)
        _eventually(
            lambda: (core.read_namespaced_pod(LEADER_POD, NS).metadata.labels or {}).get(
                pod.LEADER_LABEL
            ),
            "the leader's label on its Pod",
        )
        _eventually(lambda: apps.list_namespaced_deployment("shop").items, "the dedicated proxies")
        _eventually(lambda: core.list_event_for_all_namespaces().items, "an Event")
        managed = "endpointslice.kubernetes.io/managed-by=provisioner.coxswain-labs.dev"
        _eventually(
            lambda: slices.list_namespaced_endpoint_slice("shop", label_selector=managed).items,
            "the shared proxies' endpoints mirrored next to the shared Gateway's VIP Service",
        )
        token: str = core.create_namespaced_service_account_token(
            "ui", NS, {"spec": {"expirationSeconds": 600}}
        ).status.token
    # The operator API: a TokenReview, then a SubjectAccessReview (answered allowed: this
    # emulator enforces no RBAC), and a pod's log.
    for path in ("/api/v1/fleet", f"/api/v1/pods/{NS}/{LEADER_POD}/logs"):
        status = _status(f"http://127.0.0.1:{admin}{path}", token)
        assert status == 200, (path, status)


def _status(url: str, token: str) -> int:
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"})
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            return int(answer.status)
    except urllib.error.HTTPError as err:
        return err.code


def test_every_request_the_controller_makes_is_granted(
    roles: Roles, recorded: list[tuple[str, str, dict[str, list[str]], int]]
) -> None:
    requests = {
        info for method, path, query, _ in recorded if (info := request_info(method, path, query))
    }
    denied = sorted(str(r) for r in requests if not roles.allows(r))
    assert denied == []
    # The run did make each kind of call (else this test would prove little).
    made = {(r.verb, r.group, r.resource, r.subresource) for r in requests}
    assert made >= {
        ("list", "", "secrets", ""),
        ("watch", G, "httproutes", ""),
        ("watch", "apiextensions.k8s.io", "customresourcedefinitions", ""),
        ("get", "", "secrets", ""),  # the discovery CA
        ("create", "coordination.k8s.io", "leases", ""),
        ("patch", "coordination.k8s.io", "leases", ""),
        ("patch", "", "pods", ""),
        ("update", G, "gateways", "status"),
        ("update", G, "gatewayclasses", "status"),
        ("create", "", "events", ""),
        ("create", "apps", "deployments", ""),
        ("create", "", "serviceaccounts", ""),
        ("create", "", "services", ""),
        ("create", "", "configmaps", ""),
        ("create", "discovery.k8s.io", "endpointslices", ""),
        ("create", "authentication.k8s.io", "tokenreviews", ""),
        ("create", "authorization.k8s.io", "subjectaccessreviews", ""),
    }


def test_the_recorded_calls_are_the_ones_the_code_names(
    recorded: list[tuple[str, str, dict[str, list[str]], int]],
) -> None:
    # The static list above is not stale: every kind of call the run made is in it.
    named = {(r.verb, r.group, r.resource, r.subresource) for r in _code_requests()}
    made = {
        (info.verb, info.group, info.resource, info.subresource)
        for method, path, query, _ in recorded
        if (info := request_info(method, path, query))
    }
    assert made - named == set()


def test_a_denied_request_is_caught(
    roles: Roles, recorded: list[tuple[str, str, dict[str, list[str]], int]]
) -> None:
    # Without the Role's Pod rule the leader could not label itself, and the check says so.
    without = Roles(
        roles.cluster_rules,
        tuple((ns, rule) for ns, rule in roles.namespaced_rules if rule["resources"] != ["pods"]),
    )
    denied = {
        str(info)
        for method, path, query, _ in recorded
        if (info := request_info(method, path, query)) and not without.allows(info)
    }
    assert denied == {f"patch core/pods {LEADER_POD} in {NS}"}
