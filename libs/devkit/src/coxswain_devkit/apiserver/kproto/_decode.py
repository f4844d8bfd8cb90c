"""Protobuf bytes to the object's JSON form, by the schema: what a `k8s.io/api` body means.

The reader walks the wire format itself (a tag is `number << 3 | wire type`, then the value) so
that a body it cannot read is refused naming the field, as the API server's generated decoders
do (`proto: wrong wireType = 0 for field image`), with the JSON path where it happened. Values
become what the JSON encoding of the same Go object holds: a zero value field without presence
is left out, Time is RFC 3339, Quantity a string, IntOrString a number or a string, bytes base64,
and inline (embedded) structs are merged into their parent. A field number the schema does not
know is skipped when its value is zero (the generated encoders write every non-pointer field,
so newer clients send empty fields the schema may not list) and refused otherwise: the emulator
would rather say it cannot read a field than store an object without it.
"""

from __future__ import annotations

import base64
import json
import struct
from datetime import UTC, datetime
from typing import Any

from coxswain_devkit.apiserver.kproto._schema import UNKNOWN, Field, Message, message_for, schema

VARINT, I64, LEN, I32 = 0, 1, 2, 5
_NUMERIC = frozenset({"bool", "int32", "int64", "uint32", "uint64"})
# A missing map value is its type's zero: what each wire type reads as when absent.
_EMPTY: dict[str, Any] = {"double": b"\0" * 8, "float": b"\0" * 4}
_EMPTY.update({t: 0 for t in ("bool", "int32", "int64", "uint32", "uint64")})

META = "k8s.io.apimachinery.pkg.apis.meta.v1"
TIME, MICRO_TIME, DURATION, FIELDS_V1 = (
    f"{META}.Time",
    f"{META}.MicroTime",
    f"{META}.Duration",
    f"{META}.FieldsV1",
)
QUANTITY = "k8s.io.apimachinery.pkg.api.resource.Quantity"
INT_OR_STRING = "k8s.io.apimachinery.pkg.util.intstr.IntOrString"
RAW_EXTENSION = "k8s.io.apimachinery.pkg.runtime.RawExtension"
EXTRA_VALUE = "k8s.io.api.authentication.v1.ExtraValue"
MAGIC = b"k8s\x00"


class DecodeError(Exception):
    """The bytes are not a valid encoding of the message; `field` is the JSON path."""

    def __init__(self, reason: str, field: str, message: str) -> None:
        at = f" at {field}" if field else ""
        super().__init__(f"{reason}{at} (decoding {message})")
        self.reason = reason
        self.field = field


def _varint(data: bytes, pos: int, where: tuple[str, str]) -> tuple[int, int]:
    value, shift = 0, 0
    while True:
        if pos >= len(data):
            raise DecodeError("unexpected EOF", *where)
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos
        shift += 7
        if shift >= 64:
            raise DecodeError("proto: integer overflow", *where)


def _chunk(data: bytes, pos: int, size: int, where: tuple[str, str]) -> tuple[bytes, int]:
    if pos + size > len(data):
        raise DecodeError("unexpected EOF", *where)
    return data[pos : pos + size], pos + size


def _raw_value(data: bytes, pos: int, wire: int, where: tuple[str, str]) -> tuple[Any, int]:
    if wire == VARINT:
        return _varint(data, pos, where)
    if wire == I64:
        return _chunk(data, pos, 8, where)
    if wire == I32:
        return _chunk(data, pos, 4, where)
    if wire == LEN:
        size, pos = _varint(data, pos, where)
        return _chunk(data, pos, size, where)
    raise DecodeError(f"proto: illegal wireType {wire}", *where)


def fields(data: bytes, where: tuple[str, str]) -> list[tuple[int, int, Any]]:
    """Every (number, wire type, raw value) in a message's bytes, in order."""
    out, pos = [], 0
    while pos < len(data):
        tag, pos = _varint(data, pos, where)
        number, wire = tag >> 3, tag & 7
        if number == 0:
            raise DecodeError("proto: illegal tag 0", *where)
        value, pos = _raw_value(data, pos, wire, where)
        out.append((number, wire, value))
    return out


def _is_zero(wire: int, value: Any) -> bool:
    if wire == VARINT:
        return bool(value == 0)
    if wire in (I64, I32):
        return not any(value)
    if not value:
        return True
    try:
        return all(_is_zero(w, v) for _, w, v in fields(value, ("", "")))
    except DecodeError:
        return False


