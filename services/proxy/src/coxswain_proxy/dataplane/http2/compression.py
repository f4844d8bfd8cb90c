"""HPACK (RFC 7541), the server side's own: the decoder of request header blocks and an encoder
of response header blocks.

Where it sits: `engine.Engine` decodes every HEADERS block (and its CONTINUATIONs) with one
`Decoder` per connection and encodes what the streams send with one `Encoder`. The `hpack`
library did both before; its per-field Python (an object per integer, a table search per field,
a log call per step) was a fifth of an HTTP/2 request's cost (docs/performance.md).

The decoder is complete: indexed fields, the three literal forms, Huffman strings (the `hpack`
library's decoding table, the one piece reused), dynamic table size updates, eviction. The
encoder never adds to the dynamic table (RFC 7541 §6.2.2, "literal without indexing"), so its
state is only the size update it owes after the peer lowers SETTINGS_HEADER_TABLE_SIZE
(§4.2); values are sent raw, not Huffman-coded (§5.2 allows either). That keeps encoding one
pass of dictionary lookups and byte appends, and makes every block independent of the others.
"""

from __future__ import annotations

from collections import deque

from hpack.huffman_table import decode_huffman
from hpack.table import HeaderTable

from coxswain_proxy.dataplane.http2 import limits

STATIC = HeaderTable.STATIC_TABLE  # RFC 7541 Appendix A: 61 (name, value) pairs, 1-based
_STATIC_COUNT = len(STATIC)
_ENTRY_OVERHEAD = 32  # RFC 7541 §4.1: an entry's size is its name, its value and 32
DEFAULT_TABLE_SIZE = 4096  # SETTINGS_HEADER_TABLE_SIZE's initial value (RFC 9113 §6.5.2)
_MAX_INTEGER = 1 << 28  # no field, length or index this side accepts comes near it

# Huffman strings decoded before, by their coded bytes. Decoding is Python per nibble (the
# `hpack` library's table walk), and clients send some values coded anew in every request:
# nghttp2 (curl, h2load) never indexes `:path`, so each request's path is a Huffman literal.
# Bounded, and emptied when full: a miss costs one lookup.
_huffman_seen: dict[bytes, bytes] = {}
_HUFFMAN_MEMO_SIZE = 4096
_HUFFMAN_MEMO_LENGTH = 256


class CompressionError(Exception):
    """The block cannot be decoded: a connection error COMPRESSION_ERROR (RFC 9113 §4.3)."""

    code = limits.COMPRESSION_ERROR


class HeaderListTooLarge(Exception):
    """The decoded list passed SETTINGS_MAX_HEADER_LIST_SIZE: an HPACK bomb, ENHANCE_YOUR_CALM."""

    code = limits.ENHANCE_YOUR_CALM


def _integer(data: bytes, pos: int, prefix: int) -> tuple[int, int]:
    """The integer at `pos` with a `prefix`-bit prefix (RFC 7541 §5.1): (value, next position)."""
    mask = (1 << prefix) - 1
    value = data[pos] & mask
    pos += 1
    if value < mask:
        return value, pos
    shift = 0
    end = len(data)
    while True:
        if pos >= end:
            raise CompressionError("integer runs past the block")
        byte = data[pos]
        pos += 1
        value += (byte & 0x7F) << shift
        if value > _MAX_INTEGER:
            raise CompressionError("integer too large")
        if not byte & 0x80:
            return value, pos
        shift += 7


def _string(data: bytes, pos: int) -> tuple[bytes, int]:
    """The string literal at `pos` (RFC 7541 §5.2): (its bytes, next position)."""
    huffman = data[pos] & 0x80
    length, pos = _integer(data, pos, 7)
    end = pos + length
    if end > len(data):
        raise CompressionError("string runs past the block")
    raw = data[pos:end]
    if huffman:
        decoded = _huffman_seen.get(raw)
        if decoded is None:
            try:
                decoded = decode_huffman(raw)
            except Exception as exc:  # hpack's HPACKDecodingError: an invalid code or padding
                raise CompressionError(str(exc)) from exc
            if length <= _HUFFMAN_MEMO_LENGTH:
                if len(_huffman_seen) >= _HUFFMAN_MEMO_SIZE:
                    _huffman_seen.clear()
                _huffman_seen[raw] = decoded
        raw = decoded
    return raw, end


