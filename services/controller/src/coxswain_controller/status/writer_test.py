"""The status writer and the Event recorder through the `kube` boundary, against the devkit API
emulator with the real `kubernetes` client: a verdict is written onto its generation, a write
that races another change (409) re-reads and succeeds, an API failure is counted and retried on
the next pass, a BackendTLSPolicy's ancestors are written beside another controller's, and an
Event is created on the object. Leaves out Programmed gating (publish_test) and the merge rules
(merge_test)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import kubernetes
import pytest

from coxswain_controller.status.events import EventRecorder
from coxswain_controller.status.writer import FAILURES, StatusWriter
from coxswain_controller.translate.conditions import ConditionType, Reason
from coxswain_controller.translate.result import (
    AncestorVerdict,
    ClassVerdict,
    Condition,
    Event,
    ObjectRef,
    PolicyVerdict,
)
from coxswain_devkit import crds
from coxswain_devkit.apiserver import ThreadedApiServer

CONTROLLER = "coxswain-labs.dev/gateway-controller"
CLASS = {
    "apiVersion": "gateway.networking.k8s.io/v1",
    "kind": "GatewayClass",
    "metadata": {"name": "coxswain"},
    "spec": {"controllerName": CONTROLLER},
}


@pytest.fixture
def api() -> Iterator[ThreadedApiServer]:
    with ThreadedApiServer() as server:
        server.call(lambda s: s.apply(crds.standard()))
        server.call(lambda s: s.apply([CLASS]))
        yield server


def _live(client: Any) -> dict[str, Any]:
    custom: Any = kubernetes.client.CustomObjectsApi(client)
    obj = custom.get_cluster_custom_object(
        "gateway.networking.k8s.io", "v1", "gatewayclasses", "coxswain"
    )
    return dict(obj)


def _verdict(live: dict[str, Any]) -> ClassVerdict:
    meta = live["metadata"]
    accepted = Condition(ConditionType.ACCEPTED, True, Reason.ACCEPTED, "accepted by coxswain")
    return ClassVerdict(
        ObjectRef("GatewayClass", "", "coxswain"), meta["generation"], meta["uid"], (accepted,)
    )


async def _always() -> bool:
    return True


async def test_a_verdict_is_written_onto_its_generation(client: Any) -> None:
    writer = StatusWriter(client, controller_name=CONTROLLER, confirm_leader=_always)
    live = await asyncio.to_thread(_live, client)
    assert (await writer.write(_verdict(live))).result == "written"
    (condition,) = (await asyncio.to_thread(_live, client))["status"]["conditions"]
    assert (condition["type"], condition["status"]) == ("Accepted", "True")
    assert condition["observedGeneration"] == live["metadata"]["generation"]
    # The same verdict again: nothing to change.
    assert (await writer.write(_verdict(live))).result == "unchanged"


async def test_a_write_racing_another_change_is_retried(client: Any) -> None:
    custom = kubernetes.client.CustomObjectsApi(client)
    raced = 0

    async def confirm_and_race() -> bool:
        # Between the writer's read and its write, someone else changes the object: the write
        # carries a stale resourceVersion and gets 409, so the writer must read again.
        nonlocal raced
        if raced == 0:
            body = {"metadata": {"labels": {"touched": "yes"}}}
            await asyncio.to_thread(
                custom.patch_cluster_custom_object,
                "gateway.networking.k8s.io", "v1", "gatewayclasses", "coxswain", body,
            )  # fmt: skip
        raced += 1
        return True

    writer = StatusWriter(client, controller_name=CONTROLLER, confirm_leader=confirm_and_race)
    live = await asyncio.to_thread(_live, client)
    assert (await writer.write(_verdict(live))).result == "written"
    assert raced == 2
    after = await asyncio.to_thread(_live, client)
    assert after["metadata"]["labels"] == {"touched": "yes"}
    assert after["status"]["conditions"][0]["reason"] == "Accepted"


async def test_an_api_failure_is_counted_and_left_for_the_next_pass(
    client: Any, api: ThreadedApiServer
) -> None:
    writer = StatusWriter(client, controller_name=CONTROLLER, confirm_leader=_always)
    live = await asyncio.to_thread(_live, client)
    before = FAILURES.labels(kind="GatewayClass")._value.get()
    api.call(lambda s: s.faults.fail_next(1))
    assert (await writer.write(_verdict(live))).result == "failed"
    assert FAILURES.labels(kind="GatewayClass")._value.get() == before + 1
    assert "conditions" not in (await asyncio.to_thread(_live, client)).get("status", {})
    assert (await writer.write(_verdict(live))).result == "written"


async def test_an_event_is_created_on_the_object(client: Any) -> None:
    recorder = EventRecorder(client, confirm_leader=_always)
    live = await asyncio.to_thread(_live, client)
    event = Event(
        ObjectRef("GatewayClass", "", "coxswain"),
        live["metadata"]["uid"],
        "Warning",
        "InvalidParameters",
        "parametersRef names a missing ConfigMap",
    )
    assert await recorder.record([event]) == 1
    assert await recorder.record([event]) == 0  # once per leadership term
    core = kubernetes.client.CoreV1Api(client)
    listed = await asyncio.to_thread(core.list_namespaced_event, "default")
    (created,) = listed.items
    assert (created.reason, created.type) == ("InvalidParameters", "Warning")
    assert created.involved_object.name == "coxswain"
    assert created.message == "parametersRef names a missing ConfigMap"


POLICY_REF = {"group": "gateway.networking.k8s.io", "kind": "Gateway", "namespace": "default"}


def _policy(client: Any, body: dict[str, Any] | None = None) -> dict[str, Any]:
    custom: Any = kubernetes.client.CustomObjectsApi(client)
    group, plural = "gateway.networking.k8s.io", "backendtlspolicies"
    for version in ("v1", "v1alpha3"):
        try:
            if body is not None:
                body["apiVersion"] = f"{group}/{version}"
                return dict(
                    custom.create_namespaced_custom_object(group, version, "default", plural, body)
                )
            return dict(
                custom.get_namespaced_custom_object(group, version, "default", plural, "tls")
            )
        except kubernetes.client.ApiException as exc:
            if exc.status != 404:
                raise
    raise AssertionError("BackendTLSPolicy is not served")


async def test_a_policys_ancestors_are_written_beside_another_controllers(client: Any) -> None:
    body = {
        "kind": "BackendTLSPolicy",
        "metadata": {"name": "tls", "namespace": "default"},
        "spec": {
            "targetRefs": [{"group": "", "kind": "Service", "name": "web"}],
            "validation": {"wellKnownCACertificates": "System", "hostname": "web.internal"},
        },
    }
    live = await asyncio.to_thread(_policy, client, body)
    theirs = {
        "ancestorRef": {**POLICY_REF, "name": "gw"},
        "controllerName": "example.com/other",
        "conditions": [],
    }
    live["status"] = {"ancestors": [theirs]}
    custom: Any = kubernetes.client.CustomObjectsApi(client)
    group, version = live["apiVersion"].split("/")
    await asyncio.to_thread(
        custom.replace_namespaced_custom_object_status,
        group, version, "default", "backendtlspolicies", "tls", live,
    )  # fmt: skip
    accepted = Condition(ConditionType.ACCEPTED, True, Reason.ACCEPTED, "accepted")
    verdict = PolicyVerdict(
        ObjectRef("BackendTLSPolicy", "default", "tls"),
        live["metadata"]["generation"],
        live["metadata"]["uid"],
        (AncestorVerdict({**POLICY_REF, "name": "gw"}, (accepted,)),),
    )
    writer = StatusWriter(client, controller_name=CONTROLLER, confirm_leader=_always)
    assert (await writer.write(verdict)).result == "written"
    ancestors = (await asyncio.to_thread(_policy, client))["status"]["ancestors"]
    assert [a["controllerName"] for a in ancestors] == ["example.com/other", CONTROLLER]
    assert ancestors[1]["conditions"][0]["reason"] == "Accepted"
    assert (await writer.write(verdict)).result == "unchanged"


async def test_a_coxswain_policys_ancestors_are_written_at_its_own_group(
    api: ThreadedApiServer, client: Any
) -> None:
    api.call(lambda s: s.apply(crds.coxswain()))
    custom: Any = kubernetes.client.CustomObjectsApi(client)
    group, version, plural = "coxswain-labs.dev", "v1alpha1", "coxswainpolicies"
    body = {
        "apiVersion": f"{group}/{version}",
        "kind": "CoxswainPolicy",
        "metadata": {"name": "limits", "namespace": "default"},
        "spec": {
            "targetRefs": [{"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": "gw"}],
            "maxBodyBytes": 1024,
        },
    }
    live = await asyncio.to_thread(
        custom.create_namespaced_custom_object, group, version, "default", plural, body
    )
    accepted = Condition(ConditionType.ACCEPTED, True, Reason.ACCEPTED, "the policy is attached")
    verdict = PolicyVerdict(
        ObjectRef("CoxswainPolicy", "default", "limits"),
        live["metadata"]["generation"],
        live["metadata"]["uid"],
        (AncestorVerdict({**POLICY_REF, "name": "gw"}, (accepted,)),),
    )
    writer = StatusWriter(client, controller_name=CONTROLLER, confirm_leader=_always)
    assert (await writer.write(verdict)).result == "written"
    read = await asyncio.to_thread(
        custom.get_namespaced_custom_object, group, version, "default", plural, "limits"
    )
    [ancestor] = read["status"]["ancestors"]
    assert ancestor["controllerName"] == CONTROLLER
    assert ancestor["ancestorRef"]["name"] == "gw"
    assert ancestor["conditions"][0]["reason"] == "Accepted"
    assert (await writer.write(verdict)).result == "unchanged"
