"""CoxswainGatewayParameters: what one object may say, and how two layers combine.

Covers each field's checks (the message an `InvalidParameters` condition carries) and the
per-field overlay of a Gateway's parameters over its class's. How a Gateway or class reports
them is the golden cases' (provision-invalid-parameters, provision-dedicated-layered-parameters).
"""

from __future__ import annotations

from typing import Any

import pytest

from coxswain_controller.translate.provision import parameters
from coxswain_controller.translate.provision.parameters import GatewayParameters, layered


def _read(spec: Any) -> GatewayParameters | str:
    return parameters.read(
        {
            "kind": "CoxswainGatewayParameters",
            "metadata": {"name": "p", "namespace": "ns"},
            "spec": spec,
        }
    )


@pytest.mark.parametrize(
    ("spec", "problem"),
    [
        pytest.param({"replicas": -1}, "spec.replicas must be an integer", id="replicas-negative"),
        pytest.param({"replicas": True}, "spec.replicas must be an integer", id="replicas-bool"),
        pytest.param({"image": "a b"}, "spec.image must be an image reference", id="image-space"),
        pytest.param(
            {"resources": {"limits": {"cpu": "lots"}}}, "is not a quantity", id="quantity"
        ),
        pytest.param({"resources": {"claims": {}}}, "resources.claims is not a field", id="claims"),
        pytest.param({"service": {"type": "NodePort"}}, "cannot preserve", id="nodeport-refused"),
        pytest.param({"service": {"type": "External"}}, "LoadBalancer or ClusterIP", id="type"),
        pytest.param({"service": {"port": 80}}, "spec.service.port is not a field", id="svc-field"),
        pytest.param({"labels": {"a": "b c"}}, "not a valid label value", id="label-value"),
        pytest.param({"service": {"annotations": {"/x": "y"}}}, "not a valid key", id="ann-key"),
        pytest.param({"podTemplate": []}, "must be an object", id="template-shape"),
        pytest.param({"podTemplate": {"kind": "Pod"}}, "podTemplate.kind is not a field", id="tf"),
        pytest.param(
            {"podTemplate": {"spec": {"containers": [{"$patch": "replace"}]}}},
            "removes the 'proxy' container",
            id="template-replaces-containers",
        ),
        pytest.param(
            {"podTemplate": {"spec": {"containers": "proxy"}}},
            "must be a list of containers",
            id="template-containers-shape",
        ),
        pytest.param({"replica": 1}, "unknown field(s) spec.replica", id="unknown-field"),
        pytest.param(7, "spec must be an object", id="spec-shape"),
    ],
)
def test_unusable_parameters_say_why(spec: Any, problem: str) -> None:
    found = _read(spec)
    assert isinstance(found, str)
    assert problem in found
    assert found.startswith("CoxswainGatewayParameters ns/p: ")


def test_every_field_read() -> None:
    found = _read(
        {
            "replicas": 0,
            "image": "example/proxy:1",
            "resources": {"requests": {"cpu": 0.5, "memory": "64Mi"}},
            "service": {"type": "ClusterIP", "annotations": {"example.com/a": "b"}},
            "labels": {"team": "shop"},
            "podTemplate": {"spec": {"containers": [{"name": "proxy", "env": []}]}},
        }
    )
    assert found == GatewayParameters(
        replicas=0,
        image="example/proxy:1",
        resources={"requests": {"cpu": 0.5, "memory": "64Mi"}},
        service_type="ClusterIP",
        service_annotations={"example.com/a": "b"},
        labels={"team": "shop"},
        pod_templates=({"spec": {"containers": [{"name": "proxy", "env": []}]}},),
        sources=("CoxswainGatewayParameters ns/p",),
    )


def test_the_gateways_layer_wins_field_by_field() -> None:
    cls = GatewayParameters(
        replicas=2,
        image="class/proxy",
        resources={"limits": {"cpu": "1"}},
        service_type="LoadBalancer",
        service_annotations={"a": "class", "b": "class"},
        labels={"x": "class", "y": "class"},
        pod_templates=({"spec": {}},),
        sources=("class",),
    )
    gateway = GatewayParameters(
        replicas=0,
        service_annotations={"b": "gateway"},
        labels={"y": "gateway"},
        pod_templates=({"metadata": {}},),
        sources=("gateway",),
    )
    assert layered(cls, gateway) == GatewayParameters(
        replicas=0,  # set (even to 0): the Gateway's
        image="class/proxy",  # unset in the Gateway's layer: the class's
        resources={"limits": {"cpu": "1"}},
        service_type="LoadBalancer",
        service_annotations={"a": "class", "b": "gateway"},
        labels={"x": "class", "y": "gateway"},
        pod_templates=({"spec": {}}, {"metadata": {}}),  # both, class first
        sources=("class", "gateway"),
    )
    assert layered(None, None) == GatewayParameters()
