"""Stream ports under `--workers 2`: every worker binds each TCP, TLS-passthrough and UDP port
with SO_REUSEPORT (UDP in its own port space, beside TCP on the same number), so `apply`
reports them bound; each worker then relays what the kernel hands it, a UDP client's replies
come back from the port it sent to, and a later snapshot without the ports unbinds them in
every worker. Leaves out how the kernel spreads load beyond "each worker got some"."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import ssl
import tempfile

import pytest

from coxswain_devkit.pki import CertificateAuthority
from coxswain_proxy.dataplane.core import Options
from coxswain_proxy.dataplane.stream import rigs as r
from coxswain_proxy.dataplane.workers import STATS, Workers
from coxswain_routing import ListenerProtocol, Resource

TCP, TLS, UDP = ListenerProtocol.TCP, ListenerProtocol.TLS, ListenerProtocol.UDP
CA = CertificateAuthority.create()
CLIENTS = 24  # enough that two workers both see some (each new source port is rehashed)


def free_port() -> int:
    """A port free for TCP and UDP alike: the test binds both protocols on one of them."""
    while True:
        with socket.socket() as tcp, socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as udp:
            tcp.bind(("127.0.0.1", 0))
            port: int = tcp.getsockname()[1]
            try:
                udp.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port


def server_context() -> ssl.SSLContext:
    issued = CA.issue(dns=["shop.example.com"])
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    with tempfile.NamedTemporaryFile() as chain, tempfile.NamedTemporaryFile() as key:
        chain.write(issued.chain_pem)
        key.write(issued.key_pem)
        chain.flush()
        key.flush()
        context.load_cert_chain(chain.name, key.name)
    return context


async def tcp_ask(port: int, tls: bool = False) -> bytes:
    context = ssl.create_default_context(cadata=CA.certificate_pem.decode()) if tls else None
    host = "shop.example.com" if tls else None
    reader, writer = await asyncio.open_connection(
        "127.0.0.1", port, ssl=context, server_hostname=host
    )
    try:
        writer.write(b"hi")
        async with asyncio.timeout(10):
            return await reader.readexactly(4)
    finally:
        writer.close()


async def test_two_workers_bind_and_relay_tcp_tls_and_udp_on_the_same_ports() -> None:
    tcp_port, tls_port = free_port(), free_port()
    udp_port = tcp_port  # UDP has its own port space: both are bound, and by both workers
    async with (
        r.echo("t") as tcp_echo,
        r.echo("s", server_context()) as tls_echo,
        r.udp_echo("u") as (_, udp_echo),
    ):
        resources: list[Resource] = [
            r.stream_listeners((tcp_port, TCP), (tls_port, TLS), (udp_port, UDP)),
            r.endpoint_set("t", tcp_echo.port),
            r.endpoint_set("s", tls_echo.port),
            r.endpoint_set("u", udp_echo, udp=True),
            r.stream_route(tcp_port, TCP, r.match("tcp", r.share("t"))),
            r.stream_route(
                tls_port, TLS, r.match("tls", r.share("s"), server_name="", kind="TLSRoute")
            ),
            r.stream_route(udp_port, UDP, r.match("udp", r.share("u", udp=True), kind="UDPRoute")),
        ]
        options = Options(shared=False, address="127.0.0.1", reuse_port=True)
        workers = await Workers(options).start(2)
        try:
            bound = await workers.apply(resources, "v1")
            # Reported only when every worker bound it (what gates Programmed).
            assert {(b.port, b.actual, b.protocol) for b in bound} == {
                (tcp_port, tcp_port, TCP),
                (tls_port, tls_port, TLS),
                (udp_port, udp_port, UDP),
            }
            assert [await tcp_ask(tcp_port) for _ in range(CLIENTS)] == [b"t:hi"] * CLIENTS
            tls = [await tcp_ask(tls_port, tls=True) for _ in range(CLIENTS)]
            assert tls == [b"s:hi"] * CLIENTS
            # All open at once: a session is per client address, and a closed client's port may
            # be handed to the next one (two clients, one session: one count).
            async with contextlib.AsyncExitStack() as stack:
                for _ in range(CLIENTS):
                    client = await stack.enter_async_context(r.udp_client(udp_port))
                    assert await client.ask(b"hi") == b"u:hi"
            per_worker = [await w.call(STATS) for w in workers.workers]
            for route in ("TCPRoute/default/tcp", "TLSRoute/default/tls", "UDPRoute/default/udp"):
                accepted = [snap["streams"].get(route, [0])[0] for snap in per_worker]
                assert sum(accepted) == CLIENTS, (route, accepted)
                assert all(n > 0 for n in accepted), (route, accepted)  # both workers serve

            assert await workers.apply(resources[1:], "v2") == []
            for port in (tcp_port, tls_port):  # no worker listens there any more
                with pytest.raises(ConnectionRefusedError):
                    await tcp_ask(port)
            with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
                probe.bind(("127.0.0.1", udp_port))  # and no worker holds the UDP port
        finally:
            await workers.close(grace=1.0)
