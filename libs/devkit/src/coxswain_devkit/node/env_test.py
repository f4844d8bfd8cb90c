"""A container's environment resolved against the emulator (`env.resolve`), as the kubelet does.

Covers literal values referring to earlier ones, `fieldRef` to the pod's own fields (name,
namespace, labels, podIP), `configMapKeyRef` and `secretKeyRef`, `envFrom` with a prefix,
optional references that are skipped, and a missing ConfigMap or key refused with
`CreateContainerConfigError`.
"""

from __future__ import annotations

import base64
from typing import Any

import pytest

from coxswain_devkit import kube as k
from coxswain_devkit.node import env

Obj = dict[str, Any]
POD = {"metadata": {"name": "p", "namespace": "default", "uid": "u", "labels": {"tier": "edge"}}}


def _reader(kube: k.Kube) -> env.Reader:
    async def read(plural: str, namespace: str, name: str) -> Obj | None:
        return await kube.get(k.path(plural, namespace, name))

    return read


async def test_values_fields_and_references(kube: k.Kube) -> None:
    await kube.create(
        k.path("configmaps", "default"), {"metadata": {"name": "cm"}, "data": {"mode": "fast"}}
    )
    secret = {"metadata": {"name": "s"}, "data": {"key": base64.b64encode(b"hush").decode()}}
    await kube.create(k.path("secrets", "default"), secret)
    container = {
        "envFrom": [{"configMapRef": {"name": "cm"}, "prefix": "CM_"}],
        "env": [
            {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
            {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
            {"name": "TIER", "valueFrom": {"fieldRef": {"fieldPath": "metadata.labels['tier']"}}},
            {"name": "WHO", "value": "$(POD_NAME)@$(POD_IP)"},
            {"name": "MODE", "valueFrom": {"configMapKeyRef": {"name": "cm", "key": "mode"}}},
            {"name": "KEY", "valueFrom": {"secretKeyRef": {"name": "s", "key": "key"}}},
            {
                "name": "GONE",
                "valueFrom": {"configMapKeyRef": {"name": "x", "key": "k", "optional": True}},
            },
        ],
    }
    resolved = await env.resolve(_reader(kube), POD, container, "127.0.201.9")
    assert resolved == {
        "CM_mode": "fast",
        "POD_NAME": "p",
        "POD_IP": "127.0.201.9",
        "TIER": "edge",
        "WHO": "p@127.0.201.9",
        "MODE": "fast",
        "KEY": "hush",
    }


@pytest.mark.parametrize(
    ("ref", "message"),
    [
        pytest.param(
            {"name": "absent", "key": "k"}, 'configmap "absent" not found', id="missing-configmap"
        ),
        pytest.param(
            {"name": "cm", "key": "nope"}, "couldn't find key nope in configmap cm",
            id="missing-key",
        ),
    ],
)  # fmt: skip
async def test_missing_references_keep_the_container_from_starting(
    kube: k.Kube, ref: Obj, message: str
) -> None:
    await kube.create(k.path("configmaps", "default"), {"metadata": {"name": "cm"}, "data": {}})
    container = {"env": [{"name": "X", "valueFrom": {"configMapKeyRef": ref}}]}
    with pytest.raises(env.CannotRun) as caught:
        await env.resolve(_reader(kube), POD, container, "127.0.201.9")
    assert (caught.value.reason, caught.value.message) == ("CreateContainerConfigError", message)
