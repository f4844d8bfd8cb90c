"""The ClientHello reader finds the offered server name however the hello is cut, within its bound.

Covers: a real ClientHello (made by Python's own TLS client) read whole, byte by byte, and
re-fragmented over many TLS records; no SNI; a name with a trailing dot or upper case; what is not
TLS (an HTTP request), a record of another type, a first message that is not a ClientHello and a
hello larger than the bound are refused. Leaves out the time bound (passthrough_test) and the
routing by name (compiled_test).
"""

from __future__ import annotations

import ssl

import pytest

from coxswain_proxy.dataplane.stream.clienthello import (
    MAX_HELLO_BYTES,
    ClientHelloReader,
    Hello,
    NotClientHello,
)


def client_hello(server_name: str | None) -> bytes:
    context = ssl.create_default_context()
    context.check_hostname = False
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    tls = context.wrap_bio(incoming, outgoing, server_hostname=server_name)
    with pytest.raises(ssl.SSLWantReadError):
        tls.do_handshake()
    return outgoing.read()


def refragmented(hello: bytes, size: int) -> bytes:
    """The same handshake message carried in records of at most `size` bytes each."""
    message = hello[5:]
    out = bytearray()
    for at in range(0, len(message), size):
        piece = message[at : at + size]
        out += hello[:3] + len(piece).to_bytes(2) + piece
    return bytes(out)


def feed_all(reader: ClientHelloReader, pieces: list[bytes]) -> Hello | None:
    found = None
    for piece in pieces:
        assert found is None, "answered before the hello was complete"
        found = reader.feed(piece)
    return found


def test_a_whole_hello_gives_its_server_name() -> None:
    hello = client_hello("Shop.Example.com")
    reader = ClientHelloReader()
    assert reader.feed(hello) == Hello("shop.example.com")
    assert b"".join(reader.received) == hello


def test_a_hello_fed_byte_by_byte_is_read_at_its_last_byte() -> None:
    hello = client_hello("shop.example.com")
    reader = ClientHelloReader()
    found = feed_all(reader, [hello[i : i + 1] for i in range(len(hello))])
    assert found == Hello("shop.example.com")
    assert b"".join(reader.received) == hello


@pytest.mark.parametrize("size", [1, 7, 100], ids=["one-byte-records", "7", "100"])
def test_a_hello_split_over_tls_records_is_joined(size: int) -> None:
    # RFC 8446 §5.1: handshake messages "MAY be ... fragmented across several records".
    data = refragmented(client_hello("deep.shop.example.com"), size)
    reader = ClientHelloReader()
    found = feed_all(reader, [data[i : i + 3] for i in range(0, len(data), 3)])
    assert found == Hello("deep.shop.example.com")


def test_no_sni_is_the_empty_name() -> None:
    assert ClientHelloReader().feed(client_hello(None)) == Hello("")


def test_a_trailing_dot_is_dropped() -> None:
    hello = client_hello("shop.example.com")
    name = b"shop.example.com"
    # Grow the host name by one byte, fixing the five enclosing lengths.
    at = hello.index(name)
    patched = bytearray(hello[:at] + name + b"." + hello[at + len(name) :])
    for offset, width in ((at - 2, 2), (at - 5, 2), (at - 7, 2), (3, 2), (6, 3)):
        value = int.from_bytes(patched[offset : offset + width]) + 1
        patched[offset : offset + width] = value.to_bytes(width)
    ext_total = _extensions_length_offset(bytes(patched))
    value = int.from_bytes(patched[ext_total : ext_total + 2]) + 1
    patched[ext_total : ext_total + 2] = value.to_bytes(2)
    assert ClientHelloReader().feed(bytes(patched)) == Hello("shop.example.com")


def _extensions_length_offset(hello: bytes) -> int:
    at = 5 + 4 + 2 + 32
    at += 1 + hello[at]
    at += 2 + int.from_bytes(hello[at : at + 2])
    at += 1 + hello[at]
    return at


@pytest.mark.parametrize(
    "data",
    [
        pytest.param(b"GET / HTTP/1.1\r\nHost: shop.example.com\r\n\r\n", id="plain-http"),
        pytest.param(b"\x17\x03\x03\x00\x05hello", id="application-data-record"),
        pytest.param(b"\x16\x03\x01\x00\x04\x02\x00\x00\x00", id="server-hello-first"),
        pytest.param(b"\x16\x03\x01\x00\x00", id="empty-record"),
        pytest.param(b"\x16\x03\x01\x40\x01", id="record-over-2-14"),
    ],
)
def test_what_is_no_client_hello_is_refused(data: bytes) -> None:
    with pytest.raises(NotClientHello):
        ClientHelloReader().feed(data)


def test_a_hello_declaring_more_than_the_bound_is_refused_at_once() -> None:
    record = b"\x16\x03\x01\x00\x10" + b"\x01" + (MAX_HELLO_BYTES).to_bytes(3) + bytes(12)
    with pytest.raises(NotClientHello, match=str(MAX_HELLO_BYTES)):
        ClientHelloReader().feed(record)


def test_bytes_past_the_bound_are_refused() -> None:
    reader = ClientHelloReader(limit=64)
    hello = client_hello("shop.example.com")
    with pytest.raises(NotClientHello):
        feed_all(reader, [hello[i : i + 16] for i in range(0, len(hello), 16)])


def test_a_hello_cut_short_inside_is_refused() -> None:
    # A complete handshake message whose extensions vector claims more than it holds.
    body = bytes(2 + 32) + b"\x00" + b"\x00\x02\x13\x01" + b"\x01\x00" + b"\x00\x10"
    message = b"\x01" + len(body).to_bytes(3) + body
    with pytest.raises(NotClientHello):
        ClientHelloReader().feed(b"\x16\x03\x01" + len(message).to_bytes(2) + message)
