"""Moving a Gateway from the shared pool to its own proxies, phase by phase (handover.py).

The cluster is played by the translation's own output: what it provisions in one pass is what
the next pass finds in the cache, as it would once the provisioner has applied it. Each step
asserts what a client of the Gateway's address depends on: who serves it, at which port, and
where the Service sends traffic.
"""

from __future__ import annotations

import copy
from typing import Any

from coxswain_controller.translate import Inputs, Options, translate
from coxswain_controller.translate.result import TranslateResult
from coxswain_controller.translate.scopes import SHARED_POOL, GatewayScope
from coxswain_routing import GatewayListeners, HostRoutes

OPTIONS = Options(vip_service_type="LoadBalancer")
# The shared proxies' own Service, whose endpoints a Gateway in another namespace gets mirrored.
MIRRORING = Options(vip_service_type="LoadBalancer", shared_proxy_service="coxswain-system/proxy")
GROUP = "gateway.networking.k8s.io/v1"
STAMP = "2026-01-01T00:00:00Z"


def _meta(name: str, namespace: str = "", **extra: Any) -> dict[str, Any]:
    found = {"name": name, "uid": f"uid-{name}", "creationTimestamp": STAMP, "generation": 1}
    return {**found, **({"namespace": namespace} if namespace else {}), **extra}


BASE: list[dict[str, Any]] = [
    {"apiVersion": "v1", "kind": "Namespace", "metadata": _meta("shop")},
    {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": _meta("coxswain-discovery-trust", "coxswain-system"),
        "data": {"ca.crt": "-----BEGIN CERTIFICATE-----\n...\n"},
    },
    {
        "apiVersion": GROUP,
        "kind": "GatewayClass",
        "metadata": _meta("coxswain"),
        "spec": {"controllerName": "coxswain-labs.dev/gateway-controller"},
    },
    {
        "apiVersion": "coxswain-labs.dev/v1alpha1",
        "kind": "CoxswainGatewayParameters",
        "metadata": _meta("own", "shop"),
        "spec": {"replicas": 1},
    },
    {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": _meta("web", "shop"),
        "spec": {"ports": [{"name": "http", "port": 80, "targetPort": 8080}]},
    },
    {
        "apiVersion": GROUP,
        "kind": "HTTPRoute",
        "metadata": _meta("web", "shop"),
        "spec": {
            "parentRefs": [{"name": "gw"}],
            "hostnames": ["shop.example.com"],
            "rules": [{"backendRefs": [{"name": "web", "port": 80}]}],
        },
    },
]
PARAMETERS = {"group": "coxswain-labs.dev", "kind": "CoxswainGatewayParameters", "name": "own"}


def _gateway(dedicated: bool) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "gatewayClassName": "coxswain",
        "listeners": [{"name": "http", "port": 80, "protocol": "HTTP"}],
    }
    if dedicated:
        spec["infrastructure"] = {"parametersRef": PARAMETERS}
    return {"apiVersion": GROUP, "kind": "Gateway", "metadata": _meta("gw", "shop"), "spec": spec}


class Cluster:
    """The objects as the cache holds them; `apply` takes what a pass asked to provision."""

    def __init__(self, dedicated: bool, options: Options = OPTIONS) -> None:
        self.options = options
        self.objects: dict[tuple[str, str, str], dict[str, Any]] = {}
        for obj in [*BASE, _gateway(dedicated)]:
            self.put(obj)

    def put(self, obj: dict[str, Any]) -> None:
        meta = obj["metadata"]
        self.objects[(obj["kind"], meta.get("namespace", ""), meta["name"])] = obj

    def translate(self) -> TranslateResult:
        objects = copy.deepcopy(list(self.objects.values()))
        return translate(Inputs.from_objects(objects), self.options)

    def apply(self, result: TranslateResult) -> None:
        for entry in result.provision:
            if entry.hold:
                continue
            wanted = {o.key for o in entry.objects} | set(entry.keep)
            for key, obj in list(self.objects.items()):
                labels = obj["metadata"].get("labels") or {}
                ours = labels.get("app.kubernetes.io/managed-by") == "coxswain"
                if ours and key[1] == entry.gateway.namespace and key not in _keys(wanted):
                    del self.objects[key]  # pruned
            for provisioned in entry.objects:
                body = copy.deepcopy(dict(provisioned.body))
                body["metadata"] = {**_meta(body["metadata"]["name"]), **body["metadata"]}
                previous = self.objects.get(
                    (body["kind"], body["metadata"]["namespace"], body["metadata"]["name"])
                )
                if previous is not None and "status" in previous:
                    body["status"] = previous["status"]
                self.put(body)

    def deployment_available(self) -> None:
        deployment = self.objects[("Deployment", "shop", "gw-coxswain")]
        deployment["status"] = {"observedGeneration": 1, "replicas": 1, "availableReplicas": 1}

    def endpoints(
        self, port: int, service: str = "gw-coxswain", namespace: str = "shop", ready: bool = True
    ) -> None:
        """The EndpointSlice Kubernetes keeps for `service`, listing `port`."""
        self.put(
            {
                "apiVersion": "discovery.k8s.io/v1",
                "kind": "EndpointSlice",
                "metadata": _meta(
                    f"{service}-abc", namespace, labels={"kubernetes.io/service-name": service}
                ),
                "addressType": "IPv4",
                "ports": [{"name": "tcp-80", "port": port, "protocol": "TCP"}],
                "endpoints": [{"addresses": ["10.0.0.9"], "conditions": {"ready": ready}}],
            }
        )


def _keys(wanted: set[Any]) -> set[tuple[str, str, str]]:
    return {(k.kind, k.namespace, k.name) for k in wanted}


