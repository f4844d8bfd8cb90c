"""The emulator's protobuf schema and codec, held to protoc itself and to hostile bytes.

Covers: protoc (grpcio-tools') compiles the `.proto` files; bytes protoc encodes from text are
decoded into the object's JSON (Time as RFC 3339, IntOrString, Quantity, base64 bytes, inline
structs merged, zero values without presence left out, kept with it), and what the codec
encodes from that JSON is, to protoc, the same message; the envelope (`k8s\\x00` +
runtime.Unknown) both ways; bodies that do not decode refused naming the field and where it
is: a wrong wire type, a truncated value, a field number the schema lacks with a value (one
with a zero value is skipped, as newer clients send), invalid UTF-8; packed repeated numbers.
Leaves out the HTTP side (protobuf_test) and real clients (kubectl_verbs_test).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from coxswain_devkit import protowire as pw
from coxswain_devkit.apiserver import kproto

HERE = Path(__file__).parent


def protoc(*args: str, stdin: bytes) -> bytes:
    files = [str(HERE / name) for name in kproto.proto_files()]
    done = subprocess.run(
        [sys.executable, "-m", "grpc_tools.protoc", f"-I{HERE}", *args, *files],
        input=stdin,
        capture_output=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr.decode()
    return done.stdout


def encode_text(message: str, text: str) -> bytes:
    return protoc(f"--encode={message}", stdin=text.encode())


def decode_text(message: str, data: bytes) -> str:
    return protoc(f"--decode={message}", stdin=data).decode()


def test_protoc_compiles_the_schema(tmp_path: Path) -> None:
    out = tmp_path / "kproto.pb"
    protoc(f"--descriptor_set_out={out}", stdin=b"")
    assert out.stat().st_size > 10_000


CASES = [
    pytest.param(
        "k8s.io.api.apps.v1.Deployment",
        """
        metadata { name: "web" namespace: "" generation: 0 labels { key: "app" value: "web" }
                   creationTimestamp { seconds: 1767225600 } }
        spec {
          replicas: 0
          selector { matchLabels { key: "app" value: "web" } }
          strategy { type: "RollingUpdate"
                     rollingUpdate { maxSurge { type: 0 intVal: 0 }
                                     maxUnavailable { type: 1 strVal: "25%" } } }
          template {
            metadata { labels { key: "app" value: "web" } creationTimestamp {} }
            spec {
              containers {
                name: "app" image: "web:1" stdin: false
                ports { containerPort: 8080 protocol: "TCP" }
                resources { limits { key: "cpu" value { string: "100m" } } }
                readinessProbe {
                  handler { httpGet { path: "/readyz" port { type: 1 strVal: "http" } } }
                  periodSeconds: 5
                }
              }
              volumes { name: "cfg" volumeSource { configMap { localObjectReference { name: "cm" }
                                                                defaultMode: 420 } } }
              terminationGracePeriodSeconds: 0
            }
          }
        }
        status {}
        """,
        {
            "metadata": {"name": "web", "labels": {"app": "web"},
                         "creationTimestamp": "2026-01-01T00:00:00Z"},
            "spec": {
                "replicas": 0,
                "selector": {"matchLabels": {"app": "web"}},
                "strategy": {"type": "RollingUpdate",
                             "rollingUpdate": {"maxSurge": 0, "maxUnavailable": "25%"}},
                "template": {
                    "metadata": {"labels": {"app": "web"}},
                    "spec": {
                        "containers": [{
                            "name": "app", "image": "web:1",
                            "ports": [{"containerPort": 8080, "protocol": "TCP"}],
                            "resources": {"limits": {"cpu": "100m"}},
                            "readinessProbe": {"httpGet": {"path": "/readyz", "port": "http"},
                                               "periodSeconds": 5},
                        }],
                        "volumes": [{"name": "cfg",
                                     "configMap": {"name": "cm", "defaultMode": 420}}],
                        "terminationGracePeriodSeconds": 0,
                    },
                },
            },
            "status": {},
        },
        id="deployment-zero-kept-with-presence-inline-structs-intorstring",
    ),
    pytest.param(
        "k8s.io.api.core.v1.Secret",
        'metadata { name: "s" } data { key: "k" value: "\\001\\002" } type: "" immutable: false',
        {"metadata": {"name": "s"}, "data": {"k": "AQI="}, "immutable": False},
        id="secret-bytes-base64-empty-type-dropped",
    ),
    pytest.param(
        "k8s.io.api.discovery.v1.EndpointSlice",
        'addressType: "IPv4" endpoints { addresses: "10.0.0.1" conditions { ready: false } }'
        ' ports { port: 0 name: "" }',
        {"addressType": "IPv4",
         "endpoints": [{"addresses": ["10.0.0.1"], "conditions": {"ready": False}}],
         "ports": [{"port": 0, "name": ""}]},
        id="endpointslice-optional-zero-values-kept",
    ),
    pytest.param(
        "k8s.io.api.coordination.v1.Lease",
        'spec { holderIdentity: "a" renewTime { seconds: 1767225600 nanos: 123456000 } }',
        {"spec": {"holderIdentity": "a", "renewTime": "2026-01-01T00:00:00.123456Z"}},
        id="lease-microtime",
    ),
    pytest.param(
        "k8s.io.api.policy.v1.PodDisruptionBudget",
        'spec { maxUnavailable { type: 0 intVal: 1 } selector { matchLabels { key: "a"'
        ' value: "b" } } } status { disruptionsAllowed: 0 expectedPods: 2 }',
        {"spec": {"maxUnavailable": 1, "selector": {"matchLabels": {"a": "b"}}},
         "status": {"disruptionsAllowed": 0, "expectedPods": 2}},
        id="poddisruptionbudget-intorstring-and-counts-kept-at-zero",
    ),
    pytest.param(
        "k8s.io.api.authentication.v1.TokenReview",
        'status { authenticated: true user { username: "u" groups: "g"'
        ' extra { key: "x" value { items: "1" items: "2" } } } }',
        {"status": {"authenticated": True,
                    "user": {"username": "u", "groups": ["g"], "extra": {"x": ["1", "2"]}}}},
        id="tokenreview-extra-values-are-lists",
    ),
]  # fmt: skip


@pytest.mark.parametrize(("message", "text", "expected"), CASES)
def test_protoc_bytes_decode_to_the_json_and_back(
    message: str, text: str, expected: dict[str, Any]
) -> None:
    data = encode_text(message, text)
    assert kproto.decode(message, data) == expected
    assert decode_text(message, kproto.encode(message, expected)) == decode_text(
        message, encode_text(message, _without_zeros_protoc_keeps(text))
    )


def _without_zeros_protoc_keeps(text: str) -> str:
    """protoc writes a proto3 field without presence only when it is not zero: so does the
    codec. The text's explicit zeros of such fields are what Go's proto2 encoders send."""
    for zero in (
        'namespace: ""',
        "generation: 0",
        "stdin: false",
        'type: ""',
        "creationTimestamp {}",
        "maxSurge { type: 0 intVal: 0 }",
    ):
        text = text.replace(zero, "maxSurge { intVal: 0 }" if "maxSurge" in zero else "")
    return text


def test_envelope_both_ways() -> None:
    doc = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"a": "b"}}
    body = kproto.wrap(doc)
    assert body is not None and body.startswith(b"k8s\x00")
    assert kproto.unwrap(body) == doc
    envelope = decode_text("k8s.io.apimachinery.pkg.runtime.Unknown", body[4:])
    assert 'apiVersion: "v1"' in envelope and 'kind: "ConfigMap"' in envelope
    assert kproto.wrap({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway"}) is None


def _configmap(raw: bytes) -> bytes:
    type_meta = pw.f_str(1, "v1") + pw.f_str(2, "ConfigMap")
    return b"k8s\x00" + pw.f_len(1, type_meta) + pw.f_len(2, raw)


@pytest.mark.parametrize(
    ("raw", "reason", "field"),
    [
        pytest.param(
            pw.f_len(1, pw.f_varint(1, 7)),
            "proto: wrong wireType = 0 for field name",
            "metadata.name",
            id="wrong-wire-type-named",
        ),
        pytest.param(
            pw.f_len(1, pw.tag(11, pw.LEN) + pw.varint(40) + b"short"),
            "unexpected EOF",
            "metadata",
            id="truncated",
        ),
        pytest.param(
            pw.f_len(1, pw.f_str(99, "x")),
            "proto: field number 99 of k8s.io.apimachinery.pkg.apis.meta.v1.ObjectMeta is not "
            "in the emulator's protobuf schema",
            "metadata[field 99]",
            id="unknown-field-with-a-value",
        ),
        pytest.param(
            pw.f_len(1, pw.f_len(1, b"\xff\xfe")),
            "proto: invalid UTF-8 in a string",
            "metadata.name",
            id="invalid-utf8",
        ),
    ],
)
def test_bodies_that_do_not_decode_name_the_field(raw: bytes, reason: str, field: str) -> None:
    with pytest.raises(kproto.DecodeError) as caught:
        kproto.unwrap(_configmap(raw))
    assert (caught.value.reason, caught.value.field) == (reason, field)


def test_unknown_fields_with_zero_values_are_skipped() -> None:
    meta = pw.f_str(1, "c") + pw.f_str(15, "") + pw.f_varint(16, 0) + pw.f_len(18, b"")
    assert kproto.unwrap(_configmap(pw.f_len(1, meta)))["metadata"] == {"name": "c"}


def test_packed_and_unpacked_repeated_numbers() -> None:
    packed = pw.f_len(4, pw.varint(1) + pw.varint(2))
    unpacked = pw.f_varint(4, 3)
    decoded = kproto.decode("k8s.io.api.core.v1.PodSecurityContext", packed + unpacked)
    assert decoded == {"supplementalGroups": [1, 2, 3]}


def test_negative_numbers_as_go_writes_them() -> None:
    data = pw.f_varint(2, (1 << 64) - 5)  # int64 runAsUser = -5, ten bytes
    assert kproto.decode("k8s.io.api.core.v1.PodSecurityContext", data) == {"runAsUser": -5}
    message = "k8s.io.api.core.v1.PodSecurityContext"
    assert kproto.decode(message, kproto.encode(message, {"runAsUser": -5})) == {"runAsUser": -5}
