"""Desired against live: what a real API server adds is no difference, what the controller
stopped asking for is, and a write keeps what others own.

Covers `in_sync` with a live object as kube-apiserver and the controllers return it (defaults in
the pod template, node ports and cluster IPs, a Deployment's revision annotation, quantities
normalised), a removed label or field, `updated` keeping node ports, others' labels and
annotations and unowned fields, `needs_recreate` for immutable fields, and `foreign`. The
requests that carry them are provisioner_test's.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from coxswain_controller.provisioner import plan

MANAGED = {"app.kubernetes.io/managed-by": "coxswain", "coxswain-labs.dev/controller": "c"}
OWNER = {
    "apiVersion": "gateway.networking.k8s.io/v1",
    "kind": "Gateway",
    "name": "gw",
    "uid": "u1",
    "controller": True,
    "blockOwnerDeletion": True,
}


def _meta(**extra: Any) -> dict[str, Any]:
    return {
        "name": "gw-coxswain",
        "namespace": "shop",
        "labels": {**MANAGED, "team": "shop"},
        "annotations": {},
        "ownerReferences": [OWNER],
        **extra,
    }


def _service(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": _meta(),
        "spec": {
            "type": "LoadBalancer",
            "selector": {"app": "proxy"},
            "ports": [{"name": "tcp-80", "port": 80, "targetPort": 20001, "protocol": "TCP"}],
            **spec,
        },
    }


def _deployment(cpu: str = "1") -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": _meta(),
        "spec": {
            "selector": {"matchLabels": {"app": "proxy"}},
            "template": {
                "metadata": {"labels": {"app": "proxy"}, "annotations": {}},
                "spec": {
                    "containers": [
                        {
                            "name": "proxy",
                            "image": "proxy:1",
                            "resources": {"limits": {"cpu": cpu, "memory": "1Gi"}},
                        }
                    ]
                },
            },
        },
    }


def _as_served(body: dict[str, Any]) -> dict[str, Any]:
    """`body` as the API server stores and returns it, with what the server and other
    controllers add."""
    live = plan.created(body)
    live["metadata"] |= {"uid": "x", "resourceVersion": "7", "creationTimestamp": "2026-01-01"}
    if body["kind"] == "Service":
        live["spec"] |= {"clusterIP": "10.96.0.9", "clusterIPs": ["10.96.0.9"]}
        live["spec"]["externalTrafficPolicy"] = "Cluster"
        for port in live["spec"]["ports"]:
            port["nodePort"] = 31000 + port["port"]
        live["status"] = {"loadBalancer": {"ingress": [{"ip": "203.0.113.1"}]}}
    if body["kind"] == "Deployment":
        live["metadata"]["annotations"]["deployment.kubernetes.io/revision"] = "3"
        live["spec"] |= {"replicas": 1, "strategy": {"type": "RollingUpdate"}}
        pod = live["spec"]["template"]["spec"]
        pod |= {"restartPolicy": "Always", "dnsPolicy": "ClusterFirst"}
        container = pod["containers"][0]
        container |= {"imagePullPolicy": "IfNotPresent", "terminationMessagePath": "/dev/x"}
        # The server prints quantities canonically: 1000m is 1, 1024Mi is 1Gi.
        limits = container["resources"]["limits"]
        limits["cpu"] = {"1000m": "1"}.get(limits["cpu"], limits["cpu"])
        live["spec"]["template"]["metadata"].pop("annotations")
    return live


@pytest.mark.parametrize(
    "desired",
    [
        pytest.param(_service(), id="service-with-node-ports-and-cluster-ip"),
        pytest.param(_deployment(), id="deployment-with-pod-defaults"),
        pytest.param(_deployment("1000m"), id="deployment-quantity-normalised"),
    ],
)
def test_what_the_server_adds_is_no_difference(desired: dict[str, Any]) -> None:
    assert plan.in_sync(desired, _as_served(desired))


def test_a_change_to_an_owned_field_or_a_label_is_a_difference() -> None:
    desired = _service()
    live = _as_served(desired)
    drifted = copy.deepcopy(live)
    drifted["spec"]["selector"] = {"app": "other"}
    assert not plan.in_sync(desired, drifted)
    relabelled = copy.deepcopy(live)
    del relabelled["metadata"]["labels"]["team"]
    assert not plan.in_sync(desired, relabelled)
    orphaned = copy.deepcopy(live)
    orphaned["metadata"]["ownerReferences"] = []
    assert not plan.in_sync(desired, orphaned)


def test_a_label_no_longer_asked_for_is_a_difference_and_is_removed() -> None:
    before = _service()
    live = _as_served(before)
    live["metadata"]["labels"]["theirs"] = "kept"  # set by someone else
    after = _service()
    del after["metadata"]["labels"]["team"]
    assert plan.contains(live, after)  # containment alone cannot see it...
    assert not plan.in_sync(after, live)  # ...the record does
    written = plan.updated(after, live)
    assert "team" not in written["metadata"]["labels"]
    assert written["metadata"]["labels"]["theirs"] == "kept"
    assert plan.in_sync(after, written)


def test_a_write_keeps_node_ports_status_and_fields_it_does_not_own() -> None:
    desired = _service()
    live = _as_served(desired)
    changed = _service(ports=[{"name": "tcp-80", "port": 80, "targetPort": 20002}])
    written = plan.updated(changed, live)
    assert written["spec"]["ports"] == [
        {"name": "tcp-80", "port": 80, "targetPort": 20002, "nodePort": 31080}
    ]
    assert written["spec"]["clusterIP"] == "10.96.0.9"  # unowned: as the server set it
    assert written["spec"]["externalTrafficPolicy"] == "Cluster"
    assert written["status"] == live["status"]
    assert written["metadata"]["resourceVersion"] == "7"  # a racing change makes this a 409


def test_a_deployment_keeps_its_revision_and_replicas_it_was_never_given() -> None:
    desired = _deployment()
    live = _as_served(desired)
    live["spec"]["replicas"] = 5  # an autoscaler's: the parameters set none
    written = plan.updated(_deployment("2"), live)
    assert written["spec"]["replicas"] == 5
    assert written["metadata"]["annotations"]["deployment.kubernetes.io/revision"] == "3"
    limits = written["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]
    assert limits["cpu"] == "2"


def test_a_field_the_controller_stopped_owning_is_removed() -> None:
    pinned = _service(loadBalancerIP="192.0.2.1")
    live = _as_served(pinned)
    written = plan.updated(_service(), live)
    assert "loadBalancerIP" not in written["spec"]


@pytest.mark.parametrize(
    ("desired", "recreate"),
    [
        pytest.param(_service(clusterIP="10.96.0.50"), True, id="requested-cluster-ip"),
        pytest.param(_service(clusterIP="10.96.0.9"), False, id="cluster-ip-as-requested"),
        pytest.param(_service(), False, id="no-cluster-ip-requested"),
    ],
)
def test_an_immutable_field_that_differs_needs_a_new_object(
    desired: dict[str, Any], recreate: bool
) -> None:
    live = _as_served(_service())
    assert plan.needs_recreate(desired, live) is recreate


def test_only_the_controllers_own_objects_are_replaced() -> None:
    desired = _service()
    live = _as_served(desired)
    assert plan.foreign(live, desired, MANAGED) == ""
    recreated = copy.deepcopy(live)  # a Gateway deleted and created again: same name, new uid
    recreated["metadata"]["ownerReferences"][0]["uid"] = "u0"
    assert plan.foreign(recreated, desired, MANAGED) == ""
    unlabelled = copy.deepcopy(live)
    unlabelled["metadata"]["labels"] = {}
    assert "not managed by this controller" in plan.foreign(unlabelled, desired, MANAGED)
    claimed = copy.deepcopy(live)
    claimed["metadata"]["ownerReferences"][0]["name"] = "other"
    assert "controlled by Gateway other" in plan.foreign(claimed, desired, MANAGED)
