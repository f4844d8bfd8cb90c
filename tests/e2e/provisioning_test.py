"""End to end: what the controller provisions for each Gateway, really run on this machine.

Every service runs from its shipped PEX file as its own OS process (tests/e2e/stack_test.py's
stack), plus the devkit's load balancer (a 127.0.200.x address per LoadBalancer Service) and
node agent (the pods of the Deployments the controller provisions, each proxy its own process
with its own 127.0.201.x pod IP). Requests go to each Gateway's own address, as a client would.
Covers: a shared Gateway reached through its VIP; two Gateways with one hostname on one port
isolated by address; a dedicated Gateway provisioned and serving through its own Service; the
shared proxy refused a dedicated Gateway's scope; scaling the dedicated proxies to 2 replicas
with both acking before Programmed; a podTemplate edit rolling the Deployment; a switch from
shared to dedicated and back under continuous traffic with no request failed; deleting a
Gateway collecting everything it owned. One stack serves the module, each test in its own
namespace. What is rendered, and how the provisioner compares, is the controller's own tests'.
"""

from __future__ import annotations

import ipaddress
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import kubernetes
import pytest

from coxswain_devkit.stack import Launcher, Stack, StackPorts
from coxswain_devkit.traffic import FAILURES, Traffic, get, pod
from coxswain_devkit.waiting import until

WAIT = 90.0
GROUP, VERSION = "gateway.networking.k8s.io", "v1"
PARAMS = ("coxswain-labs.dev", "v1alpha1", "coxswaingatewayparameters")
GATEWAY_LABEL = "gateway.networking.k8s.io/gateway-name"
LB_NETWORK = ipaddress.ip_network("127.0.200.0/24")
POD_NETWORK = ipaddress.ip_network("127.0.201.0/24")
NAMESPACES = (
    "e2e-vip",
    "e2e-isolation",
    "e2e-dedicated",
    "e2e-denied",
    "e2e-scale",
    "e2e-roll",
    "e2e-switch",
    "e2e-gc",
)
# An echo backend "one" in each namespace; "two" where a test needs a second.
ECHOES = [*((ns, "one") for ns in NAMESPACES), ("e2e-isolation", "two")]


def eventually(predicate: Callable[[], Any], what: str, timeout: float = WAIT) -> Any:
    return until(predicate, what, within=timeout, tolerate=FAILURES)


def listener(name: str, port: int) -> dict[str, Any]:
    return {"name": name, "port": port, "protocol": "HTTP"}


