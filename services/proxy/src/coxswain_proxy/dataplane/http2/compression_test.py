"""HPACK (RFC 7541) against another implementation: the `hpack` library encodes what the proxy's
decoder must read, and decodes what the proxy's encoder writes.

Covers: indexed fields from both tables, literals with and without indexing, never-indexed
literals, Huffman strings, eviction from a small dynamic table, dynamic table size updates (and
one above the setting refused), the header list bound, blocks cut short or pointing nowhere
refused; the encoder's blocks decode the same, never touch the peer's dynamic table, and start
with a size update after the peer lowers SETTINGS_HEADER_TABLE_SIZE.
"""

from __future__ import annotations

import hpack
import pytest

from coxswain_proxy.dataplane.http2 import compression

REQUEST = [
    (b":method", b"GET"),
    (b":scheme", b"https"),
    (b":path", b"/a/b?c=d"),
    (b":authority", b"shop.example.com"),
    (b"user-agent", b"curl/8.5.0"),
    (b"accept", b"*/*"),
    (b"x-trace", b"0123456789abcdef"),
]


@pytest.mark.parametrize("huffman", [True, False], ids=["huffman", "raw"])
def test_a_sequence_of_blocks_decodes_as_the_client_encoded_it(huffman: bool) -> None:
    client = hpack.Encoder()
    decoder = compression.Decoder(max_list=65536)
    for i in range(20):
        fields = [*REQUEST, (b"x-seq", b"%d" % i), (b"cookie", b"s=%d" % (i % 3))]
        assert decoder.decode(client.encode(fields, huffman=huffman)) == fields


def test_never_indexed_and_sensitive_fields_decode() -> None:
    client = hpack.Encoder()
    block = client.encode(
        [(b":method", b"GET"), hpack.NeverIndexedHeaderTuple(b"authorization", b"x")]
    )
    assert compression.Decoder(65536).decode(block) == [
        (b":method", b"GET"),
        (b"authorization", b"x"),
    ]


def test_a_small_table_evicts_the_oldest_and_follows_size_updates() -> None:
    client = hpack.Encoder()
    client.header_table_size = 100  # the next block starts with a size update to 100
    decoder = compression.Decoder(65536)
    for i in range(30):
        fields = [(b"x-a", b"v" * (i % 7)), (b"x-b%d" % (i % 4), b"w")]
        assert decoder.decode(client.encode(fields)) == fields
    assert decoder.max_size == 100 and decoder.size <= 100


def test_a_size_update_above_the_setting_is_refused() -> None:
    with pytest.raises(compression.CompressionError):
        compression.Decoder(65536).decode(b"\x3f\xe1\x3f")  # size update to 8192 > 4096


@pytest.mark.parametrize(
    "block",
    [
        pytest.param(b"\x80", id="index-0"),
        pytest.param(b"\xbe", id="index-62-empty-table"),
        pytest.param(b"\x40\x05ab", id="name-cut-short"),
        pytest.param(b"\x7f", id="integer-cut-short"),
        pytest.param(b"\x00\x81\xff\x00", id="bad-huffman"),
        pytest.param(b"\x82\x20", id="size-update-after-a-field"),
    ],
)
def test_a_malformed_block_is_a_compression_error(block: bytes) -> None:
    with pytest.raises(compression.CompressionError):
        compression.Decoder(65536).decode(block)


def test_the_decoded_list_is_bounded_not_only_its_encoding() -> None:
    client = hpack.Encoder()
    block = client.encode([(b"x-big", b"v" * 4000)] * 12)  # one literal, then 1-byte references
    assert len(block) < 4200
    with pytest.raises(compression.HeaderListTooLarge):
        compression.Decoder(max_list=32 * 1024).decode(block)


RESPONSE = [
    (b":status", b"200"),
    (b"server", b"nginx"),
    (b"date", b"Thu, 03 Dec 2026 10:00:00 GMT"),
    (b"content-type", b"application/json"),
    (b"content-length", b"1234"),
    (b"x-custom-header-name", b"a" * 200),
    (b"set-cookie", b"a=b; Path=/"),
]


def test_encoded_blocks_decode_the_same_and_leave_the_peers_table_empty() -> None:
    encoder, peer = compression.Encoder(), hpack.Decoder()
    for _ in range(3):
        assert peer.decode(encoder.encode(RESPONSE), raw=True) == RESPONSE
    assert len(peer.header_table.dynamic_entries) == 0
    assert encoder.encode([(b":status", b"200")]) == b"\x88"  # the static pair, one byte


def test_a_lowered_table_size_setting_is_acknowledged_by_the_next_block() -> None:
    encoder = compression.Encoder()
    encoder.peer_table_size(0)
    first, second = encoder.encode(RESPONSE), encoder.encode(RESPONSE)
    assert first[0] == 0x20  # a dynamic table size update to 0
    assert second[0] != 0x20
    peer = hpack.Decoder()
    peer.max_allowed_table_size = 0
    assert peer.decode(first, raw=True) == RESPONSE
