"""Patches: JSON merge patch, JSON patch and strategic merge patch, applied without the server.

Covers RFC 7386 (null deletes, objects merge, lists replace), every RFC 6902 operation and its
failures, and strategic merge on the lists Coxswain's kinds use (containers, ports, env,
volumes, conditions, finalizers) with kubectl's directives. The choice of algorithm by
Content-Type, and 415 for strategic merge on custom resources, are covered in crud_test.py.
"""

from __future__ import annotations

from typing import Any

import pytest

from coxswain_devkit.apiserver import errors, patch, strategic


@pytest.mark.parametrize(
    ("target", "body", "result"),
    [
        pytest.param({"a": 1, "b": 2}, {"b": None}, {"a": 1}, id="null-deletes"),
        pytest.param({"a": {"x": 1}}, {"a": {"y": 2}}, {"a": {"x": 1, "y": 2}}, id="objects-merge"),
        pytest.param({"a": [1, 2]}, {"a": [3]}, {"a": [3]}, id="lists-replace"),
        pytest.param({"a": 1}, {"a": {"b": 1}}, {"a": {"b": 1}}, id="scalar-becomes-object"),
    ],
)
def test_merge_patch(target: Any, body: Any, result: Any) -> None:
    assert patch.merge_patch(target, body) == result


@pytest.mark.parametrize(
    ("ops", "result"),
    [
        pytest.param(
            [{"op": "add", "path": "/l/1", "value": 9}],
            {"a": {"b": 1}, "l": [1, 9, 2]},
            id="add-into-list",
        ),
        pytest.param(
            [{"op": "add", "path": "/l/-", "value": 9}],
            {"a": {"b": 1}, "l": [1, 2, 9]},
            id="append",
        ),
        pytest.param([{"op": "remove", "path": "/a/b"}], {"a": {}, "l": [1, 2]}, id="remove"),
        pytest.param(
            [{"op": "replace", "path": "/a/b", "value": 5}],
            {"a": {"b": 5}, "l": [1, 2]},
            id="replace",
        ),
        pytest.param(
            [{"op": "move", "from": "/a/b", "path": "/c"}],
            {"a": {}, "l": [1, 2], "c": 1},
            id="move",
        ),
        pytest.param(
            [{"op": "copy", "from": "/l", "path": "/m"}],
            {"a": {"b": 1}, "l": [1, 2], "m": [1, 2]},
            id="copy",
        ),
        pytest.param(
            [{"op": "test", "path": "/a/b", "value": 1}],
            {"a": {"b": 1}, "l": [1, 2]},
            id="test-passes",
        ),
        pytest.param(
            [{"op": "add", "path": "/metadata~1x", "value": 1}],
            {"a": {"b": 1}, "l": [1, 2], "metadata/x": 1},
            id="escaped-slash",
        ),
    ],
)
def test_json_patch(ops: list[dict[str, Any]], result: Any) -> None:
    original = {"a": {"b": 1}, "l": [1, 2]}
    assert patch.json_patch(original, ops) == result
    assert original == {"a": {"b": 1}, "l": [1, 2]}, "the input must not change"


@pytest.mark.parametrize(
    ("ops", "code"),
    [
        pytest.param(
            [{"op": "test", "path": "/a/b", "value": 2}], 422, id="failed-test-is-invalid"
        ),
        pytest.param(
            [{"op": "replace", "path": "/nope", "value": 1}], 400, id="replace-needs-target"
        ),
        pytest.param([{"op": "remove", "path": "/l/5"}], 400, id="index-out-of-range"),
        pytest.param([{"op": "frobnicate", "path": "/a"}], 400, id="unknown-op"),
        pytest.param({"op": "add"}, 400, id="not-a-list"),
    ],
)
def test_json_patch_errors(ops: Any, code: int) -> None:
    with pytest.raises(errors.ApiError) as raised:
        patch.json_patch({"a": {"b": 1}, "l": [1, 2]}, ops)
    assert raised.value.code == code


