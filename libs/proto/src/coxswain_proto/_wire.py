"""Strict checks of protobuf wire bytes against a betterproto2 message class.

Where it sits: `rpc` runs `check` on every request a server receives, before betterproto2
parses it. betterproto2 trusts its input: a varint where a string or a message belongs comes
out as an `int`, a length-delimited value in a scalar field as a `list`, a length running past
the end is read short without a word, a group or reserved wire type leaves `None` behind, two
members of one oneof are both kept, and a fixed-width string or invalid UTF-8 raises from deep
inside the parser. Each of those would reach handler code as a value of the wrong type. So the
bytes are walked once against the class's own field table, and refused, naming the first field
that is wrong, unless every field has its declared wire type, lies wholly inside its message,
and (for strings) is UTF-8. Unknown field numbers are skipped once their framing checks out.

Quotes are from the protobuf encoding guide (protobuf.dev/programming-guides/encoding).
"""

from __future__ import annotations

from typing import cast

import betterproto2

__all__ = ["WireError", "check"]

VARINT, I64, LEN, I32 = 0, 1, 2, 5
# "Variable-width integers, or varints ... can use anywhere between one and ten bytes."
MAX_VARINT_BYTES = 10
# "Field numbers ... 1 to 536,870,911" (Language Guide, "Assigning Field Numbers").
MAX_FIELD_NUMBER = (1 << 29) - 1
# Nested messages followed at most this deep: far beyond any request schema of ours, and a
# bound on recursion should a schema ever refer to itself.
MAX_DEPTH = 32

_WIRE_TYPE = {
    **dict.fromkeys(
        (
            betterproto2.TYPE_ENUM,
            betterproto2.TYPE_BOOL,
            betterproto2.TYPE_INT32,
            betterproto2.TYPE_INT64,
            betterproto2.TYPE_UINT32,
            betterproto2.TYPE_UINT64,
            betterproto2.TYPE_SINT32,
            betterproto2.TYPE_SINT64,
        ),
        VARINT,
    ),
    **dict.fromkeys(
        (betterproto2.TYPE_FLOAT, betterproto2.TYPE_FIXED32, betterproto2.TYPE_SFIXED32), I32
    ),
    **dict.fromkeys(
        (betterproto2.TYPE_DOUBLE, betterproto2.TYPE_FIXED64, betterproto2.TYPE_SFIXED64), I64
    ),
    **dict.fromkeys(
        (
            betterproto2.TYPE_STRING,
            betterproto2.TYPE_BYTES,
            betterproto2.TYPE_MESSAGE,
            betterproto2.TYPE_MAP,
        ),
        LEN,
    ),
}
_WIDTH = {I32: 4, I64: 8}
_NESTED = (betterproto2.TYPE_MESSAGE, betterproto2.TYPE_MAP)


class WireError(ValueError):
    """The bytes are not a well-formed encoding; `path` names the field ("" for the message)."""

    def __init__(self, path: str) -> None:
        super().__init__(path)
        self.path = path


def check(cls: type[betterproto2.Message], data: bytes) -> None:
    """Nothing when `data` is a well-formed encoding of `cls`; otherwise `WireError`."""
    _message(cls, memoryview(data), 0, len(data), "", 0)


def _message(
    cls: type[betterproto2.Message], data: memoryview, pos: int, end: int, path: str, depth: int
) -> None:
    if depth > MAX_DEPTH:
        raise WireError(path)
    # betterproto2's classproperty is typed for the generated classes, not for `type[Message]`.
    meta: betterproto2.ProtoClassMetadata = cls._betterproto  # type: ignore[arg-type]
    oneofs: dict[str, str] = {}  # oneof group -> the member seen in it
    while pos < end:
        key, pos = _varint(data, pos, end, path)
        number, wire = key >> 3, key & 7
        if not 1 <= number <= MAX_FIELD_NUMBER:
            raise WireError(path)
        name = meta.field_name_by_number.get(number)
        if name is None:  # unknown to this build: skipped, as proto3 parsers must
            # Named by the message holding it: a peer's field numbers are not ours to repeat.
            _, pos = _extent(data, pos, end, wire, path)
            continue
        here = f"{path}.{name}" if path else name
        start, pos = _extent(data, pos, end, wire, here)
        _field(meta, name, wire, data, start, pos, here, depth)
        group = meta.meta_by_field_name[name].group
        # betterproto2 keeps every member of a oneof it reads, where protobuf keeps the last:
        # a message naming two members is refused rather than handed on self-contradictory.
        if group is not None and oneofs.setdefault(group, name) != name:
            raise WireError(here)


def _extent(data: memoryview, pos: int, end: int, wire: int, path: str) -> tuple[int, int]:
    """(start, end) of the value at `pos` of wire type `wire`, checked to fit before `end`."""
    if wire == VARINT:
        _, after = _varint(data, pos, end, path)
        return pos, after
    if wire == LEN:
        length, pos = _varint(data, pos, end, path)
        after = pos + length
    elif wire in _WIDTH:
        after = pos + _WIDTH[wire]
    else:
        # "3 SGROUP, 4 EGROUP: group start/end (deprecated)": not proto3; 6 and 7 are unused.
        raise WireError(path)
    if after > end:
        raise WireError(path)
    return pos, after


def _field(
    meta: betterproto2.ProtoClassMetadata,
    name: str,
    wire: int,
    data: memoryview,
    start: int,
    stop: int,
    path: str,
    depth: int,
) -> None:
    field = meta.meta_by_field_name[name]
    kind = field.proto_type
    expected = _WIRE_TYPE.get(kind)
    # "Protocol buffer parsers must be able to parse repeated fields that were compiled as
    # packed as if they were not packed, and vice versa": either form, repeated scalars only.
    if wire == LEN and field.repeated and expected in (VARINT, I32, I64):
        _packed(expected, data, start, stop, path)
        return
    if wire != expected:
        raise WireError(path)
    if kind == betterproto2.TYPE_STRING:
        try:
            str(data[start:stop], "utf-8")
        except UnicodeDecodeError:
            # "string: ... must always contain UTF-8 encoded or 7-bit ASCII text."
            raise WireError(path) from None
    elif kind in _NESTED:
        nested = field.unwrap() if field.unwrap else meta.cls_by_field[name]
        _message(cast(type[betterproto2.Message], nested), data, start, stop, path, depth + 1)


def _packed(wire: int, data: memoryview, start: int, stop: int, path: str) -> None:
    if wire in _WIDTH:
        if (stop - start) % _WIDTH[wire]:
            raise WireError(path)
        return
    while start < stop:
        _, start = _varint(data, start, stop, path)


def _varint(data: memoryview, pos: int, end: int, path: str) -> tuple[int, int]:
    """The varint at `pos` and the position after it; `WireError` if it runs past `end`."""
    value = shift = 0
    for index in range(pos, min(end, pos + MAX_VARINT_BYTES)):
        byte = data[index]
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, index + 1
        shift += 7
    raise WireError(path)
