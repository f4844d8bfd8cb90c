"""Protobuf over HTTP: bodies the emulator reads, answers it writes for protobuf-only clients.

Covers: a create whose body is protobuf stored as the JSON it encodes; one that does not decode
answered 400 with the field named in the Status's causes; a protobuf body of a kind the schema
lacks refused with 400; an object, a list and a 404 Status answered in protobuf to a client
that accepts only protobuf, read back by the codec; JSON when the client accepts JSON too; 406
for a custom resource, which has no protobuf form. Leaves out the codec's own cases
(kproto/kproto_test) and kubectl (kubectl_verbs_test).
"""

from __future__ import annotations

import json
from typing import Any

from coxswain_devkit import crds
from coxswain_devkit import protowire as pw
from coxswain_devkit.apiserver import ThreadedApiServer, kproto
from coxswain_devkit.apiserver.conftest import http

PROTOBUF = "application/vnd.kubernetes.protobuf"
CONFIGMAPS = "/api/v1/namespaces/default/configmaps"


def _post(api: ThreadedApiServer, path: str, body: bytes) -> tuple[int, Any]:
    status, _, raw = http(api, "POST", path, body, headers={"Content-Type": PROTOBUF})
    return status, json.loads(raw)


def test_a_protobuf_create_is_stored_as_its_json(api: ThreadedApiServer, core: Any) -> None:
    doc = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "labels": {"a": "b"}},
           "data": {"k": "v"}}  # fmt: skip
    body = kproto.wrap(doc)
    assert body is not None
    status, created = _post(api, CONFIGMAPS, body)
    assert status == 201
    assert (created["data"], created["metadata"]["labels"]) == ({"k": "v"}, {"a": "b"})
    assert core.read_namespaced_config_map("c", "default").data == {"k": "v"}


def test_a_body_that_does_not_decode_is_400_naming_the_field(api: ThreadedApiServer) -> None:
    type_meta = pw.f_str(1, "v1") + pw.f_str(2, "ConfigMap")
    raw = pw.f_len(1, pw.f_varint(1, 3))  # metadata.name as a number
    status, answer = _post(api, CONFIGMAPS, b"k8s\x00" + pw.f_len(1, type_meta) + pw.f_len(2, raw))
    assert status == 400
    assert answer["reason"] == "BadRequest"
    assert "wrong wireType = 0 for field name" in answer["message"]
    assert answer["details"]["causes"][0]["field"] == "metadata.name"


def test_a_kind_without_a_schema_is_400(api: ThreadedApiServer) -> None:
    type_meta = pw.f_str(1, "autoscaling/v1") + pw.f_str(2, "Scale")
    body = b"k8s\x00" + pw.f_len(1, type_meta) + pw.f_len(2, b"")
    status, answer = _post(api, CONFIGMAPS, body)
    assert status == 400
    assert "no protobuf schema for autoscaling/v1, Kind=Scale" in answer["message"]


def _get(api: ThreadedApiServer, path: str, accept: str) -> tuple[int, str, bytes]:
    status, headers, raw = http(api, "GET", path, headers={"Accept": accept})
    return status, headers.get("Content-Type", ""), raw


def test_protobuf_only_clients_get_protobuf(api: ThreadedApiServer, core: Any) -> None:
    core.create_namespaced_config_map("default", {"metadata": {"name": "c"}, "data": {"k": "v"}})
    status, media, raw = _get(api, f"{CONFIGMAPS}/c", PROTOBUF)
    assert (status, media) == (200, PROTOBUF)
    obj = kproto.unwrap(raw)
    assert (obj["kind"], obj["data"], obj["metadata"]["name"]) == ("ConfigMap", {"k": "v"}, "c")
    status, media, raw = _get(api, CONFIGMAPS, PROTOBUF)
    listed = kproto.unwrap(raw)
    assert (listed["kind"], [i["metadata"]["name"] for i in listed["items"]]) == (
        "ConfigMapList",
        ["c"],
    )
    status, media, raw = _get(api, f"{CONFIGMAPS}/missing", PROTOBUF)
    assert (status, media) == (404, PROTOBUF)
    assert kproto.unwrap(raw)["reason"] == "NotFound"


def test_clients_that_accept_json_get_json(api: ThreadedApiServer, core: Any) -> None:
    core.create_namespaced_config_map("default", {"metadata": {"name": "c"}})
    status, media, raw = _get(api, f"{CONFIGMAPS}/c", f"{PROTOBUF}, application/json")
    assert (status, media.split(";")[0]) == (200, "application/json")
    assert json.loads(raw)["metadata"]["name"] == "c"


def test_custom_resources_are_406_to_protobuf_only_clients(api: ThreadedApiServer) -> None:
    api.call(lambda s: s.apply(crds.standard()))
    status, _, raw = _get(
        api, "/apis/gateway.networking.k8s.io/v1/namespaces/default/gateways", PROTOBUF
    )
    assert status == 406
    assert json.loads(raw)["reason"] == "NotAcceptable"