class Decoder:
    """One connection's request-side HPACK state: the dynamic table the client's encoder fills."""

    __slots__ = ("table", "size", "max_size", "settings_size", "max_list")

    def __init__(self, max_list: int) -> None:
        self.table: deque[tuple[bytes, bytes]] = deque()  # newest first (index 62 is [0])
        self.size = 0
        self.max_size = DEFAULT_TABLE_SIZE  # what the client's last size update chose
        self.settings_size = DEFAULT_TABLE_SIZE  # what our SETTINGS allow it (we never lower it)
        self.max_list = max_list

    def _add(self, name: bytes, value: bytes) -> None:
        entry = len(name) + len(value) + _ENTRY_OVERHEAD
        table = self.table
        if entry > self.max_size:
            table.clear()  # §4.4: an entry larger than the table empties it and is not added
            self.size = 0
            return
        size = self.size + entry
        while size > self.max_size:
            old_name, old_value = table.pop()
            size -= len(old_name) + len(old_value) + _ENTRY_OVERHEAD
        table.appendleft((name, value))
        self.size = size

    def _resize(self, new: int) -> None:
        if new > self.settings_size:
            raise CompressionError("dynamic table size update above SETTINGS_HEADER_TABLE_SIZE")
        self.max_size = new
        table = self.table
        while self.size > new:
            old_name, old_value = table.pop()
            self.size -= len(old_name) + len(old_value) + _ENTRY_OVERHEAD

    def _indexed(self, index: int) -> tuple[bytes, bytes]:
        if 0 < index <= _STATIC_COUNT:
            return STATIC[index - 1]
        dynamic = index - _STATIC_COUNT - 1
        if index == 0 or dynamic >= len(self.table):
            raise CompressionError(f"index {index} is in neither table")
        return self.table[dynamic]

    def decode(self, data: bytes) -> list[tuple[bytes, bytes]]:
        """The (name, value) fields of one complete header block, in order."""
        fields: list[tuple[bytes, bytes]] = []
        append = fields.append
        pos, end, listed, limit = 0, len(data), 0, self.max_list
        while pos < end:
            byte = data[pos]
            if byte & 0x80:  # §6.1 indexed field
                index = byte & 0x7F
                if index == 0x7F:
                    index, pos = _integer(data, pos, 7)
                    field = self._indexed(index)
                else:
                    pos += 1
                    if index and index <= _STATIC_COUNT:
                        field = STATIC[index - 1]  # the common case, inline
                    else:
                        field = self._indexed(index)
            elif byte & 0xE0 == 0x20:  # §6.3 dynamic table size update: only before any field
                if fields:
                    raise CompressionError("dynamic table size update after a field")
                size, pos = _integer(data, pos, 5)
                self._resize(size)
                continue
            else:
                indexing = byte & 0x40  # §6.2.1, else §6.2.2 / §6.2.3 (4-bit prefix)
                index, pos = _integer(data, pos, 6 if indexing else 4)
                if index:
                    name = self._indexed(index)[0]
                else:
                    name, pos = _string(data, pos)
                value, pos = _string(data, pos)
                field = (name, value)
                if indexing:
                    self._add(name, value)
            listed += len(field[0]) + len(field[1]) + _ENTRY_OVERHEAD
            if listed > limit:
                raise HeaderListTooLarge(f"header list past {limit} bytes")
            append(field)
        return fields


# Exact (name, value) pairs of the static table, and its names (the first index of each).
_STATIC_PAIRS = {pair: i for i, pair in reversed(list(enumerate(STATIC, 1)))}
_STATIC_NAMES = {name: i for i, (name, _) in reversed(list(enumerate(STATIC, 1)))}


def _put_integer(out: bytearray, first: int, prefix: int, value: int) -> None:
    """Append `value` with a `prefix`-bit prefix, `first` holding the representation's bits."""
    mask = (1 << prefix) - 1
    if value < mask:
        out.append(first | value)
        return
    out.append(first | mask)
    value -= mask
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)


class Encoder:
    """Response-side HPACK: stateless blocks, plus the size update owed after a lower setting."""

    __slots__ = ("owed",)

    def __init__(self) -> None:
        self.owed: int | None = None  # a size update the next block must start with

    def peer_table_size(self, size: int) -> None:
        """The client's SETTINGS_HEADER_TABLE_SIZE changed. Below the 4096 the client's decoder
        assumed, it expects the next block to start with a size update (RFC 7541 §4.2; nghttp2
        refuses a block without one). Nothing is ever added, so 0 always fits."""
        if size < DEFAULT_TABLE_SIZE:
            self.owed = 0

    def encode(self, fields: list[tuple[bytes, bytes]]) -> bytes:
        out = bytearray()
        if self.owed is not None:
            _put_integer(out, 0x20, 5, self.owed)
            self.owed = None
        seen = _fields_seen
        for field in fields:
            piece = seen.get(field)
            if piece is None:
                piece = _field(field)
                if len(field[1]) <= _FIELD_MEMO_LENGTH:
                    if len(seen) >= _FIELD_MEMO_SIZE:
                        seen.clear()
                    seen[field] = piece
            out += piece
        return bytes(out)


# Fields encoded before. Every block is stateless (nothing indexed), so a field's encoding is
# the same in every block of every connection: most of a response head (its status, Server,
# Content-Type, Via, Date for a second) is one lookup. Bounded, and emptied when full.
_fields_seen: dict[tuple[bytes, bytes], bytes] = {}
_FIELD_MEMO_SIZE = 4096
_FIELD_MEMO_LENGTH = 256


def _field(field: tuple[bytes, bytes]) -> bytes:
    """One field: a static pair as its index (§6.1), else a literal without indexing (§6.2.2),
    its name as a static index when there is one."""
    index = _STATIC_PAIRS.get(field)
    if index is not None:
        return bytes((0x80 | index,))  # every static index is below 127: one byte
    name, value = field
    out = bytearray()
    index = _STATIC_NAMES.get(name)
    if index is None:
        out.append(0)
        _put_integer(out, 0, 7, len(name))
        out += name
    else:
        _put_integer(out, 0, 4, index)
    _put_integer(out, 0, 7, len(value))
    out += value
    return bytes(out)
