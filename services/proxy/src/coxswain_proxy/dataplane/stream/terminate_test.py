"""TLS termination on TLS listeners through a real data plane (TLSRoute, listener mode Terminate).

Covers: a client verifying the listener's certificate (made here with coxswain_devkit.pki) while
a plaintext echo backend answers what it sent, with no ALPN negotiated though the client offers
h2; the certificate chosen by the offered name among the port's (exact before wildcard, the
store's default for a name none carries); a Passthrough name and a Terminate name on one port,
each served its own way (the passed-through client sees the backend's own certificate); a name
to terminate on a port with no certificate, a client that refuses the certificate, and a
handshake left unfinished (closed at `hello_timeout` from the accept and not before, on a
fast-forwarded sweep clock) each refused under the route, the backend never dialled; megabytes
both ways through the termination; a backend's close reaching the client as the TLS close;
half-close both ways (a client's close_notify passed on as the backend's EOF while the answer
still comes back, and a backend's EOF passed on as the proxy's close_notify while the client
writes on), with a client of memory BIOs since asyncio's TLS cannot half-close; an
open terminated connection outliving a snapshot that rotates the certificate and removes the
route, while a new connection gets the new certificate. Leaves out the ClientHello reader
(clienthello_test) and passthrough alone (passthrough_test).
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import ssl
import tempfile
from collections.abc import AsyncIterator

import pytest

from coxswain_devkit.pki import CertificateAuthority
from coxswain_proxy.dataplane import stats
from coxswain_proxy.dataplane import testing as t
from coxswain_proxy.dataplane.core import Dataplane
from coxswain_proxy.dataplane.stream import rigs as r
from coxswain_proxy.dataplane.stream.relay_limits import DEFAULT_LIMITS
from coxswain_proxy.dataplane.stream.tls_relay import TlsRelay
from coxswain_routing import ListenerProtocol, Resource, TlsCertificate, TlsMode, TlsStore

TLS = ListenerProtocol.TLS
LISTENER = r.stream_listeners((r.TLS_PORT, TLS), tls_mode=TlsMode.TERMINATE)
CA = CertificateAuthority.create()
ROUTE = "TLSRoute/default/tls-a"


def certificate(*names: str) -> TlsCertificate:
    issued = CA.issue(dns=list(names))
    return TlsCertificate(tuple(sorted(names)), issued.chain_pem, issued.key_pem, names[0])


def store(*certificates: TlsCertificate) -> TlsStore:
    return TlsStore(r.TLS_PORT, certificates, certificates[0].source)


def route(*matches: tuple[str, str, bool]) -> r.StreamRoute:
    """(server name, backend, terminate) per match."""
    return r.stream_route(
        r.TLS_PORT,
        TLS,
        *(
            r.match(f"tls-{b}", r.share(b), server_name=n, kind="TLSRoute", terminate=end)
            for n, b, end in matches
        ),
    )


def terminating(backend_port: int) -> list[Resource]:
    """Every name on the port terminated with a tls.example.com certificate, relayed to
    `backend_port`."""
    return [
        LISTENER,
        r.endpoint_set("a", backend_port),
        route(("", "a", True)),
        store(certificate("tls.example.com")),
    ]


def client_context(ca: CertificateAuthority = CA) -> ssl.SSLContext:
    context = ssl.create_default_context(cadata=ca.certificate_pem.decode())
    context.set_alpn_protocols(["h2", "http/1.1"])
    return context


@contextlib.asynccontextmanager
async def connect(
    plane: Dataplane, server_name: str, context: ssl.SSLContext | None = None
) -> AsyncIterator[tuple[asyncio.StreamReader, asyncio.StreamWriter]]:
    reader, writer = await asyncio.open_connection(
        "127.0.0.1",
        r.bound_at(plane, r.TLS_PORT, TLS),
        ssl=context or client_context(),
        server_hostname=server_name,
    )
    try:
        yield reader, writer
    finally:
        writer.close()


def peer_names(writer: asyncio.StreamWriter) -> list[str]:
    peer = writer.get_extra_info("peercert")
    return sorted(value for kind, value in peer["subjectAltName"] if kind == "DNS")


async def ask(writer: asyncio.StreamWriter, reader: asyncio.StreamReader, data: bytes) -> bytes:
    writer.write(data)
    async with asyncio.timeout(10):
        return await reader.readexactly(len(data) + 2)


async def accepted(plane: Dataplane) -> TlsRelay:
    assert plane.rt is not None
    for _ in range(1000):  # loop turns, not time: until the proxy has accepted it
        if plane.rt.connections:
            break
        await asyncio.sleep(0)
    (relay,) = plane.rt.connections
    assert isinstance(relay, TlsRelay)
    return relay


async def test_the_client_verifies_the_listeners_certificate_and_the_backend_reads_plaintext() -> (
    None
):
    async with r.echo("a") as a:
        resources = terminating(a.port)
        async with t.running(resources) as plane:
            async with connect(plane, "tls.example.com") as (reader, writer):
                assert await ask(writer, reader, b"hi") == b"a:hi"
                assert peer_names(writer) == ["tls.example.com"]
                assert writer.get_extra_info("ssl_object").selected_alpn_protocol() is None
            assert plane.rt is not None
            assert plane.rt.stats.streams[ROUTE][stats.STREAM_RECEIVED] == 2  # plaintext only


async def test_the_certificate_is_chosen_by_the_offered_name_among_the_ports() -> None:
    async with r.echo("a") as a:
        resources: list[Resource] = [
            LISTENER,
            r.endpoint_set("a", a.port),
            route(("", "a", True)),
            store(certificate("tls.example.com"), certificate("*.example.com")),
        ]
        async with t.running(resources) as plane:
            async with connect(plane, "tls.example.com") as (_, writer):
                assert peer_names(writer) == ["tls.example.com"]  # exact before the wildcard
            async with connect(plane, "x.example.com") as (reader, writer):
                assert peer_names(writer) == ["*.example.com"]
                assert await ask(writer, reader, b"hi") == b"a:hi"
            # A name no certificate carries gets the store's default, which fails its check.
            with pytest.raises(ssl.SSLCertVerificationError):
                async with connect(plane, "other.org"):
                    pass


async def test_a_passthrough_name_and_a_terminate_name_share_one_port() -> None:
    backend_cert = CA.issue(dns=["abc.example.com"])
    backend_context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    with tempfile.NamedTemporaryFile() as chain, tempfile.NamedTemporaryFile() as key:
        chain.write(backend_cert.chain_pem)
        key.write(backend_cert.key_pem)
        chain.flush()
        key.flush()
        backend_context.load_cert_chain(chain.name, key.name)
    async with r.echo("p", backend_context) as p, r.echo("t") as plain:
        resources: list[Resource] = [
            LISTENER,
            r.endpoint_set("p", p.port),
            r.endpoint_set("t", plain.port),
            route(("abc.example.com", "p", False), ("tls.example.com", "t", True)),
            store(certificate("tls.example.com")),
        ]
        async with t.running(resources) as plane:
            async with connect(plane, "abc.example.com") as (reader, writer):
                assert await ask(writer, reader, b"hi") == b"p:hi"
                served = writer.get_extra_info("ssl_object").getpeercert(binary_form=True)
                assert served == _der(backend_cert.certificate_pem)  # the backend's own
            async with connect(plane, "tls.example.com") as (reader, writer):
                assert await ask(writer, reader, b"hi") == b"t:hi"
                assert peer_names(writer) == ["tls.example.com"]


async def test_a_name_to_terminate_on_a_port_with_no_certificate_is_refused() -> None:
    async with r.echo("a") as a:
        resources: list[Resource] = [LISTENER, r.endpoint_set("a", a.port), route(("", "a", True))]
        async with t.running(resources) as plane:
            with pytest.raises((ConnectionError, ssl.SSLError)):
                async with connect(plane, "tls.example.com"):
                    pass
            assert plane.rt is not None
            assert plane.rt.stats.streams[ROUTE][stats.STREAM_REFUSED] == 1
            assert a.accepted == 0


async def test_a_client_that_refuses_the_certificate_never_reaches_the_backend() -> None:
    async with r.echo("a") as a:
        resources = terminating(a.port)
        async with t.running(resources) as plane:
            stranger = client_context(CertificateAuthority.create("another CA"))
            with pytest.raises(ssl.SSLCertVerificationError):
                async with connect(plane, "tls.example.com", stranger):
                    pass
            assert plane.rt is not None
            for _ in range(1000):  # loop turns: until the proxy has seen the client's alert
                if not plane.rt.connections:
                    break
                await asyncio.sleep(0)
            assert plane.rt.stats.streams[ROUTE][stats.STREAM_REFUSED] == 1
            assert a.accepted == 0


async def test_an_unfinished_handshake_is_closed_at_the_hello_timeout_and_not_before() -> None:
    async with r.echo("a") as a:
        resources = terminating(a.port)
        async with t.running(resources) as plane:
            reader, writer = await asyncio.open_connection(
                "127.0.0.1", r.bound_at(plane, r.TLS_PORT, TLS)
            )
            incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
            tls = client_context().wrap_bio(incoming, outgoing, server_hostname="tls.example.com")
            with contextlib.suppress(ssl.SSLWantReadError):
                tls.do_handshake()
            writer.write(outgoing.read())  # the ClientHello, and then nothing more
            async with asyncio.timeout(10):
                assert await reader.read(65536)  # the proxy answers: it is handshaking
            relay = await accepted(plane)
            assert relay.handshaking is not None
            # Whole seconds either side of the bound: in floats, (at + T) - at can fall an ulp
            # short of T.
            plane.sweep(math.floor(relay.accepted_at) + DEFAULT_LIMITS.hello_timeout - 1)
            assert relay.handshaking is not None and not relay.closed
            plane.sweep(math.ceil(relay.accepted_at) + DEFAULT_LIMITS.hello_timeout)
            assert await r.read_until_closed(reader) == b""
            writer.close()
            assert plane.rt is not None
            assert plane.rt.stats.streams[ROUTE][stats.STREAM_REFUSED] == 1
            assert a.accepted == 0


async def test_megabytes_both_ways_arrive_whole_through_the_termination() -> None:
    payload = bytes(range(256)) * (4 * 4096)  # 4 MiB
    async with r.echo("") as a:
        resources = terminating(a.port)
        async with t.running(resources) as plane:
            async with connect(plane, "tls.example.com") as (reader, writer):
                writer.write(payload)  # more than any buffer: the relay pauses and resumes
                sending = asyncio.ensure_future(writer.drain())
                received = bytearray()
                async with asyncio.timeout(30):
                    while len(received) < len(payload):
                        received += await reader.read(4096)  # a slow reader
                await sending
            assert received == payload


async def test_the_backends_close_reaches_the_client_as_the_tls_close() -> None:
    async def greet(_: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(b"bye")
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(greet, "127.0.0.1", 0)
    try:
        resources = terminating(server.sockets[0].getsockname()[1])
        async with t.running(resources) as plane, connect(plane, "tls.example.com") as (reader, _):
            async with asyncio.timeout(10):
                assert await reader.read() == b"bye"  # then EOF: the TLS close
    finally:
        server.close()


class HalfClosingClient:
    """A TLS client over memory BIOs on a plain connection: it can send its close_notify and read
    on, and write on after the server's, which asyncio's own TLS transport cannot."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer
        self.incoming, self.outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
        self.tls = client_context().wrap_bio(
            self.incoming, self.outgoing, server_hostname="tls.example.com"
        )

    async def _records(self) -> None:
        data = await self.reader.read(65536)
        if data:
            self.incoming.write(data)
        else:
            self.incoming.write_eof()

    async def _flush(self) -> None:
        self.writer.write(self.outgoing.read())
        await self.writer.drain()

    async def handshake(self) -> None:
        while True:
            try:
                self.tls.do_handshake()
                break
            except ssl.SSLWantReadError:
                await self._flush()
                await self._records()
        await self._flush()

    async def send(self, data: bytes) -> None:
        self.tls.write(data)
        await self._flush()

    async def close_write(self) -> None:
        with contextlib.suppress(ssl.SSLWantReadError):
            self.tls.unwrap()  # the close_notify: this direction has ended, the other has not
        await self._flush()

    async def read_to_close(self) -> bytes:
        """Everything until the server's close_notify (an EOF without one fails the read)."""
        received = bytearray()
        while True:
            try:
                chunk = self.tls.read(65536)
            except ssl.SSLWantReadError:
                await self._records()
                continue
            except ssl.SSLZeroReturnError:
                return bytes(received)
            if not chunk:
                return bytes(received)
            received += chunk


