"""TCP relays through a real data plane: both directions, half-close, splits, refusals, swaps.

Covers: bytes relayed both ways to a real echo; a client that shuts down writing still gets the
backend's answer and its EOF; 8 MiB each way through a slow reader (backpressure both ways, every
byte in order); weights split connections exactly; an unresolved share and a member that cannot be
dialled refuse their connections (closed) and never pass them to a sibling; a member that never
answers the SYN is refused at the connect timeout and not before (fast-forwarded sweep clock); a
port with no route
is bound and closes what arrives; a snapshot that removes a route leaves an open relay working and
refuses new connections; an idle relay is closed at its timeout and not before (fast-forwarded
sweep clock); binds report TCP, TLS and UDP; the per-route metrics. Leaves out TLS passthrough
(passthrough_test) and UDP (udp_test).
"""

from __future__ import annotations

import asyncio
import math
import socket

from prometheus_client import CollectorRegistry, generate_latest

from coxswain_proxy.dataplane import collector, stats
from coxswain_proxy.dataplane import testing as t
from coxswain_proxy.dataplane.core import Dataplane
from coxswain_proxy.dataplane.stream import rigs as r
from coxswain_proxy.dataplane.stream.relay import StreamRelay
from coxswain_proxy.dataplane.stream.relay_limits import DEFAULT_LIMITS
from coxswain_routing import ListenerProtocol, Resource

TCP = ListenerProtocol.TCP
LISTENER = r.stream_listeners((r.TCP_PORT, TCP))


