"""`kubectl get` prints custom resources with their CRDs' printer columns, lists and watches.

Covers, through the real kubectl: `kubectl get gateways` with upstream's CLASS, ADDRESS,
PROGRAMMED and AGE (a Gateway with no status leaves ADDRESS and PROGRAMMED empty), GatewayClass
DESCRIPTION only with `-o wide` (priority 1), HTTPRoute HOSTNAMES as a JSON list, one object by
name, several kinds at once, and a CRD of the test's own with integer and boolean columns beside
one without columns (NAME and AGE). Then a watch asked for as a Table, as `kubectl get -w`
does, whose events carry the same columns and cells. The JSONPath and cell rules are in
jsonpath_test.py and columns_test.py.
"""

from __future__ import annotations

import json
import urllib.request
from typing import Any

import pytest

from coxswain_devkit import crds
from coxswain_devkit.apiserver import ThreadedApiServer
from coxswain_devkit.apiserver.conftest import Kubectl

G = "gateway.networking.k8s.io/v1"
TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io"


def _gateway(name: str, status: dict[str, Any] | None = None) -> dict[str, Any]:
    gateway: dict[str, Any] = {
        "apiVersion": G,
        "kind": "Gateway",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"gatewayClassName": "coxswain", "listeners": []},
    }
    if status is not None:
        gateway["status"] = status
    return gateway


PROGRAMMED = {
    "addresses": [{"type": "IPAddress", "value": "10.0.0.7"}],
    "conditions": [
        {"type": "Accepted", "status": "True"},
        {"type": "Programmed", "status": "True"},
    ],
}


def _crd(name: str, columns: list[dict[str, Any]] | None) -> dict[str, Any]:
    version: dict[str, Any] = {
        "name": "v1",
        "served": True,
        "storage": True,
        "schema": {
            "openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
        },
    }
    if columns is not None:
        version["additionalPrinterColumns"] = columns
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{name}s.example.com"},
        "spec": {
            "group": "example.com",
            "scope": "Namespaced",
            "names": {"kind": name.capitalize(), "plural": f"{name}s", "singular": name},
            "versions": [version],
        },
    }


@pytest.fixture
def seeded(api: ThreadedApiServer) -> None:
    widget_columns: list[dict[str, Any]] = [
        {"name": "Replicas", "type": "integer", "jsonPath": ".spec.replicas"},
        {"name": "Paused", "type": "boolean", "jsonPath": ".spec.paused"},
        {"name": "Owner", "type": "string", "jsonPath": ".spec.owner", "priority": 1},
    ]
    definitions = [*crds.standard(), _crd("widget", widget_columns), _crd("plain", None)]
    api.call(lambda s: s.apply(definitions))
    api.call(
        lambda s: s.apply(
            [
                {
                    "apiVersion": G,
                    "kind": "GatewayClass",
                    "metadata": {"name": "coxswain"},
                    "spec": {
                        "controllerName": "coxswain-labs.dev/controller",
                        "description": "shared proxies",
                    },
                    "status": {"conditions": [{"type": "Accepted", "status": "True"}]},
                },
                _gateway("shop", PROGRAMMED),
                _gateway("fresh"),
                {
                    "apiVersion": G,
                    "kind": "HTTPRoute",
                    "metadata": {"name": "web", "namespace": "default"},
                    "spec": {"hostnames": ["shop.example", "www.shop.example"]},
                },
                {
                    "apiVersion": "example.com/v1",
                    "kind": "Widget",
                    "metadata": {"name": "w", "namespace": "default"},
                    "spec": {"replicas": 3, "paused": True, "owner": "team-a"},
                },
                {
                    "apiVersion": "example.com/v1",
                    "kind": "Plain",
                    "metadata": {"name": "p", "namespace": "default"},
                    "spec": {"replicas": 3},
                },
            ]
        )
    )


def _rows(out: str) -> list[list[str]]:
    return [line.split() for line in out.strip().splitlines()]


def test_get_gateways_shows_class_address_programmed(kubectl: Kubectl, seeded: None) -> None:
    rows = _rows(kubectl("get", "gateways"))
    assert rows[0] == ["NAME", "CLASS", "ADDRESS", "PROGRAMMED", "AGE"]
    # The ages differ; a Gateway without status has empty ADDRESS and PROGRAMMED cells.
    assert [r[:-1] for r in rows[1:]] == [
        ["fresh", "coxswain"],
        ["shop", "coxswain", "10.0.0.7", "True"],
    ]
    assert _rows(kubectl("get", "gateway", "shop"))[1][:4] == [
        "shop",
        "coxswain",
        "10.0.0.7",
        "True",
    ]


def test_gatewayclass_description_is_wide_only(kubectl: Kubectl, seeded: None) -> None:
    assert _rows(kubectl("get", "gatewayclasses"))[0] == ["NAME", "CONTROLLER", "ACCEPTED", "AGE"]
    wide = _rows(kubectl("get", "gatewayclasses", "-o", "wide"))
    assert wide[0] == ["NAME", "CONTROLLER", "ACCEPTED", "AGE", "DESCRIPTION"]
    assert wide[1][:3] == ["coxswain", "coxswain-labs.dev/controller", "True"]
    assert wide[1][4:] == ["shared", "proxies"]


def test_httproute_hostnames(kubectl: Kubectl, seeded: None) -> None:
    rows = _rows(kubectl("get", "httproutes"))
    assert rows[0] == ["NAME", "HOSTNAMES", "AGE"]
    assert rows[1][:2] == ["web", '["shop.example","www.shop.example"]']


def test_several_kinds_at_once(kubectl: Kubectl, seeded: None) -> None:
    out = kubectl("get", "gateways,httproutes")
    assert "CLASS" in out and "HOSTNAMES" in out
    assert "gateway.gateway.networking.k8s.io/shop" in out


def test_own_crd_typed_columns_and_default_age(kubectl: Kubectl, seeded: None) -> None:
    widgets = _rows(kubectl("get", "widgets"))
    # Its own columns replace the defaulted Age: it declares none.
    assert widgets[0] == ["NAME", "REPLICAS", "PAUSED"]
    assert widgets[1] == ["w", "3", "true"]
    wide = _rows(kubectl("get", "widgets", "-o", "wide"))
    assert wide == [["NAME", "REPLICAS", "PAUSED", "OWNER"], ["w", "3", "true", "team-a"]]
    plain = _rows(kubectl("get", "plains"))
    assert plain[0] == ["NAME", "AGE"]
    assert plain[1][0] == "p"


def test_watch_as_table_carries_the_columns(api: ThreadedApiServer, seeded: None) -> None:
    url = f"{api.url}/apis/gateway.networking.k8s.io/v1/namespaces/default/gateways"
    request = urllib.request.Request(
        f"{url}?watch=true&timeoutSeconds=1&fieldSelector=metadata.name%3Dshop",
        headers={"Accept": TABLE},
    )
    with urllib.request.urlopen(request, timeout=30) as stream:
        event = json.loads(stream.readline())
    assert event["type"] == "ADDED"
    table = event["object"]
    assert [c["name"] for c in table["columnDefinitions"]] == [
        "Name",
        "Class",
        "Address",
        "Programmed",
        "Age",
    ]
    assert table["rows"][0]["cells"][:4] == ["shop", "coxswain", "10.0.0.7", "True"]