@contextlib.asynccontextmanager
async def half_closing(plane: Dataplane) -> AsyncIterator[HalfClosingClient]:
    reader, writer = await asyncio.open_connection("127.0.0.1", r.bound_at(plane, r.TLS_PORT, TLS))
    try:
        client = HalfClosingClient(reader, writer)
        async with asyncio.timeout(10):
            await client.handshake()
        yield client
    finally:
        writer.close()


@pytest.mark.parametrize("end", ["close_notify", "fin"])
async def test_a_client_that_ends_its_direction_still_gets_the_answer(end: str) -> None:
    async with r.echo("a") as a:
        resources = terminating(a.port)
        async with t.running(resources) as plane, half_closing(plane) as client:
            await client.send(b"hello")
            if end == "fin":  # a bare TCP FIN, no close_notify: still the end of what it sends
                client.writer.write_eof()
            else:
                await client.close_write()
            # Either is passed on as the backend's EOF: it says bye, then ends.
            async with asyncio.timeout(10):
                assert await client.read_to_close() == b"a:helloa:bye"


async def test_the_client_writes_on_after_the_backends_end_reaches_it() -> None:
    heard: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()

    async def early_goodbye(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(b"bye")
        writer.write_eof()  # this direction ends; the backend still listens
        heard.set_result(await reader.read())  # all the client sent, up to its end
        writer.close()

    server = await asyncio.start_server(early_goodbye, "127.0.0.1", 0)
    try:
        resources = terminating(server.sockets[0].getsockname()[1])
        async with t.running(resources) as plane, half_closing(plane) as client:
            async with asyncio.timeout(10):
                assert await client.read_to_close() == b"bye"  # then the proxy's close_notify
                await client.send(b"still here")
                await client.close_write()
                assert await heard == b"still here"
    finally:
        server.close()


async def test_an_open_connection_outlives_a_rotation_and_the_removal_of_its_route() -> None:
    async with r.echo("a") as a:
        kept: list[Resource] = [LISTENER, r.endpoint_set("a", a.port)]
        old, new = certificate("tls.example.com"), certificate("tls.example.com")
        before = [*kept, route(("", "a", True)), store(old)]
        async with (
            t.running(before) as plane,
            connect(plane, "tls.example.com") as (reader, writer),
        ):
            assert await ask(writer, reader, b"hi") == b"a:hi"
            await plane.apply([*kept, route(("", "a", True)), store(new)])
            async with connect(plane, "tls.example.com") as (_, fresh):
                served = fresh.get_extra_info("ssl_object").getpeercert(binary_form=True)
                assert served == _der(new.certificate_chain_pem)
            await plane.apply(kept)
            assert await ask(writer, reader, b"on") == b"a:on"


def _der(pem: bytes) -> bytes:
    """The DER of the first certificate of a PEM chain."""
    end = b"-----END CERTIFICATE-----"
    return ssl.PEM_cert_to_DER_cert((pem.split(end, 1)[0] + end).decode())
