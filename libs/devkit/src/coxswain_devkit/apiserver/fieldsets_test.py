"""Field sets, pure: members of an object, merging, removal, fieldsV1 both ways, paths printed.

Covers: leaves and associative-list elements as members (maps not), keys defaulted (protocol
TCP), sets by value, atomic lists and structs whole; merge by key and by value, replace for
atomic; `changed` (added, modified, removed); removing an element and pruning what it leaves
empty; fieldsV1 written with `.` for elements and read back; paths as the API server prints
them; a CRD schema's list types. Leaves out ownership (apply_test) and kubectl.
"""

from __future__ import annotations

from typing import Any

import pytest

from coxswain_devkit.apiserver import fieldsets as fs

BUILTIN = fs.BuiltinShape()
POD_SPEC = {
    "containers": [
        {"name": "app", "image": "i", "ports": [{"containerPort": 80}], "args": ["a", "b"]}
    ],
    "nodeSelector": {"zone": "a"},
}


def test_members_of_an_object() -> None:
    members = fs.fieldset({"spec": POD_SPEC, "metadata": {"finalizers": ["x"]}}, BUILTIN)
    app = ("f:spec", "f:containers", 'k:{"name":"app"}')
    port = (*app, "f:ports", 'k:{"containerPort":80,"protocol":"TCP"}')
    assert members == {
        app,
        (*app, "f:name"),
        (*app, "f:image"),
        (*app, "f:args"),
        port,
        (*port, "f:containerPort"),
        ("f:spec", "f:nodeSelector"),
        ("f:metadata", "f:finalizers", 'v:"x"'),
    }


@pytest.mark.parametrize(
    ("base", "config", "merged"),
    [
        pytest.param(
            {"containers": [{"name": "a", "image": "1"}, {"name": "b", "image": "1"}]},
            {"containers": [{"name": "b", "image": "2"}, {"name": "c", "image": "1"}]},
            {"containers": [{"name": "a", "image": "1"}, {"name": "b", "image": "2"},
                            {"name": "c", "image": "1"}]},
            id="associative-list-by-key",
        ),
        pytest.param(
            {"finalizers": ["a"]}, {"finalizers": ["b", "a"]}, {"finalizers": ["a", "b"]},
            id="set-by-value",
        ),
        pytest.param(
            {"args": ["a", "b"]}, {"args": ["c"]}, {"args": ["c"]}, id="atomic-list-replaced"
        ),
        pytest.param(
            {"selector": {"matchLabels": {"a": "1"}}},
            {"selector": {"matchLabels": {"b": "2"}}},
            {"selector": {"matchLabels": {"b": "2"}}},
            id="atomic-struct-replaced",
        ),
        pytest.param(
            {"a": {"b": 1, "c": 2}}, {"a": {"c": None}}, {"a": {"b": 1}}, id="null-removes"
        ),
    ],
)  # fmt: skip
def test_merge(base: dict[str, Any], config: dict[str, Any], merged: dict[str, Any]) -> None:
    assert fs.merge(base, config, BUILTIN) == merged


def test_changed_added_modified_removed() -> None:
    old = {"spec": {"replicas": 1, "paused": False}}
    new = {"spec": {"replicas": 2, "minReadySeconds": 5}}
    modified, removed = fs.changed(old, new, BUILTIN)
    assert modified == {("f:spec", "f:replicas"), ("f:spec", "f:minReadySeconds")}
    assert removed == {("f:spec", "f:paused")}


def test_remove_an_element_and_prune() -> None:
    obj = {"spec": {"containers": [{"name": "a", "env": [{"name": "X", "value": "1"}]}]}}
    path = ("f:spec", "f:containers", 'k:{"name":"a"}', "f:env", 'k:{"name":"X"}')
    fs.remove(obj, path)
    fs.prune_empty(obj, path)
    assert obj == {"spec": {"containers": [{"name": "a"}]}}


def test_fields_v1_both_ways() -> None:
    members = fs.fieldset({"spec": POD_SPEC}, BUILTIN)
    tree = fs.to_fields_v1(members)
    app = tree["f:spec"]["f:containers"]['k:{"name":"app"}']
    assert app["."] == {} and app["f:image"] == {}
    assert tree["f:spec"]["f:nodeSelector"] == {}
    assert fs.from_fields_v1(tree) == members


def test_paths_printed_as_the_api_server_does() -> None:
    path = ("f:spec", "f:containers", 'k:{"name":"app"}', "f:image")
    assert fs.describe(path) == '.spec.containers[name="app"].image'
    assert fs.describe(("f:metadata", "f:finalizers", 'v:"x"')) == '.metadata.finalizers[="x"]'


def test_a_crd_schema_says_which_lists_are_maps_and_sets() -> None:
    shape = fs.SchemaShape({"properties": {"spec": {"properties": {
        "listeners": {"type": "array", "x-kubernetes-list-type": "map",
                      "x-kubernetes-list-map-keys": ["name"], "items": {"type": "object"}},
        "hosts": {"type": "array", "x-kubernetes-list-type": "set"},
        "rules": {"type": "array"},
        "labels": {"type": "object", "x-kubernetes-map-type": "atomic"}}}}})  # fmt: skip
    assert shape.list_kind(("spec", "listeners")) == ("map", ("name",))
    assert shape.list_kind(("spec", "hosts")) == ("set", ())
    assert shape.list_kind(("spec", "rules")) == ("atomic", ())
    assert shape.atomic(("spec", "labels"))