class Cluster:
    """The stack's API emulator through the real `kubernetes` client."""

    def __init__(self, stack: Stack) -> None:
        self.stack = stack
        self.client = stack.client()
        self.core: Any = kubernetes.client.CoreV1Api(self.client)
        self.apps: Any = kubernetes.client.AppsV1Api(self.client)
        self.custom: Any = kubernetes.client.CustomObjectsApi(self.client)

    def _create(self, api: tuple[str, str, str], kind: str, ns: str, name: str, spec: Any) -> None:
        body = {
            "apiVersion": f"{api[0]}/{api[1]}",
            "kind": kind,
            "metadata": {"name": name, "namespace": ns},
            "spec": spec,
        }
        self.custom.create_namespaced_custom_object(api[0], api[1], ns, api[2], body)

    def gateway(self, ns: str, name: str, listeners: list[dict[str, Any]], **spec: Any) -> None:
        spec = {"gatewayClassName": "coxswain", "listeners": listeners, **spec}
        self._create((GROUP, VERSION, "gateways"), "Gateway", ns, name, spec)

    def route(self, ns: str, name: str, gateway: str, host: str, backend: str) -> None:
        rules = [{"backendRefs": [{"name": backend, "port": 80}]}]
        spec = {"parentRefs": [{"name": gateway}], "hostnames": [host], "rules": rules}
        self._create((GROUP, VERSION, "httproutes"), "HTTPRoute", ns, name, spec)

    def parameters(self, ns: str, name: str, spec: dict[str, Any]) -> None:
        self._create(PARAMS, "CoxswainGatewayParameters", ns, name, spec)

    def patch_parameters(self, ns: str, name: str, spec: dict[str, Any]) -> None:
        self.custom.patch_namespaced_custom_object(*PARAMS[:2], ns, PARAMS[2], name, {"spec": spec})

    def patch_gateway(self, ns: str, name: str, patch: dict[str, Any]) -> None:
        self.custom.patch_namespaced_custom_object(GROUP, VERSION, ns, "gateways", name, patch)

    def read_gateway(self, ns: str, name: str) -> dict[str, Any]:
        return dict(self.custom.get_namespaced_custom_object(GROUP, VERSION, ns, "gateways", name))

    def programmed(self, ns: str, name: str, generation: int | None = None) -> bool:
        gw = self.read_gateway(ns, name)
        wanted = generation or gw["metadata"]["generation"]
        return any(
            c["type"] == "Programmed"
            and c["status"] == "True"
            and c["observedGeneration"] == wanted
            for c in (gw.get("status") or {}).get("conditions") or []
        )

    def address(self, ns: str, gateway: str, port: int) -> tuple[str, int]:
        """The Gateway's own address, once its Service has one and the Gateway reports it."""

        def reported() -> tuple[str, int] | None:
            found = self.stack.address(ns, gateway, port)
            addresses = (self.read_gateway(ns, gateway).get("status") or {}).get("addresses")
            if found is None or addresses != [{"type": "IPAddress", "value": found[0]}]:
                return None
            return found

        found: tuple[str, int] = eventually(reported, f"{ns}/{gateway}'s address")
        assert ipaddress.ip_address(found[0]) in LB_NETWORK
        return found

    def pods(self, ns: str, gateway: str) -> list[Any]:
        return list(
            self.core.list_namespaced_pod(ns, label_selector=f"{GATEWAY_LABEL}={gateway}").items
        )

    def ready_pods(self, ns: str, gateway: str) -> list[Any]:
        return [
            p
            for p in self.pods(ns, gateway)
            if p.metadata.deletion_timestamp is None
            and p.status is not None
            and any(c.type == "Ready" and c.status == "True" for c in p.status.conditions or [])
        ]

    def slices(self, ns: str, service: str) -> list[Any]:
        discovery: Any = kubernetes.client.DiscoveryV1Api(self.client)
        selector = f"kubernetes.io/service-name={service}"
        return list(discovery.list_namespaced_endpoint_slice(ns, label_selector=selector).items)

    def endpoints(self, ns: str, service: str) -> set[str]:
        return {
            address
            for piece in self.slices(ns, service)
            for endpoint in piece.endpoints or []
            if endpoint.conditions is None or endpoint.conditions.ready is not False
            for address in endpoint.addresses
        }

    def owned(self, ns: str, gateway: str) -> list[str]:
        """Everything in `ns` labelled as provisioned for `gateway`, as kind/name."""
        selector = f"{GATEWAY_LABEL}={gateway}"
        discovery: Any = kubernetes.client.DiscoveryV1Api(self.client)
        listings = {
            "Service": self.core.list_namespaced_service,
            "ServiceAccount": self.core.list_namespaced_service_account,
            "ConfigMap": self.core.list_namespaced_config_map,
            "Pod": self.core.list_namespaced_pod,
            "Deployment": self.apps.list_namespaced_deployment,
            "EndpointSlice": discovery.list_namespaced_endpoint_slice,
        }
        return sorted(
            f"{kind}/{obj.metadata.name}"
            for kind, listing in listings.items()
            for obj in listing(ns, label_selector=selector).items
        )

    def dedicated(self, ns: str, name: str, port: int, **params: Any) -> tuple[str, int]:
        """A dedicated Gateway `name` (parameters `name`) routing web.example to "one"; its
        address once it is Programmed and traffic reaches "one" through it."""
        self.parameters(ns, name, params)
        ref = {"group": PARAMS[0], "kind": "CoxswainGatewayParameters", "name": name}
        self.gateway(ns, name, [listener("http", port)], infrastructure={"parametersRef": ref})
        self.route(ns, f"{name}-web", name, "web.example", "one")
        address = self.address(ns, name, port)
        eventually(lambda: self.programmed(ns, name), f"{ns}/{name} Programmed")
        eventually(lambda: pod(address, "web.example") == "one-0", f"traffic through {ns}/{name}")
        return address


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    namespaces = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": n}} for n in NAMESPACES
    ]
    services = [
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": svc, "namespace": ns},
            "spec": {"ports": [{"name": "http", "port": 80}]},
        }
        for ns, svc in ECHOES
    ]
    gateway_class = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "GatewayClass",
        "metadata": {"name": "coxswain"},
        "spec": {"controllerName": "coxswain-labs.dev/gateway-controller"},
    }
    stack = Stack(
        Launcher.pex_files(Path(".")),
        tmp_path_factory.mktemp("stack"),
        echo_services=ECHOES,
        ports=StackPorts.free(),
        extra_objects=[*namespaces, *services],
    )
    try:
        stack.start()
        running = Cluster(stack)
        running.custom.create_cluster_custom_object(GROUP, VERSION, "gatewayclasses", gateway_class)
        yield running
        running.client.close()
    finally:
        statuses = stack.stop()
    assert all(code == 0 for code in statuses.values()), statuses


# ------------------------------------------------------------------------------ scenarios


