"""Object semantics through the real `kubernetes` client: what every write gets and is refused.

Covers uid and creationTimestamp, the global monotonic resourceVersion, generation bumped by
spec changes only, the status subresource split, no-op updates, 409 on a stale resourceVersion
(PUT and PATCH), 409 AlreadyExists, 404 NotFound, 422 Invalid and 400 namespace mismatches with
their Status bodies, the three patch types chosen by Content-Type (415 for strategic merge on a
custom resource), finalizers and deletionTimestamp, cluster-scoped kinds, and creates in missing
or terminating namespaces. Garbage collection is in gc_test.py, CRD lifecycle in crd_test.py.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from kubernetes.client import ApiException

from coxswain_devkit import crds
from coxswain_devkit.apiserver import ThreadedApiServer

GW = ("gateway.networking.k8s.io", "v1")


def _status(err: ApiException) -> dict[str, Any]:
    body: dict[str, Any] = json.loads(err.body or "")
    assert body["kind"] == "Status"
    assert body["code"] == err.status
    return body


def _deployment(name: str, image: str = "nginx:1") -> dict[str, Any]:
    labels = {"app": name}
    return {
        "metadata": {"name": name},
        "spec": {
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [{"name": "app", "image": image}]},
            },
        },
    }


def test_create_sets_uid_timestamp_generation_and_a_rising_resource_version(
    core: Any, clock: Any
) -> None:
    first = core.create_namespaced_config_map("default", {"metadata": {"name": "a"}})
    second = core.create_namespaced_secret("default", {"metadata": {"name": "b"}})
    third = core.create_namespace({"metadata": {"name": "c"}})
    assert first.metadata.uid != second.metadata.uid
    assert first.metadata.creation_timestamp.timestamp() == int(clock.now)
    assert first.metadata.generation == 1
    versions = [int(o.metadata.resource_version) for o in (first, second, third)]
    assert versions == sorted(set(versions))


def test_generation_moves_with_spec_only(apps: Any) -> None:
    created = apps.create_namespaced_deployment("default", _deployment("web"))
    labelled = apps.patch_namespaced_deployment(
        "web", "default", {"metadata": {"labels": {"x": "y"}}}
    )
    status = apps.patch_namespaced_deployment_status("web", "default", {"status": {"replicas": 3}})
    changed = apps.patch_namespaced_deployment("web", "default", {"spec": {"replicas": 2}})
    assert [
        created.metadata.generation,
        labelled.metadata.generation,
        status.metadata.generation,
    ] == [1, 1, 1]
    assert changed.metadata.generation == 2


def test_status_subresource_splits_writes(apps: Any) -> None:
    body = _deployment("web")
    body["status"] = {"replicas": 9}
    created = apps.create_namespaced_deployment("default", body)
    assert created.status is None or created.status.replicas is None, "create drops status"
    apps.patch_namespaced_deployment_status(
        "web", "default", {"status": {"replicas": 3}, "spec": {"replicas": 7}}
    )
    main = apps.patch_namespaced_deployment(
        "web", "default", {"status": {"replicas": 5}, "spec": {"replicas": 4}}
    )
    assert main.status.replicas == 3, "a write to the main resource leaves status alone"
    assert main.spec.replicas == 4, "a write to /status leaves spec alone"


def test_an_update_that_changes_nothing_keeps_the_resource_version(core: Any) -> None:
    created = core.create_namespaced_config_map(
        "default", {"metadata": {"name": "a"}, "data": {"k": "v"}}
    )
    same = core.replace_namespaced_config_map("a", "default", created)
    assert same.metadata.resource_version == created.metadata.resource_version


def test_stale_resource_version_is_a_409_conflict(core: Any) -> None:
    old = core.create_namespaced_config_map(
        "default", {"metadata": {"name": "a"}, "data": {"k": "1"}}
    )
    core.patch_namespaced_config_map("a", "default", {"data": {"k": "2"}})
    old.data = {"k": "3"}
    with pytest.raises(ApiException) as put:
        core.replace_namespaced_config_map("a", "default", old)
    stale_patch = {
        "metadata": {"resourceVersion": old.metadata.resource_version},
        "data": {"k": "4"},
    }
    with pytest.raises(ApiException) as patched:
        core.patch_namespaced_config_map("a", "default", stale_patch)
    assert _status(put.value)["reason"] == "Conflict"
    assert _status(patched.value)["reason"] == "Conflict"
    assert core.read_namespaced_config_map("a", "default").data == {"k": "2"}


@pytest.mark.parametrize(
    ("call", "code", "reason"),
    [
        pytest.param(
            lambda c: c.create_namespaced_config_map("default", {"metadata": {"name": "dup"}}),
            409,
            "AlreadyExists",
            id="already-exists",
        ),
        pytest.param(
            lambda c: c.read_namespaced_config_map("nope", "default"),
            404,
            "NotFound",
            id="not-found",
        ),
        pytest.param(
            lambda c: c.delete_namespaced_secret("nope", "default"),
            404,
            "NotFound",
            id="delete-not-found",
        ),
        pytest.param(
            lambda c: c.create_namespaced_config_map("default", {"metadata": {"name": "Bad_Name"}}),
            422,
            "Invalid",
            id="invalid-name",
        ),
        pytest.param(
            lambda c: c.create_namespaced_config_map("default", {"metadata": {}}),
            422,
            "Invalid",
            id="missing-name",
        ),
        pytest.param(
            lambda c: c.create_namespaced_config_map(
                "default", {"metadata": {"name": "l", "labels": {"a": "not ok"}}}
            ),
            422,
            "Invalid",
            id="invalid-label-value",
        ),
        pytest.param(
            lambda c: c.create_namespaced_config_map(
                "default", {"metadata": {"name": "x", "namespace": "other"}}
            ),
            400,
            "BadRequest",
            id="namespace-mismatch",
        ),
        pytest.param(
            lambda c: c.create_namespaced_config_map("missing", {"metadata": {"name": "x"}}),
            404,
            "NotFound",
            id="namespace-missing",
        ),
    ],
)
def test_errors_come_with_a_status_body(core: Any, call: Any, code: int, reason: str) -> None:
    core.create_namespaced_config_map("default", {"metadata": {"name": "dup"}})
    with pytest.raises(ApiException) as raised:
        call(core)
    assert raised.value.status == code
    assert _status(raised.value)["reason"] == reason


def test_generate_name_gives_a_unique_name(core: Any) -> None:
    made = {
        core.create_namespaced_config_map(
            "default", {"metadata": {"generateName": "x-"}}
        ).metadata.name
        for _ in range(3)
    }
    assert len(made) == 3
    assert all(n.startswith("x-") for n in made)


@pytest.mark.parametrize(
    ("content_type", "body", "data"),
    [
        pytest.param(
            "application/merge-patch+json",
            {"data": {"b": "2", "a": None}},
            {"b": "2"},
            id="merge-patch",
        ),
        pytest.param(
            "application/json-patch+json",
            [{"op": "add", "path": "/data/b", "value": "2"}],
            {"a": "1", "b": "2"},
            id="json-patch",
        ),
        pytest.param(
            "application/strategic-merge-patch+json",
            {"data": {"b": "2"}},
            {"a": "1", "b": "2"},
            id="strategic-merge-patch",
        ),
    ],
)
def test_patch_types_by_content_type(
    core: Any, client: Any, content_type: str, body: Any, data: dict[str, str]
) -> None:
    core.create_namespaced_config_map("default", {"metadata": {"name": "a"}, "data": {"a": "1"}})
    patched = core.patch_namespaced_config_map("a", "default", body, _content_type=content_type)
    assert patched.data == data


def test_strategic_merge_patch_on_a_custom_resource_is_415(
    api: ThreadedApiServer, custom: Any
) -> None:
    api.call(lambda s: s.apply(crds.standard()))
    custom.create_namespaced_custom_object(
        *GW,
        "default",
        "gateways",
        {
            "apiVersion": "gateway.networking.k8s.io/v1",
            "kind": "Gateway",
            "metadata": {"name": "g"},
            "spec": {},
        },
    )
    with pytest.raises(ApiException) as raised:
        custom.patch_namespaced_custom_object(
            *GW,
            "default",
            "gateways",
            "g",
            {"spec": {"x": 1}},
            _content_type="application/strategic-merge-patch+json",
        )
    assert raised.value.status == 415


def test_finalizers_hold_a_deleted_object_until_removed(core: Any) -> None:
    core.create_namespaced_config_map(
        "default", {"metadata": {"name": "held", "finalizers": ["example.com/hold"]}}
    )
    core.delete_namespaced_config_map("held", "default")
    held = core.read_namespaced_config_map("held", "default")
    assert held.metadata.deletion_timestamp is not None
    core.patch_namespaced_config_map(
        "held",
        "default",
        {"metadata": {"finalizers": None}},
        _content_type="application/merge-patch+json",
    )
    with pytest.raises(ApiException) as raised:
        core.read_namespaced_config_map("held", "default")
    assert raised.value.status == 404


def test_cluster_scoped_kinds_have_no_namespace(networking: Any) -> None:
    net = networking
    created = net.create_ingress_class(
        {
            "metadata": {"name": "coxswain", "namespace": "ignored"},
            "spec": {"controller": "coxswain.dev/controller"},
        }
    )
    assert created.metadata.namespace is None
    assert [c.metadata.name for c in net.list_ingress_class().items] == ["coxswain"]


def test_a_terminating_namespace_refuses_new_objects(core: Any) -> None:
    core.create_namespace({"metadata": {"name": "doomed"}})
    core.create_namespaced_config_map(
        "doomed", {"metadata": {"name": "held", "finalizers": ["example.com/hold"]}}
    )
    core.delete_namespace("doomed")
    assert core.read_namespace("doomed").status.phase == "Terminating"
    with pytest.raises(ApiException) as raised:
        core.create_namespaced_config_map("doomed", {"metadata": {"name": "new"}})
    assert raised.value.status == 403
