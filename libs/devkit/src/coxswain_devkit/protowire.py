"""Raw protobuf bytes, for tests that must send what no generated encoder ever would.

The hostile-client tests (the discovery server's, the identity service's, the wire decoder's)
send each field with each wrong wire type, oversized or truncated: they build the bytes here,
field by field (protobuf encoding: a tag is `field_number << 3 | wire_type`, then the value).
"""

from __future__ import annotations

from collections.abc import Callable

__all__ = [
    "VARINT", "I64", "LEN", "I32", "WIRE_NAMES", "WRONG",
    "varint", "tag", "f_varint", "f_len", "f_str",
]  # fmt: skip

VARINT, I64, LEN, I32 = 0, 1, 2, 5
WIRE_NAMES = {VARINT: "varint", I64: "fixed64", LEN: "length-delimited", I32: "fixed32"}


def varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def tag(number: int, wire: int) -> bytes:
    return varint(number << 3 | wire)


def f_varint(number: int, value: int) -> bytes:
    return tag(number, VARINT) + varint(value)


def f_len(number: int, payload: bytes) -> bytes:
    return tag(number, LEN) + varint(len(payload)) + payload


def f_str(number: int, text: str) -> bytes:
    return f_len(number, text.encode())


# A well-framed value of each wire type, for sending a field with the wrong one.
WRONG: dict[int, Callable[[int], bytes]] = {
    VARINT: lambda n: f_varint(n, 5),
    I64: lambda n: tag(n, I64) + b"\x01" * 8,
    LEN: lambda n: f_len(n, b"xy"),
    I32: lambda n: tag(n, I32) + b"\x01" * 4,
}
