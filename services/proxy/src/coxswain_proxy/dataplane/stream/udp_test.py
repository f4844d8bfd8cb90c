"""UDP relays through a real data plane: sessions per client, committed, bounded, expiring.

Covers: datagrams relayed both ways to a real UDP echo; each client's session stays on the backend
its first datagram was committed to, and new clients split by weight; a 65507-byte datagram
crosses whole both ways; a session idle for `udp_idle_timeout` ends (fast-forwarded sweep clock)
and not before, and the client's next datagram opens a new one; past `udp_sessions` a new client
is dropped and counted refused; a new session holds `udp_queue` datagrams while its backend socket
opens and drops the rest (datagrams handed to the port in one loop turn, before that socket can
open); a snapshot that removes the route leaves an open session on its
backend while a new client is refused. Leaves out TCP (relay_test).
"""

from __future__ import annotations

import asyncio
import contextlib
import math
from collections.abc import AsyncIterator

from coxswain_proxy.dataplane import stats
from coxswain_proxy.dataplane import testing as t
from coxswain_proxy.dataplane.core import Dataplane
from coxswain_proxy.dataplane.stream import rigs as r
from coxswain_proxy.dataplane.stream import udp
from coxswain_proxy.dataplane.stream.relay_limits import DEFAULT_LIMITS, StreamLimits
from coxswain_routing import ListenerProtocol, Resource

UDP = ListenerProtocol.UDP
LISTENER = r.stream_listeners((r.UDP_PORT, UDP))
ROUTE = "UDPRoute/default/udp"


def udp_route(*backends: r.Backend) -> r.StreamRoute:
    return r.stream_route(r.UDP_PORT, UDP, r.match("udp", *backends, kind="UDPRoute"))


@contextlib.asynccontextmanager
async def clients(plane: Dataplane, count: int) -> AsyncIterator[list[r.UdpClient]]:
    port = r.bound_at(plane, r.UDP_PORT, UDP)
    async with contextlib.AsyncExitStack() as stack:
        yield [await stack.enter_async_context(r.udp_client(port)) for _ in range(count)]


async def test_each_client_keeps_its_backend_and_new_clients_split_by_weight() -> None:
    async with r.udp_echo("a") as (_, a), r.udp_echo("b") as (_, b):
        resources: list[Resource] = [
            LISTENER,
            r.endpoint_set("a", a, udp=True),
            r.endpoint_set("b", b, udp=True),
            udp_route(r.share("a", 1, udp=True), r.share("b", 1, udp=True)),
        ]
        async with t.running(resources) as plane, clients(plane, 4) as four:
            first = [(await c.ask(b"x"))[:1] for c in four]
            again = [(await c.ask(b"y"))[:1] for c in four]
    assert sorted(first) == [b"a", b"a", b"b", b"b"]
    assert again == first


async def test_the_largest_datagram_crosses_whole_both_ways() -> None:
    big = bytes(range(256)) * 255 + bytes(227)  # 65507 bytes
    assert len(big) == 65507
    async with r.udp_echo("") as (_, a):
        resources: list[Resource] = [
            LISTENER,
            r.endpoint_set("a", a, udp=True),
            udp_route(r.share("a", udp=True)),
        ]
        async with t.running(resources) as plane, clients(plane, 1) as [client]:
            assert await client.ask(big) == big


async def test_an_idle_session_ends_at_its_timeout_and_not_before() -> None:
    async with r.udp_echo("a") as (echo, a):
        resources: list[Resource] = [
            LISTENER,
            r.endpoint_set("a", a, udp=True),
            udp_route(r.share("a", udp=True)),
        ]
        async with t.running(resources) as plane, clients(plane, 1) as [client]:
            assert plane.rt is not None
            assert await client.ask(b"x") == b"a:x"
            # A whole second: sums and differences of the fake clock stay exact (in floats,
            # (now + 2T) - (now + T) can fall an ulp short of T, and the session live on).
            now = float(math.ceil(plane.rt.loop.time()))
            plane.sweep(now)
            plane.sweep(now + DEFAULT_LIMITS.udp_idle_timeout - 1)
            assert await client.ask(b"y") == b"a:y"
            assert len(echo.peers) == 1  # one session, one backend socket
            plane.sweep(now + DEFAULT_LIMITS.udp_idle_timeout)
            plane.sweep(now + 2 * DEFAULT_LIMITS.udp_idle_timeout)
            assert not plane.rt.connections
            assert await client.ask(b"z") == b"a:z"
            assert len(echo.peers) == 2  # a new session, from a new backend socket
            assert plane.rt.stats.streams[ROUTE][stats.STREAM_TOTAL] == 2


async def test_a_new_client_past_the_session_bound_is_dropped() -> None:
    async with r.udp_echo("a") as (_, a), t.running([]) as plane:
        assert plane.listeners is not None and plane.rt is not None
        plane.listeners.streams.limits = StreamLimits(udp_sessions=2)
        await plane.apply(
            [LISTENER, r.endpoint_set("a", a, udp=True), udp_route(r.share("a", udp=True))]
        )
        async with clients(plane, 3) as [one, two, three]:
            assert await one.ask(b"1") == b"a:1"
            assert await two.ask(b"2") == b"a:2"
            three.send(b"3")
            assert await one.ask(b"4") == b"a:4"  # sent after the third client's datagram
            assert three.answers.empty()
            assert plane.rt.stats.streams["none"][stats.STREAM_REFUSED] == 1


async def test_a_new_session_holds_its_queue_bound_while_its_socket_opens() -> None:
    limits = StreamLimits(udp_queue=3)
    async with r.udp_echo("a") as (_, a):
        resources: list[Resource] = [
            LISTENER,
            r.endpoint_set("a", a, udp=True),
            udp_route(r.share("a", udp=True)),
        ]
        async with t.running(resources) as plane:
            rt = plane.rt
            assert rt is not None
            # A listener of its own on the plane's tables, so the test holds its protocol.
            transport, port = await rt.loop.create_datagram_endpoint(
                lambda: udp.UdpPort(rt, r.UDP_PORT, limits), local_addr=("127.0.0.1", 0)
            )
            try:
                async with r.udp_client(transport.get_extra_info("sockname")[1]) as client:
                    assert client.transport is not None
                    me = client.transport.get_extra_info("sockname")
                    for i in range(5):  # one loop turn: the session's socket cannot open yet
                        port.datagram_received(b"q%d" % i, me)
                    async with asyncio.timeout(10):
                        held = [await client.answers.get() for _ in range(3)]
                    assert held == [b"a:q0", b"a:q1", b"a:q2"]
                    assert await client.ask(b"next") == b"a:next"  # q3 and q4 never came
                    assert client.answers.empty()
            finally:
                transport.close()
            assert rt.stats.streams[ROUTE][stats.STREAM_RECEIVED] == 3 * 2 + 4


async def test_an_open_session_outlives_the_removal_of_its_route() -> None:
    async with r.udp_echo("a") as (_, a):
        kept: list[Resource] = [LISTENER, r.endpoint_set("a", a, udp=True)]
        async with t.running([*kept, udp_route(r.share("a", udp=True))]) as plane:
            assert plane.rt is not None
            async with clients(plane, 2) as [old, new]:
                assert await old.ask(b"x") == b"a:x"
                await plane.apply(kept)
                assert await old.ask(b"y") == b"a:y"
                new.send(b"z")
                assert await old.ask(b"w") == b"a:w"
                assert new.answers.empty()
                assert plane.rt.stats.streams["none"][stats.STREAM_REFUSED] == 1
