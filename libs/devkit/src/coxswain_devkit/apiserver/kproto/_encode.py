"""An object's JSON form to protobuf bytes, by the schema: answers for protobuf-only clients.

The inverse of `_decode`: fields are written in number order, zero values of fields without
presence are left out (a proto decoder reads them as zero anyway), lists unpacked as the API
server's proto2 encoders write them, and the scalar-in-JSON types (Time, Quantity, IntOrString,
FieldsV1, RawExtension) get their message form back. JSON members the schema does not list are
not written: a client reading protobuf sees only what the schema knows.
"""

from __future__ import annotations

import base64
import binascii
import json
import struct
from datetime import datetime
from typing import Any

from coxswain_devkit.apiserver.kproto._decode import (
    DURATION,
    EXTRA_VALUE,
    FIELDS_V1,
    I32,
    I64,
    INT_OR_STRING,
    LEN,
    MICRO_TIME,
    QUANTITY,
    RAW_EXTENSION,
    TIME,
    VARINT,
)
from coxswain_devkit.apiserver.kproto._schema import Field, Message, schema


class EncodeError(Exception):
    """A stored value does not fit its field's type; `field` is the JSON path."""

    def __init__(self, reason: str, field: str) -> None:
        super().__init__(f"{reason} at {field}")
        self.field = field


def varint(value: int) -> bytes:
    value &= (1 << 64) - 1  # negative numbers: two's complement in ten bytes, as Go writes them
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def _tag(number: int, wire: int) -> bytes:
    return varint(number << 3 | wire)


def _len(number: int, payload: bytes) -> bytes:
    return _tag(number, LEN) + varint(len(payload)) + payload


def _integer(value: Any, path: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise EncodeError(f"{value!r} is not a number", path)
    try:
        return int(value)
    except ValueError:
        raise EncodeError(f"{value!r} is not a number", path) from None


def _scalar(number: int, type_: str, value: Any, path: str) -> bytes:
    if type_ == "string":
        if not isinstance(value, str):
            raise EncodeError(f"{value!r} is not a string", path)
        return _len(number, value.encode())
    if type_ == "bytes":
        try:
            return _len(number, base64.b64decode(str(value), validate=True))
        except binascii.Error:
            raise EncodeError("not base64", path) from None
    if type_ == "bool":
        return _tag(number, VARINT) + varint(1 if value else 0)
    if type_ == "double":
        return _tag(number, I64) + struct.pack("<d", float(value))
    if type_ == "float":
        return _tag(number, I32) + struct.pack("<f", float(value))
    return _tag(number, VARINT) + varint(_integer(value, path))


def _is_zero(value: Any) -> bool:
    return value in ("", b"") or (isinstance(value, int | float) and value == 0)


def _seconds(text: Any, path: str) -> tuple[int, int]:
    try:
        moment = datetime.fromisoformat(str(text).replace("Z", "+00:00"))
    except ValueError:
        raise EncodeError(f"{text!r} is not an RFC 3339 time", path) from None
    return int(moment.timestamp()), moment.microsecond * 1000


def _special(name: str, value: Any, path: str) -> bytes | None:
    if name in (TIME, MICRO_TIME):
        seconds, nanos = _seconds(value, path)
        return (
            varint(1 << 3)
            + varint(seconds)
            + (_tag(2, VARINT) + varint(nanos) if nanos and name == MICRO_TIME else b"")
        )
    if name == QUANTITY:
        return _len(1, str(value).encode())
    if name == INT_OR_STRING:
        if isinstance(value, str):
            return _tag(1, VARINT) + varint(1) + _len(3, value.encode())
        return _tag(1, VARINT) + varint(0) + _tag(2, VARINT) + varint(_integer(value, path))
    if name in (FIELDS_V1, RAW_EXTENSION):
        return _len(1, json.dumps(value, separators=(",", ":")).encode())
    if name == EXTRA_VALUE:
        return b"".join(_len(1, str(item).encode()) for item in value or [])
    if name == DURATION:
        raise EncodeError("durations are not written as protobuf", path)
    return None


class _Writer:
    def __init__(self, messages: dict[str, Message]) -> None:
        self._messages = messages

    def message(self, name: str, value: Any, path: str) -> bytes:
        special = _special(name, value, path)
        if special is not None:
            return special
        if not isinstance(value, dict):
            raise EncodeError(f"expected an object for {name}", path)
        msg = self._messages[name]
        return b"".join(self._field(f, value, path) for _, f in sorted(msg.fields.items()))

    def _field(self, f: Field, parent: dict[str, Any], path: str) -> bytes:
        if f.inline:
            payload = self.message(f.type, parent, path)
            return _len(f.number, payload) if payload else b""
        value = parent.get(f.name)
        where = f"{path}.{f.name}" if path else f.name
        if value is None:
            return b""
        if f.map_key:
            return self._map(f, value, where)
        if f.repeated:
            if not isinstance(value, list):
                raise EncodeError("expected a list", where)
            return b"".join(self._one(f, item, f"{where}[{i}]") for i, item in enumerate(value))
        if not f.presence and not f.is_message and _is_zero(value):
            return b""
        return self._one(f, value, where)

    def _one(self, f: Field, value: Any, path: str) -> bytes:
        if f.is_message:
            return _len(f.number, self.message(f.type, value, path))
        return _scalar(f.number, f.type, value, path)

    def _map(self, f: Field, value: Any, path: str) -> bytes:
        if not isinstance(value, dict):
            raise EncodeError("expected an object", path)
        entry = Field(name="value", number=2, type=f.type)
        out = []
        for key, item in value.items():
            if item is None:
                continue
            key_bytes = _scalar(1, f.map_key, str(key), path)
            out.append(_len(f.number, key_bytes + self._one(entry, item, f"{path}[{key}]")))
        return b"".join(out)


def encode(message: str, value: Any) -> bytes:
    """The protobuf encoding of `value`, the JSON form of the schema's `message`."""
    return _Writer(schema()).message(message, value, "")