POD = {
    "metadata": {"name": "p", "finalizers": ["a"]},
    "spec": {
        "containers": [
            {
                "name": "app",
                "image": "v1",
                "ports": [{"containerPort": 80, "name": "http"}],
                "env": [{"name": "A", "value": "1"}],
            },
            {"name": "side", "image": "s1"},
        ],
        "volumes": [{"name": "data", "emptyDir": {}}],
    },
    "status": {
        "conditions": [
            {"type": "Ready", "status": "False"},
            {"type": "Scheduled", "status": "True"},
        ]
    },
}


def _app(obj: dict[str, Any]) -> dict[str, Any]:
    return next(c for c in obj["spec"]["containers"] if c["name"] == "app")


def test_strategic_merges_containers_by_name_and_keeps_the_rest() -> None:
    out = strategic.apply(POD, {"spec": {"containers": [{"name": "app", "image": "v2"}]}})
    assert _app(out)["image"] == "v2"
    assert _app(out)["ports"] == [{"containerPort": 80, "name": "http"}]
    assert [c["name"] for c in out["spec"]["containers"]] == ["app", "side"]


def test_strategic_merges_ports_env_and_volumes_by_key() -> None:
    body = {
        "spec": {
            "containers": [
                {
                    "name": "app",
                    "ports": [{"containerPort": 443}],
                    "env": [{"name": "A", "value": "2"}, {"name": "B", "value": "3"}],
                }
            ],
            "volumes": [{"name": "cache", "emptyDir": {}}],
        }
    }
    out = strategic.apply(POD, body)
    assert [p["containerPort"] for p in _app(out)["ports"]] == [80, 443]
    assert _app(out)["env"] == [{"name": "A", "value": "2"}, {"name": "B", "value": "3"}]
    assert [v["name"] for v in out["spec"]["volumes"]] == ["data", "cache"]


def test_strategic_merges_conditions_by_type_and_finalizers_as_a_set() -> None:
    out = strategic.apply(
        POD,
        {
            "status": {"conditions": [{"type": "Ready", "status": "True"}]},
            "metadata": {"finalizers": ["b", "a"]},
        },
    )
    assert out["status"]["conditions"] == [
        {"type": "Ready", "status": "True"},
        {"type": "Scheduled", "status": "True"},
    ]
    assert out["metadata"]["finalizers"] == ["a", "b"]


@pytest.mark.parametrize(
    ("body", "names"),
    [
        pytest.param(
            {"spec": {"containers": [{"name": "side", "$patch": "delete"}]}},
            ["app"],
            id="patch-delete-element",
        ),
        pytest.param(
            {"spec": {"containers": [{"name": "new", "image": "n"}, {"$patch": "replace"}]}},
            ["new"],
            id="patch-replace-list",
        ),
        pytest.param(
            {"spec": {"$setElementOrder/containers": [{"name": "side"}, {"name": "app"}]}},
            ["side", "app"],
            id="set-element-order",
        ),
    ],
)
def test_strategic_directives(body: dict[str, Any], names: list[str]) -> None:
    assert [c["name"] for c in strategic.apply(POD, body)["spec"]["containers"]] == names


def test_strategic_retain_keys_and_delete_from_primitive_list() -> None:
    out = strategic.apply(
        POD,
        {
            "spec": {
                "volumes": [
                    {
                        "name": "data",
                        "hostPath": {"path": "/x"},
                        "$retainKeys": ["name", "hostPath"],
                    }
                ]
            },
            "metadata": {"$deleteFromPrimitiveList/finalizers": ["a"]},
        },
    )
    assert out["spec"]["volumes"] == [{"name": "data", "hostPath": {"path": "/x"}}]
    assert out["metadata"]["finalizers"] == []


def test_service_ports_merge_on_port() -> None:
    service = {"spec": {"ports": [{"port": 80, "targetPort": 8080}]}}
    out = strategic.apply(
        service, {"spec": {"ports": [{"port": 80, "name": "http"}, {"port": 443}]}}
    )
    assert out["spec"]["ports"] == [{"port": 80, "targetPort": 8080, "name": "http"}, {"port": 443}]