def test_a_shared_gateway_is_reached_through_its_own_vip_address(cluster: Cluster) -> None:
    ns = "e2e-vip"
    cluster.gateway(ns, "gw", [listener("http", 80)])
    cluster.route(ns, "web", "gw", "web.example", "one")
    address = cluster.address(ns, "gw", 80)
    eventually(lambda: cluster.programmed(ns, "gw"), "Programmed")
    assert pod(address, "web.example") == "one-0"
    # The VIP is relayed to the shared proxy's bind port for this Gateway, not a pod of its own.
    assert cluster.endpoints(ns, "gw-coxswain") == {"127.0.0.1"}
    assert cluster.owned(ns, "gw") == [
        "EndpointSlice/gw-coxswain-ipv4",
        "Service/gw-coxswain",
        "ServiceAccount/gw-coxswain-infra",
    ]


def test_two_gateways_with_one_hostname_on_one_port_stay_isolated_by_address(
    cluster: Cluster,
) -> None:
    ns = "e2e-isolation"
    for name, backend in (("blue", "one"), ("green", "two")):
        cluster.gateway(ns, name, [listener("http", 80)])
        cluster.route(ns, f"{name}-web", name, "web.example", backend)
    cluster.route(ns, "blue-only", "blue", "only-blue.example", "one")
    blue, green = cluster.address(ns, "blue", 80), cluster.address(ns, "green", 80)
    assert blue[0] != green[0]
    eventually(lambda: pod(blue, "web.example") == "one-0", "blue's traffic")
    eventually(lambda: pod(green, "web.example") == "two-0", "green's traffic")
    for _ in range(10):
        assert pod(blue, "web.example") == "one-0"
        assert pod(green, "web.example") == "two-0"
    assert pod(blue, "only-blue.example") == "one-0"
    assert get(green, "only-blue.example")[0] == 404  # blue's route is not served on green's


def test_a_dedicated_gateway_is_provisioned_and_serves_through_its_own_service(
    cluster: Cluster,
) -> None:
    ns = "e2e-dedicated"
    address = cluster.dedicated(ns, "gw", 8080)
    (proxy,) = cluster.ready_pods(ns, "gw")
    assert proxy.spec.node_name == "devkit-node"
    assert proxy.spec.service_account_name == "gw-coxswain"
    assert ipaddress.ip_address(proxy.status.pod_ip) in POD_NETWORK
    assert cluster.endpoints(ns, "gw-coxswain") == {proxy.status.pod_ip}
    for _ in range(10):
        assert pod(address, "web.example") == "one-0"
    assert {"ConfigMap/gw-coxswain-trust", "Deployment/gw-coxswain", "Service/gw-coxswain",
            "ServiceAccount/gw-coxswain"} <= set(cluster.owned(ns, "gw"))  # fmt: skip


def test_the_shared_proxy_may_not_take_a_dedicated_gateways_scope(cluster: Cluster) -> None:
    ns = "e2e-denied"
    address = cluster.dedicated(ns, "gw", 8080)
    scope = ("--dedicated", "--gateway-name", "gw", "--gateway-namespace", ns)
    intruder = cluster.stack.start_proxy("intruder", scope=scope)
    try:
        line = intruder.wait_for(
            lambda entry: "PERMISSION_DENIED" in json.dumps(entry), timeout=WAIT
        )
        text = json.dumps(line)
        assert f"sa/coxswain-proxy may not subscribe to Gateway {ns}/gw" in text
        assert f"only ns/{ns}/sa/gw-coxswain may" in text  # its own ServiceAccount only
    finally:
        assert cluster.stack.processes.pop("intruder").stop() == 0
    assert pod(address, "web.example") == "one-0"  # the real dedicated proxy kept serving


def test_two_dedicated_replicas_both_ack_before_programmed(cluster: Cluster) -> None:
    ns = "e2e-scale"
    cluster.dedicated(ns, "gw", 8080, replicas=1)
    cluster.patch_parameters(ns, "gw", {"replicas": 2})
    pods = eventually(lambda: len(p := cluster.ready_pods(ns, "gw")) == 2 and p, "2 ready replicas")
    ips = sorted(p.status.pod_ip for p in pods)
    eventually(lambda: sorted(cluster.endpoints(ns, "gw-coxswain")) == ips, "both in the Service")
    # A new listener: Programmed for the new generation must mean both replicas bound and acked
    # it, so at that moment each one already serves the new port.
    listeners = [listener("http", 8080), listener("extra", 8081)]
    cluster.patch_gateway(ns, "gw", {"spec": {"listeners": listeners}})
    generation = cluster.read_gateway(ns, "gw")["metadata"]["generation"]
    eventually(lambda: cluster.programmed(ns, "gw", generation), "Programmed for the new listener")
    for ip in ips:
        assert pod((ip, 8081), "web.example") == "one-0", ip