def _signed(value: int, bits: int) -> int:
    value &= (1 << bits) - 1
    return value - (1 << bits) if value >> (bits - 1) else value


def _scalar(type_: str, wire: int, value: Any, where: tuple[str, str]) -> Any:
    if type_ == "string":
        try:
            return bytes(value).decode()
        except UnicodeDecodeError:
            raise DecodeError("proto: invalid UTF-8 in a string", *where) from None
    if type_ == "bytes":
        return bytes(value)
    if type_ == "bool":
        return value != 0
    if type_ in ("int32", "int64"):
        return _signed(value, 32 if type_ == "int32" else 64)
    if type_ in ("uint32", "uint64"):
        return value & ((1 << (32 if type_ == "uint32" else 64)) - 1)
    return struct.unpack("<d" if type_ == "double" else "<f", value)[0]


def _expected_wire(f: Field) -> int:
    if f.map_key or f.is_message or f.type in ("string", "bytes"):
        return LEN
    return {"double": I64, "float": I32}.get(f.type, VARINT)


def _zero(value: Any) -> bool:
    return value in ("", b"") or (isinstance(value, int | float) and value == 0)


def _child(path: str, f: Field) -> str:
    if f.inline:
        return path
    return f"{path}.{f.name}" if path else f.name


class _Reader:
    def __init__(self, messages: dict[str, Message]) -> None:
        self._messages = messages

    def message(self, name: str, data: bytes, path: str) -> Any:
        special = _SPECIAL.get(name)
        if special is not None:
            return special(self, data, (path, name))
        return self._object(self._messages[name], data, path)

    def _object(self, msg: Message, data: bytes, path: str) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for number, wire, value in fields(data, (path, msg.full_name)):
            f = msg.fields.get(number)
            if f is None:
                if not _is_zero(wire, value):
                    where = f"{path}[field {number}]" if path else f"field {number}"
                    raise DecodeError(
                        f"proto: field number {number} of {msg.full_name} is not in the "
                        "emulator's protobuf schema",
                        where,
                        msg.full_name,
                    )
                continue
            self._field(out, f, wire, value, path)
        return out

    def _field(self, out: dict[str, Any], f: Field, wire: int, value: Any, path: str) -> None:
        sub = _child(path, f)
        packed = f.repeated and wire == LEN and f.type in _NUMERIC
        if wire != _expected_wire(f) and not packed:
            raise DecodeError(f"proto: wrong wireType = {wire} for field {f.name}", sub, f.type)
        if f.map_key:
            key, item = self._entry(f, value, sub)
            out.setdefault(f.name, {})[key] = item
        elif packed:
            out.setdefault(f.name, []).extend(self._packed(f, value, sub))
        elif f.repeated:
            items = out.setdefault(f.name, [])
            items.append(self._value(f, wire, value, f"{sub}[{len(items)}]"))
        elif f.inline:
            out.update(self._value(f, wire, value, sub))
        else:
            self._single(out, f, self._value(f, wire, value, sub))

    def _single(self, out: dict[str, Any], f: Field, value: Any) -> None:
        if value is None or (not f.presence and not isinstance(value, dict) and _zero(value)):
            out.pop(f.name, None)
        else:
            out[f.name] = value

    def _value(self, f: Field, wire: int, value: Any, path: str) -> Any:
        if f.is_message:
            return self.message(f.type, value, path)
        item = _scalar(f.type, wire, value, (path, f.type))
        return base64.b64encode(item).decode() if f.type == "bytes" else item

    def _packed(self, f: Field, data: bytes, path: str) -> list[Any]:
        out, pos = [], 0
        while pos < len(data):
            value, pos = _varint(data, pos, (path, f.type))
            out.append(_scalar(f.type, VARINT, value, (path, f.type)))
        return out

    def _entry(self, f: Field, data: bytes, path: str) -> tuple[str, Any]:
        """A map entry: a message whose field 1 is the key and field 2 the value."""
        key: Any = ""
        value_field = Field(name=f.name, number=2, type=f.type)
        value = self._value(value_field, _expected_wire(value_field), _EMPTY.get(f.type, b""), path)
        for number, wire, raw in fields(data, (path, f"{f.name} entry")):
            if number == 1:
                key = _scalar(f.map_key, wire, raw, (path, f.map_key))
            elif number == 2:
                value = self._value(value_field, wire, raw, f"{path}[{key}]")
        return str(key), value


# --- the message types whose JSON is not an object -------------------------------------------


def _plain(reader: _Reader, data: bytes, where: tuple[str, str]) -> dict[int, Any]:
    return {n: v for n, _, v in fields(data, where)}


