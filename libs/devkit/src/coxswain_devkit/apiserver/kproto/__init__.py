"""The Kubernetes protobuf encoding for the kinds the emulator serves, read and written by schema.

A body in `application/vnd.kubernetes.protobuf` is the 4 bytes `k8s\\x00`, then a
`runtime.Unknown` whose `typeMeta` names the object's apiVersion and kind and whose `raw` is the
object in the `k8s.io/api` encoding. `unwrap` turns such a body into the object's JSON form (as
if the client had sent JSON) and `wrap` does the reverse for an answer. The schema is this
package's own `.proto` files (see `_schema`); `message_for` maps an apiVersion and kind to the
message that encodes it, or None for kinds that have no protobuf form here (custom resources,
CRDs, Tables), for which a server answers JSON or 406.
"""

from __future__ import annotations

import base64
from typing import Any

from coxswain_devkit.apiserver.kproto._decode import MAGIC, DecodeError, decode, unwrap
from coxswain_devkit.apiserver.kproto._encode import EncodeError, encode
from coxswain_devkit.apiserver.kproto._schema import (
    UNKNOWN,
    SchemaError,
    message_for,
    proto_files,
    schema,
)

__all__ = [
    "MAGIC", "DecodeError", "EncodeError", "SchemaError",
    "decode", "encode", "message_for", "proto_files", "schema", "unwrap", "wrap",
]  # fmt: skip


def wrap(doc: dict[str, Any]) -> bytes | None:
    """`doc` as a protobuf body, or None when its kind has no protobuf form here."""
    api_version, kind = str(doc.get("apiVersion", "")), str(doc.get("kind", ""))
    name = message_for(api_version, kind)
    if name is None:
        return None
    raw = encode(name, doc)
    envelope = {"typeMeta": {"apiVersion": api_version, "kind": kind}, "raw": raw}
    return MAGIC + _envelope(envelope)


def _envelope(envelope: dict[str, Any]) -> bytes:
    return encode(UNKNOWN, {**envelope, "raw": base64.b64encode(envelope["raw"]).decode()})