def test_a_pod_template_edit_rolls_the_deployment(cluster: Cluster) -> None:
    ns = "e2e-roll"
    address = cluster.dedicated(ns, "gw", 8080, replicas=2)
    eventually(lambda: len(cluster.ready_pods(ns, "gw")) == 2, "2 ready replicas")
    old = {p.metadata.name for p in cluster.pods(ns, "gw")}
    template = {
        "spec": {"containers": [{"name": "proxy", "env": [{"name": "ROLLED", "value": "1"}]}]}
    }
    cluster.patch_parameters(ns, "gw", {"podTemplate": template})

    def rolled() -> list[Any] | None:
        pods = cluster.pods(ns, "gw")
        ready = cluster.ready_pods(ns, "gw")
        if len(pods) != 2 or len(ready) != 2 or {p.metadata.name for p in pods} & old:
            return None
        return ready

    pods = eventually(rolled, "new pods replacing the old ones")
    for new in pods:
        (container,) = new.spec.containers
        assert {(e.name, e.value) for e in container.env or []} >= {("ROLLED", "1")}
    eventually(lambda: cluster.programmed(ns, "gw"), "Programmed after the roll")
    assert pod(address, "web.example") == "one-0"


def test_switching_shared_to_dedicated_and_back_keeps_the_gateway_served(cluster: Cluster) -> None:
    ns = "e2e-switch"
    cluster.parameters(ns, "own", {})
    cluster.gateway(ns, "gw", [listener("http", 8080)])
    cluster.route(ns, "web", "gw", "web.example", "one")
    address = cluster.address(ns, "gw", 8080)
    eventually(lambda: pod(address, "web.example") == "one-0", "shared traffic")
    ref = {"group": PARAMS[0], "kind": "CoxswainGatewayParameters", "name": "own"}

    def dedicated() -> bool:
        ips = {p.status.pod_ip for p in cluster.ready_pods(ns, "gw")}
        return bool(ips) and cluster.endpoints(ns, "gw-coxswain") == ips

    with Traffic(address, "web.example") as to_dedicated:
        cluster.patch_gateway(ns, "gw", {"spec": {"infrastructure": {"parametersRef": ref}}})
        eventually(dedicated, "the Service to reach the dedicated proxy")
        eventually(lambda: cluster.programmed(ns, "gw"), "Programmed in dedicated mode")
        _more(to_dedicated)
    assert cluster.address(ns, "gw", 8080) == address  # the same Service, the same address
    with Traffic(address, "web.example") as to_shared:
        cluster.patch_gateway(ns, "gw", {"spec": {"infrastructure": None}})
        eventually(lambda: not cluster.pods(ns, "gw"), "the dedicated pods gone")
        eventually(lambda: cluster.endpoints(ns, "gw-coxswain") == {"127.0.0.1"}, "shared again")
        eventually(lambda: cluster.programmed(ns, "gw"), "Programmed in shared mode")
        _more(to_shared)
    assert cluster.address(ns, "gw", 8080) == address
    print(
        f"\nmode switch, to dedicated: {to_dedicated.summary()}; to shared: {to_shared.summary()}"
    )
    # The shared pool serves the Gateway until its own proxies are listed in its Service's
    # endpoints (docs/provisioning.md, "Switching modes"); the shared proxies are running
    # already for the way back. Neither switch may fail a request.
    assert to_dedicated.failures == [], to_dedicated.summary()
    assert to_shared.failures == [], to_shared.summary()


def _more(traffic: Traffic, requests: int = 50) -> None:
    sent = traffic.sent
    eventually(lambda: traffic.sent > sent + requests, f"{requests} more requests")


def test_deleting_a_gateway_collects_everything_it_owned(cluster: Cluster) -> None:
    ns = "e2e-gc"
    cluster.dedicated(ns, "own", 8080)
    cluster.gateway(ns, "shared", [listener("http", 80)])
    cluster.address(ns, "shared", 80)
    (proxy,) = cluster.ready_pods(ns, "own")
    kinds = {entry.partition("/")[0] for entry in cluster.owned(ns, "own")}
    assert kinds == {"ConfigMap", "Deployment", "Pod", "Service", "ServiceAccount"}
    assert cluster.endpoints(ns, "own-coxswain") == {proxy.status.pod_ip}
    assert len(cluster.owned(ns, "shared")) == 3  # its VIP Service, identity and mirrored slice
    for name in ("own", "shared"):
        cluster.custom.delete_namespaced_custom_object(GROUP, VERSION, ns, "gateways", name)
    eventually(lambda: cluster.owned(ns, "own") == [], "the dedicated Gateway's objects gone")
    eventually(lambda: cluster.owned(ns, "shared") == [], "the shared Gateway's objects gone")
    assert cluster.slices(ns, "own-coxswain") == [] and cluster.slices(ns, "shared-coxswain") == []
    with pytest.raises(ConnectionRefusedError):  # the proxy process went with its pod
        get((proxy.status.pod_ip, 8080), "web.example")