def _time(reader: _Reader, data: bytes, where: tuple[str, str]) -> str | None:
    raw = _plain(reader, data, where)
    seconds, nanos = _signed(raw.get(1, 0), 64), raw.get(2, 0)
    if seconds == 0 and nanos == 0:
        return None
    moment = datetime.fromtimestamp(seconds, UTC)
    if where[1] == MICRO_TIME:
        return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{nanos // 1000:06d}Z"
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def go_duration(ns: int) -> str:
    """Go's time.Duration.String for whole units: 1h2m3s, 1.5s, 250ms."""
    if ns == 0:
        return "0s"
    sign, ns = ("-" if ns < 0 else ""), abs(ns)
    for unit, size in (("ns", 1), ("µs", 10**3), ("ms", 10**6)):
        if ns < size * 1000:
            return f"{sign}{ns / size:g}{unit}"
    hours, rest = divmod(ns, 3600 * 10**9)
    minutes, rest = divmod(rest, 60 * 10**9)
    text = (f"{hours}h" if hours else "") + (f"{minutes}m" if hours or minutes else "")
    return f"{sign}{text}{rest / 10**9:g}s"


def _duration(reader: _Reader, data: bytes, where: tuple[str, str]) -> str:
    return go_duration(_signed(_plain(reader, data, where).get(1, 0), 64))


def _quantity(reader: _Reader, data: bytes, where: tuple[str, str]) -> str:
    return _scalar("string", LEN, _plain(reader, data, where).get(1, b""), where)  # type: ignore[no-any-return]


def _int_or_string(reader: _Reader, data: bytes, where: tuple[str, str]) -> int | str:
    """A number when type is 0, a string when 1; a zero of either is dropped unless the field
    has presence (a pointer: `maxSurge: 0` means something)."""
    raw = _plain(reader, data, where)
    if raw.get(1, 0) == 1:
        return _scalar("string", LEN, raw.get(3, b""), where)  # type: ignore[no-any-return]
    return _signed(raw.get(2, 0), 32)


def _json_or_envelope(reader: _Reader, raw: bytes, where: tuple[str, str]) -> Any:
    if not raw:
        return None
    if raw.startswith(MAGIC):
        return unwrap(raw)
    try:
        return json.loads(raw)
    except ValueError:
        raise DecodeError("embedded object is neither JSON nor protobuf", *where) from None


def _fields_v1(reader: _Reader, data: bytes, where: tuple[str, str]) -> Any:
    return _json_or_envelope(reader, bytes(_plain(reader, data, where).get(1, b"")), where)


def _raw_extension(reader: _Reader, data: bytes, where: tuple[str, str]) -> Any:
    return _json_or_envelope(reader, bytes(_plain(reader, data, where).get(1, b"")), where)


def _extra_value(reader: _Reader, data: bytes, where: tuple[str, str]) -> list[str]:
    return [bytes(v).decode() for n, _, v in fields(data, where) if n == 1]


_SPECIAL = {
    TIME: _time,
    MICRO_TIME: _time,
    DURATION: _duration,
    FIELDS_V1: _fields_v1,
    QUANTITY: _quantity,
    INT_OR_STRING: _int_or_string,
    RAW_EXTENSION: _raw_extension,
    EXTRA_VALUE: _extra_value,
}


def decode(message: str, data: bytes) -> Any:
    """The JSON form of `data`, an encoding of the schema's `message` (a full name)."""
    return _Reader(schema()).message(message, data, "")


def unwrap(body: bytes) -> dict[str, Any]:
    """A protobuf body's object, as JSON with its apiVersion and kind."""
    if not body.startswith(MAGIC):
        raise DecodeError("the body does not start with the protobuf magic k8s\\x00", "", UNKNOWN)
    envelope = decode(UNKNOWN, body[len(MAGIC) :])
    type_meta = envelope.get("typeMeta") or {}
    api_version, kind = str(type_meta.get("apiVersion", "")), str(type_meta.get("kind", ""))
    if envelope.get("contentEncoding"):
        raise DecodeError("content encodings are not supported", "contentEncoding", UNKNOWN)
    name = message_for(api_version, kind)
    if name is None:
        raise DecodeError(
            f"no protobuf schema for {api_version}, Kind={kind} in the emulator", "", UNKNOWN
        )
    raw = base64.b64decode(envelope.get("raw", ""))
    return {"apiVersion": api_version, "kind": kind, **decode(name, raw)}
