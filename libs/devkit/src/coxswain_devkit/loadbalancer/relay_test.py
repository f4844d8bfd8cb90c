"""The relays on their own, on asyncio's loop and on uvloop (which `coxswain-devkit lb` runs on).

Covers TCP: every byte a client sends at once (before the endpoint is even connected) and after
reaches the endpoint, the client's half-close reaches it, and its answer after that comes back;
rotation across endpoints; a reset when no endpoint is there. UDP: a datagram's reply returns
to the client that sent it. The Service-level behaviour is balancer_test.py's.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any, cast

import pytest
import uvloop

from coxswain_devkit.loadbalancer.relay import Backends, TcpRelay, UdpRelay

Runner = Callable[[Coroutine[Any, Any, Any]], Any]
LOOPS = [pytest.param(asyncio.run, id="asyncio"), pytest.param(uvloop.run, id="uvloop")]
PAYLOAD = bytes(range(256)) * 4096  # 1 MiB


async def _counting(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Read to EOF, then answer with how many bytes came and whether they were intact."""
    data = await reader.read()
    writer.write(b"%d %s" % (len(data), b"intact" if data == PAYLOAD else b"damaged"))
    await writer.drain()
    writer.close()


async def _tcp_round_trip() -> tuple[bytes, bytes]:
    server = await asyncio.start_server(_counting, "127.0.0.1", 0)
    backends = Backends()
    backends.set([("127.0.0.1", server.sockets[0].getsockname()[1])])
    relay = TcpRelay(backends)
    port = await relay.start("127.0.0.1", 0)
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(PAYLOAD)  # all at once: the relay is still connecting to the endpoint
        writer.write_eof()
        answer = await reader.read()
        writer.close()
        backends.set([])
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        refused = await reader.read()
        writer.close()
        return answer, refused
    finally:
        await relay.close()
        server.close()
        await server.wait_closed()


@pytest.mark.parametrize("run", LOOPS)
def test_tcp_relays_every_byte_and_the_half_close(run: Runner) -> None:
    answer, without_endpoints = run(_tcp_round_trip())
    assert answer == b"%d intact" % len(PAYLOAD)
    assert without_endpoints == b"", "no endpoint: the connection is reset, nothing answered"


class _Echo(asyncio.DatagramProtocol):
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.DatagramTransport, transport)

    def datagram_received(self, data: bytes, addr: Any) -> None:
        self.transport.sendto(b"re:" + data, addr)


class _Client(asyncio.DatagramProtocol):
    def __init__(self) -> None:
        self.replies: asyncio.Queue[bytes] = asyncio.Queue()

    def datagram_received(self, data: bytes, addr: Any) -> None:
        self.replies.put_nowait(data)


async def _udp_round_trip() -> bytes:
    loop = asyncio.get_running_loop()
    echo, _ = await loop.create_datagram_endpoint(_Echo, local_addr=("127.0.0.1", 0))
    backends = Backends()
    backends.set([("127.0.0.1", echo.get_extra_info("sockname")[1])])
    relay = UdpRelay(backends, idle=1.0)
    port = await relay.start("127.0.0.1", 0)
    client, protocol = await loop.create_datagram_endpoint(_Client, remote_addr=("127.0.0.1", port))
    try:
        client.sendto(b"ping")
        async with asyncio.timeout(30):
            return await protocol.replies.get()
    finally:
        client.close()
        await relay.close()
        echo.close()


@pytest.mark.parametrize("run", LOOPS)
def test_udp_replies_reach_the_sender(run: Runner) -> None:
    assert run(_udp_round_trip()) == b"re:ping"


def test_backends_rotate() -> None:
    backends = Backends()
    backends.set([("a", 1), ("b", 2), ("c", 3)])
    firsts = [backends.order()[0] for _ in range(4)]
    assert firsts == [("a", 1), ("b", 2), ("c", 3), ("a", 1)]
    assert backends.order() == [("b", 2), ("c", 3), ("a", 1)]
