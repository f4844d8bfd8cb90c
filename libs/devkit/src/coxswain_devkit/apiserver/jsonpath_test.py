"""The JSONPath subset CRD printer columns use: what each step finds, and what is refused.

Covers fields (escaped dots, quoted brackets), recursive descent, indexes (negative and out of
range), slices, `[*]` over lists and maps, filters by existence and by each comparison (strings,
numbers, booleans; a string compared with a number matching nothing), the `{}` template braces
kubectl's own `-o jsonpath` uses, how found values print, and paths that do not parse. The
columns built from them are in columns_test.py; kubectl printing them in
printer_columns_kubectl_test.py.
"""

from __future__ import annotations

from typing import Any

import pytest

from coxswain_devkit.apiserver import jsonpath

GATEWAY: dict[str, Any] = {
    "metadata": {
        "name": "gw",
        "labels": {"app.kubernetes.io/name": "shop"},
        "annotations": {"a b": "spaced"},
    },
    "spec": {"gatewayClassName": "coxswain", "listeners": [{"port": 80}, {"port": 443}]},
    "status": {
        "addresses": [{"value": "10.0.0.7"}, {"value": "10.0.0.8"}],
        "conditions": [
            {"type": "Accepted", "status": "True", "observedGeneration": 2, "ok": True},
            {"type": "Programmed", "status": "False", "observedGeneration": 1, "ok": False},
        ],
    },
}


@pytest.mark.parametrize(
    ("path", "found"),
    [
        pytest.param(".spec.gatewayClassName", ["coxswain"], id="field"),
        pytest.param("$.spec.gatewayClassName", ["coxswain"], id="root-dollar"),
        pytest.param("{.spec.gatewayClassName}", ["coxswain"], id="template-braces"),
        pytest.param(".spec.missing", [], id="missing-field-finds-nothing"),
        pytest.param(".spec.gatewayClassName.deeper", [], id="field-of-a-string"),
        pytest.param(r".metadata.labels.app\.kubernetes\.io/name", ["shop"], id="escaped-dots"),
        pytest.param(".metadata.labels['app.kubernetes.io/name']", ["shop"], id="quoted-bracket"),
        pytest.param('.metadata.annotations["a b"]', ["spaced"], id="double-quoted-bracket"),
        pytest.param(".status.addresses[*].value", ["10.0.0.7", "10.0.0.8"], id="every"),
        pytest.param(".status.addresses[0].value", ["10.0.0.7"], id="index"),
        pytest.param(".status.addresses[-1].value", ["10.0.0.8"], id="negative-index"),
        pytest.param(".status.addresses[5].value", [], id="index-out-of-range"),
        pytest.param(".spec.listeners[1:].port", [443], id="slice"),
        pytest.param(".spec.listeners[:1].port", [80], id="slice-to"),
        pytest.param(".metadata.labels[*]", ["shop"], id="every-value-of-a-map"),
        pytest.param("..port", [80, 443], id="recursive-descent"),
        pytest.param(
            '.status.conditions[?(@.type=="Programmed")].status', ["False"], id="filter-equals"
        ),
        pytest.param(
            ".status.conditions[?(@.type=='Accepted')].status", ["True"], id="filter-single-quotes"
        ),
        pytest.param(
            '.status.conditions[?(@.type != "Accepted")].type', ["Programmed"], id="filter-not"
        ),
        pytest.param(
            ".status.conditions[?(@.observedGeneration>1)].type", ["Accepted"], id="filter-number"
        ),
        pytest.param(
            ".status.conditions[?(@.observedGeneration<=1)].type", ["Programmed"], id="filter-le"
        ),
        pytest.param(".status.conditions[?(@.ok==true)].type", ["Accepted"], id="filter-boolean"),
        pytest.param(
            '.status.conditions[?(@.observedGeneration>"1")].type',
            [],
            id="string-and-number-never-ordered",
        ),
        pytest.param(".status.conditions[?(@.ok)].type", ["Accepted", "Programmed"], id="exists"),
        pytest.param('.status.conditions[?(@.type=="Ready")].status', [], id="filter-no-match"),
    ],
)
def test_find(path: str, found: list[Any]) -> None:
    assert list(jsonpath.find(jsonpath.parse(path), GATEWAY)) == found


@pytest.mark.parametrize(
    ("value", "printed"),
    [
        pytest.param("a", "a", id="string-bare"),
        pytest.param(["a.example", "b.example"], '["a.example","b.example"]', id="list-as-json"),
        pytest.param({"k": 1}, '{"k":1}', id="object-as-json"),
        pytest.param(3, "3", id="integer"),
        pytest.param(3.0, "3", id="whole-float"),
        pytest.param(1.5, "1.5", id="float"),
        pytest.param(True, "true", id="boolean"),
        pytest.param(None, "null", id="null"),
    ],
)
def test_text(value: Any, printed: str) -> None:
    assert jsonpath.text(value) == printed


@pytest.mark.parametrize(
    "path",
    [
        pytest.param(".a[", id="unclosed-bracket"),
        pytest.param(".a[x]", id="bare-word-subscript"),
        pytest.param(".a[?(@.b ~ 1)]", id="unknown-operator"),
        pytest.param(".a[?(@.b == nope)]", id="bad-literal"),
        pytest.param("a.b", id="no-leading-dot"),
        pytest.param(".a..", id="descent-without-a-name"),
    ],
)
def test_bad_paths_are_refused(path: str) -> None:
    with pytest.raises(jsonpath.Invalid):
        jsonpath.parse(path)
