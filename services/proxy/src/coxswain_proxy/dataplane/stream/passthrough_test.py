"""TLS passthrough through a real data plane: the client's TLS session is the backend's own.

Covers: a client verifying a TLS echo backend's certificate (coxswain_devkit.pki) end to end
through the proxy, which holds no key; the route chosen by server name, exact before the nearest
wildcard before the route for every name; a name no route serves, bytes that are no ClientHello
and a client that sends nothing (closed at `hello_timeout` and not before, on a fast-forwarded
sweep clock) are closed; a ClientHello sent byte by byte over TCP is still routed and replayed
whole, so the handshake completes. Leaves out the reader's parsing rules (clienthello_test).
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
import tempfile

from coxswain_devkit.pki import CertificateAuthority
from coxswain_proxy.dataplane import testing as t
from coxswain_proxy.dataplane.stream import rigs as r
from coxswain_proxy.dataplane.stream.relay_limits import DEFAULT_LIMITS
from coxswain_routing import ListenerProtocol, Resource

TLS = ListenerProtocol.TLS
LISTENER = r.stream_listeners((r.TLS_PORT, TLS))
CA = CertificateAuthority.create()
NAMES = ("shop.example.com", "deep.x.example.com", "other.org")


def server_context() -> ssl.SSLContext:
    issued = CA.issue(dns=list(NAMES))
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    with tempfile.NamedTemporaryFile() as chain, tempfile.NamedTemporaryFile() as key:
        chain.write(issued.chain_pem)
        key.write(issued.key_pem)
        chain.flush()
        key.flush()
        context.load_cert_chain(chain.name, key.name)
    return context


def client_context() -> ssl.SSLContext:
    return ssl.create_default_context(cadata=CA.certificate_pem.decode())


def routes(*matches: tuple[str, str]) -> r.StreamRoute:
    return r.stream_route(
        r.TLS_PORT,
        TLS,
        *(
            r.match(f"tls-{b}", r.share(b), server_name=name, kind="TLSRoute")
            for name, b in matches
        ),
    )


async def ask(port: int, server_name: str) -> bytes:
    """A verified TLS exchange through the proxy: the answer, or b"" when it was closed."""
    try:
        reader, writer = await asyncio.open_connection(
            "127.0.0.1", port, ssl=client_context(), server_hostname=server_name
        )
    except (ConnectionError, ssl.SSLError):
        return b""
    writer.write(b"hi")
    try:
        async with asyncio.timeout(10):
            return await reader.readexactly(4)
    finally:
        writer.close()


async def test_the_client_verifies_the_backends_certificate_through_the_proxy() -> None:
    async with r.echo("a", server_context()) as a:
        resources: list[Resource] = [LISTENER, r.endpoint_set("a", a.port), routes(("", "a"))]
        async with t.running(resources) as plane:
            assert await ask(r.bound_at(plane, r.TLS_PORT, TLS), "shop.example.com") == b"a:hi"


async def test_exact_names_before_the_nearest_wildcard_before_every_name() -> None:
    context = server_context()
    async with r.echo("a", context) as a, r.echo("b", context) as b, r.echo("c", context) as c:
        resources: list[Resource] = [
            LISTENER,
            r.endpoint_set("a", a.port),
            r.endpoint_set("b", b.port),
            r.endpoint_set("c", c.port),
            routes(("shop.example.com", "a"), ("*.example.com", "b"), ("", "c")),
        ]
        async with t.running(resources) as plane:
            port = r.bound_at(plane, r.TLS_PORT, TLS)
            assert await ask(port, "shop.example.com") == b"a:hi"
            assert await ask(port, "deep.x.example.com") == b"b:hi"  # a wildcard: any labels
            assert await ask(port, "other.org") == b"c:hi"


async def test_a_name_no_route_serves_is_closed() -> None:
    async with r.echo("a", server_context()) as a:
        resources: list[Resource] = [
            LISTENER,
            r.endpoint_set("a", a.port),
            routes(("shop.example.com", "a")),
        ]
        async with t.running(resources) as plane:
            port = r.bound_at(plane, r.TLS_PORT, TLS)
            assert await ask(port, "other.org") == b""
            assert a.accepted == 0


async def test_what_is_no_client_hello_is_closed() -> None:
    async with r.echo("a", server_context()) as a:
        resources: list[Resource] = [LISTENER, r.endpoint_set("a", a.port), routes(("", "a"))]
        async with t.running(resources) as plane:
            reader, writer = await asyncio.open_connection(
                "127.0.0.1", r.bound_at(plane, r.TLS_PORT, TLS)
            )
            writer.write(b"GET / HTTP/1.1\r\nHost: shop.example.com\r\n\r\n")
            assert await r.read_until_closed(reader) == b""
            writer.close()
            assert a.accepted == 0


async def test_a_silent_client_is_closed_at_the_hello_timeout_and_not_before() -> None:
    async with t.running([LISTENER, routes()]) as plane:
        assert plane.rt is not None
        reader, writer = await asyncio.open_connection(
            "127.0.0.1", r.bound_at(plane, r.TLS_PORT, TLS)
        )
        writer.write(b"\x16\x03\x01")  # the start of a record, and then nothing
        await writer.drain()
        for _ in range(1000):  # loop turns, not time: until the proxy has accepted it
            if plane.rt.connections:
                break
            await asyncio.sleep(0)
        now = plane.rt.loop.time()
        plane.sweep(now + DEFAULT_LIMITS.hello_timeout - 1)
        assert len(plane.rt.connections) == 1
        plane.sweep(now + DEFAULT_LIMITS.hello_timeout)
        assert await r.read_until_closed(reader) == b""
        writer.close()
        assert plane.rt.stats.streams["none"][4] == 1


async def test_a_client_hello_sent_byte_by_byte_is_routed_and_replayed_whole() -> None:
    async with r.echo("a", server_context()) as a:
        resources: list[Resource] = [
            LISTENER,
            r.endpoint_set("a", a.port),
            routes(("shop.example.com", "a")),
        ]
        async with t.running(resources) as plane:
            reader, writer = await asyncio.open_connection(
                "127.0.0.1", r.bound_at(plane, r.TLS_PORT, TLS)
            )
            incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
            tls = client_context().wrap_bio(incoming, outgoing, server_hostname="shop.example.com")
            with contextlib.suppress(ssl.SSLWantReadError):
                tls.do_handshake()
            for byte in outgoing.read():
                writer.write(bytes([byte]))
                await writer.drain()
            async with asyncio.timeout(10):
                while True:
                    incoming.write(await reader.read(65536))
                    try:
                        tls.do_handshake()
                        break
                    except ssl.SSLWantReadError:
                        writer.write(outgoing.read())
                writer.write(outgoing.read())
                tls.write(b"hi")
                writer.write(outgoing.read())
                answer = b""
                while len(answer) < 4:
                    incoming.write(await reader.read(65536))
                    with contextlib.suppress(ssl.SSLWantReadError):
                        answer += tls.read(4)
            writer.close()
            assert answer == b"a:hi"