def _served_ports(result: TranslateResult, scope: Any) -> set[int]:
    """The ports a scope's proxies bind for Gateway shop/gw."""
    return {
        listener.bind_port
        for r in result.snapshots.get(scope, ())
        if isinstance(r, GatewayListeners) and (r.namespace, r.name) == ("shop", "gw")
        for listener in r.listeners
    }


def _service(result: TranslateResult) -> dict[str, Any]:
    (entry,) = result.provision
    (service,) = [o.body for o in entry.objects if o.key.kind == "Service"]
    return dict(service)


def _shared_routes(result: TranslateResult) -> set[tuple[int, int, str]]:
    return {
        (r.bind_port, r.listener_port, r.host)
        for r in result.snapshots[SHARED_POOL]
        if isinstance(r, HostRoutes)
    }


OWN = GatewayScope("shop", "gw")


def test_the_shared_pool_serves_a_gateway_until_its_own_proxies_and_endpoints_have_taken_over() -> (
    None
):
    cluster = Cluster(dedicated=False)
    shared = cluster.translate()
    cluster.apply(shared)
    (bind_port,) = _served_ports(shared, SHARED_POOL)
    assert _service(shared)["spec"]["ports"][0]["targetPort"] == bind_port

    # The Gateway is pointed at parameters: its proxies are created, but none is available.
    cluster.put(_gateway(dedicated=True))
    waiting = cluster.translate()
    assert _served_ports(waiting, SHARED_POOL) == {bind_port}  # still served where it was
    assert _served_ports(waiting, OWN) == {80}  # and given to its own proxies
    assert _shared_routes(waiting) == {(bind_port, 80, "shop.example.com")}
    service = _service(waiting)
    assert service["spec"]["ports"][0]["targetPort"] == bind_port  # traffic stays shared
    assert service["metadata"]["labels"]["app.kubernetes.io/component"] == "vip"
    (entry,) = waiting.provision
    kinds = {o.key.kind for o in entry.objects}
    assert {"Deployment", "ServiceAccount"} <= kinds
    assert any(k.name == "gw-coxswain-infra" for k in entry.keep)  # the inert SA is kept
    cluster.apply(waiting)
    assert ("ServiceAccount", "shop", "gw-coxswain-infra") in cluster.objects
    assert cluster.translate().snapshots == waiting.snapshots  # no progress while unavailable

    # A dedicated proxy is Ready: the Service moves; the shared pool goes on serving while the
    # Service's endpoints still list the shared port.
    cluster.deployment_available()
    switching = cluster.translate()
    service = _service(switching)
    assert service["spec"]["ports"][0]["targetPort"] == 80
    assert service["metadata"]["labels"]["app.kubernetes.io/component"] == "dedicated-proxy"
    assert _served_ports(switching, SHARED_POOL) == {bind_port}
    cluster.apply(switching)
    assert ("ServiceAccount", "shop", "gw-coxswain-infra") not in cluster.objects
    cluster.endpoints(port=bind_port)  # Kubernetes has not rewritten the slice yet
    assert _served_ports(cluster.translate(), SHARED_POOL) == {bind_port}

    # The endpoints have moved to the dedicated pods: the shared pool lets the Gateway go.
    cluster.endpoints(port=80)
    done = cluster.translate()
    assert _served_ports(done, SHARED_POOL) == set()
    assert _shared_routes(done) == set()
    assert _served_ports(done, OWN) == {80}
    # Back to shared later: the same bind port, so the Service's targetPort is as before.
    cluster.apply(done)
    cluster.put(_gateway(dedicated=False))
    assert _served_ports(cluster.translate(), SHARED_POOL) == {bind_port}


def test_a_gateway_created_dedicated_is_never_served_by_the_shared_pool() -> None:
    cluster = Cluster(dedicated=True)
    result = cluster.translate()
    assert _served_ports(result, SHARED_POOL) == set()
    assert _service(result)["metadata"]["labels"]["app.kubernetes.io/component"] == (
        "dedicated-proxy"
    )


def test_without_provisioned_services_there_is_no_handover() -> None:
    cluster = Cluster(dedicated=False)
    cluster.put(_gateway(dedicated=True))
    result = translate(Inputs.from_objects(list(cluster.objects.values())), Options())
    assert _served_ports(result, SHARED_POOL) == set()


def test_mirrored_shared_endpoints_stay_until_a_dedicated_pod_is_listed() -> None:
    """A Gateway outside the shared proxies' namespace reaches them through mirrored slices;
    switching, its Service must never be left with no endpoint at all."""
    cluster = Cluster(dedicated=False, options=MIRRORING)
    cluster.endpoints(port=8080, service="proxy", namespace="coxswain-system")
    shared = cluster.translate()
    cluster.apply(shared)
    mirrored = ("EndpointSlice", "shop", "gw-coxswain-ipv4")
    assert mirrored in cluster.objects
    (bind_port,) = _served_ports(shared, SHARED_POOL)

    cluster.put(_gateway(dedicated=True))
    cluster.apply(cluster.translate())
    cluster.deployment_available()
    switching = cluster.translate()
    assert _service(switching)["spec"]["ports"][0]["targetPort"] == 80
    cluster.apply(switching)
    assert mirrored in cluster.objects  # kept: no dedicated pod is listed yet
    cluster.endpoints(port=80, ready=False)  # listed, but not Ready
    cluster.apply(cluster.translate())
    assert mirrored in cluster.objects

    cluster.endpoints(port=80)
    draining = cluster.translate()
    assert _served_ports(draining, SHARED_POOL) == {bind_port}  # the mirror still lists it
    cluster.apply(draining)
    assert mirrored not in cluster.objects
    assert _served_ports(cluster.translate(), SHARED_POOL) == set()