async def exchange(port: int, data: bytes = b"hello") -> bytes:
    """Send `data`, shut down writing, and read until the relay closes."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(data)
    writer.write_eof()
    try:
        return await r.read_until_closed(reader)
    except ConnectionResetError:
        return b""
    finally:
        writer.close()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def metrics(plane: Dataplane) -> str:
    assert plane.rt is not None
    stats = plane.rt.stats
    registry = CollectorRegistry()
    registry.register(collector.Collector(lambda: stats, lambda: 0.0))
    return generate_latest(registry).decode()


async def test_a_half_closed_client_still_gets_the_answer_and_the_eof() -> None:
    async with r.echo("a") as a:
        resources: list[Resource] = [
            LISTENER,
            r.endpoint_set("a", a.port),
            r.tcp_route(r.share("a")),
        ]
        async with t.running(resources) as plane:
            port = r.bound_at(plane, r.TCP_PORT, TCP)
            assert await exchange(port) == b"a:helloa:bye"


async def test_megabytes_both_ways_arrive_whole_through_backpressure() -> None:
    payload = bytes(range(256)) * (8 * 4096)  # 8 MiB
    async with r.echo("") as a:
        resources: list[Resource] = [
            LISTENER,
            r.endpoint_set("a", a.port),
            r.tcp_route(r.share("a")),
        ]
        async with t.running(resources) as plane:
            reader, writer = await asyncio.open_connection(
                "127.0.0.1", r.bound_at(plane, r.TCP_PORT, TCP)
            )
            writer.write(payload)  # far more than any buffer: the relay must pause and resume
            sending = asyncio.ensure_future(writer.drain())
            received = bytearray()
            async with asyncio.timeout(30):
                while len(received) < len(payload):
                    received += await reader.read(4096)  # a slow reader
            await sending
            writer.close()
            assert received == payload


async def test_weights_split_connections_exactly() -> None:
    async with r.echo("a") as a, r.echo("b") as b:
        resources: list[Resource] = [
            LISTENER,
            r.endpoint_set("a", a.port),
            r.endpoint_set("b", b.port),
            r.tcp_route(r.share("a", 3), r.share("b", 1)),
        ]
        async with t.running(resources) as plane:
            port = r.bound_at(plane, r.TCP_PORT, TCP)
            answers = [await exchange(port) for _ in range(8)]
    assert sorted(x[:1] for x in answers) == [b"a"] * 6 + [b"b"] * 2


async def test_an_unresolved_share_refuses_its_connections() -> None:
    async with r.echo("a") as a:
        resources: list[Resource] = [
            LISTENER,
            r.endpoint_set("a", a.port),
            r.tcp_route(r.share("a"), r.share("")),
        ]
        async with t.running(resources) as plane:
            port = r.bound_at(plane, r.TCP_PORT, TCP)
            answers = [await exchange(port) for _ in range(4)]
            text = metrics(plane)
    assert sorted(answers) == [b"", b"", b"a:helloa:bye", b"a:helloa:bye"]
    assert 'coxswain_proxy_stream_refused_total{route="TCPRoute/default/tcp"} 2.0' in text
    assert 'coxswain_proxy_stream_connections_total{route="TCPRoute/default/tcp"} 4.0' in text


async def test_a_member_that_cannot_be_dialled_is_not_replaced_by_a_sibling() -> None:
    async with r.echo("b") as b:
        resources: list[Resource] = [
            LISTENER,
            r.endpoint_set("a", free_port()),  # nothing listens there
            r.endpoint_set("b", b.port),
            r.tcp_route(r.share("a"), r.share("b")),
        ]
        async with t.running(resources) as plane:
            port = r.bound_at(plane, r.TCP_PORT, TCP)
            answers = [await exchange(port) for _ in range(4)]
    assert sorted(answers) == [b"", b"", b"b:hellob:bye", b"b:hellob:bye"]
    assert b.accepted == 2


async def test_a_backend_that_never_answers_is_refused_at_the_connect_timeout_and_not_before() -> (
    None
):
    with r.unanswered() as silent:
        resources: list[Resource] = [
            LISTENER,
            r.endpoint_set("a", silent),
            r.tcp_route(r.share("a")),
        ]
        async with t.running(resources) as plane:
            assert plane.rt is not None
            reader, writer = await asyncio.open_connection(
                "127.0.0.1", r.bound_at(plane, r.TCP_PORT, TCP)
            )
            writer.write(b"hello")
            for _ in range(1000):  # loop turns, not time: until the proxy has accepted it
                if plane.rt.connections:
                    break
                await asyncio.sleep(0)
            (relay,) = plane.rt.connections
            assert isinstance(relay, StreamRelay) and relay.dialling is not None
            plane.sweep(relay.dialled_at + DEFAULT_LIMITS.connect_timeout - 1)
            assert not relay.dialling.done() and relay in plane.rt.connections
            plane.sweep(relay.dialled_at + DEFAULT_LIMITS.connect_timeout)
            assert await r.read_until_closed(reader) == b""
            writer.close()
            assert not plane.rt.connections
            assert plane.rt.stats.streams["TCPRoute/default/tcp"][stats.STREAM_REFUSED] == 1


async def test_a_port_with_no_route_is_bound_and_closes_what_arrives() -> None:
    async with t.running([LISTENER]) as plane:
        assert await exchange(r.bound_at(plane, r.TCP_PORT, TCP)) == b""


async def test_an_open_relay_outlives_the_removal_of_its_route() -> None:
    async with r.echo("a") as a:
        resources: list[Resource] = [
            LISTENER,
            r.endpoint_set("a", a.port),
            r.tcp_route(r.share("a")),
        ]
        async with t.running(resources) as plane:
            port = r.bound_at(plane, r.TCP_PORT, TCP)
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(b"one")
            assert await reader.readexactly(5) == b"a:one"
            await plane.apply([LISTENER, r.endpoint_set("a", a.port)])
            assert r.bound_at(plane, r.TCP_PORT, TCP) == port  # the port is not rebound
            writer.write(b"two")
            assert await reader.readexactly(5) == b"a:two"
            assert await exchange(port) == b""  # a new connection: no route now
            writer.close()


async def test_an_idle_relay_is_closed_at_its_timeout_and_not_before() -> None:
    async with r.echo("a") as a:
        resources: list[Resource] = [
            LISTENER,
            r.endpoint_set("a", a.port),
            r.tcp_route(r.share("a")),
        ]
        async with t.running(resources) as plane:
            reader, writer = await asyncio.open_connection(
                "127.0.0.1", r.bound_at(plane, r.TCP_PORT, TCP)
            )
            writer.write(b"one")
            assert await reader.readexactly(5) == b"a:one"
            assert plane.rt is not None
            now = float(math.ceil(plane.rt.loop.time()))  # a whole second: exact sums
            plane.sweep(now)  # saw it active: idleness counts from here
            plane.sweep(now + DEFAULT_LIMITS.idle_timeout - 1)
            writer.write(b"two")
            assert await reader.readexactly(5) == b"a:two"
            plane.sweep(now + DEFAULT_LIMITS.idle_timeout)  # active again: the clock restarts
            plane.sweep(now + 2 * DEFAULT_LIMITS.idle_timeout)
            assert await r.read_until_closed(reader) == b""
            writer.close()


async def test_binds_report_each_listeners_protocol() -> None:
    both = r.stream_listeners(
        (r.TCP_PORT, TCP), (r.TLS_PORT, ListenerProtocol.TLS), (r.TCP_PORT, ListenerProtocol.UDP)
    )
    async with t.running([both]) as plane:
        reported = {(b.port, b.protocol) for b in plane.bound()}
    assert reported == {
        (r.TCP_PORT, TCP),
        (r.TLS_PORT, ListenerProtocol.TLS),
        (r.TCP_PORT, ListenerProtocol.UDP),
    }
