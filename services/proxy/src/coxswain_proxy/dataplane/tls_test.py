"""TLS termination end to end: SNI picks the certificate (exact, wildcard, default), ALPN says
http/1.1, a Host outside the SNI-selected listener's hostname gets 421, a returning client
resumes its session (a TLS 1.2 and a TLS 1.3 ticket), a snapshot swap rotates a certificate
without rebinding, and a delta leaving the store alone keeps its loaded contexts. Certificates
are minted in the test.
"""

from __future__ import annotations

import asyncio
import socket
import ssl

import pytest

from coxswain_devkit.echo import EchoServer
from coxswain_devkit.pki import CertificateAuthority
from coxswain_proxy.dataplane import testing as t
from coxswain_routing import ListenerProtocol, TlsCertificate, TlsStore

CA = CertificateAuthority.create()


def cert(*names: str, source: str) -> TlsCertificate:
    issued = CA.issue(dns=list(names))
    return TlsCertificate(tuple(sorted(names)), issued.chain_pem, issued.key_pem, source)


def client_context() -> ssl.SSLContext:
    context = ssl.create_default_context(cadata=CA.certificate_pem.decode())
    context.set_alpn_protocols(["http/1.1"])
    return context


def resources(echo_port: int, store: TlsStore) -> list[t.Resource]:
    return [
        t.listeners(
            (t.TLS_PORT, ListenerProtocol.HTTPS, "shop.example.com"),
            (t.TLS_PORT, ListenerProtocol.HTTPS, "*.example.com"),
        ),
        t.endpoints("echo", echo_port),
        t.routes("shop.example.com", t.rule("shop", t.backend("echo")), port=t.TLS_PORT),
        t.routes("*.example.com", t.rule("any", t.backend("echo")), port=t.TLS_PORT),
        store,
    ]


STORE = TlsStore(
    t.TLS_PORT,
    (cert("shop.example.com", source="ns/shop"), cert("*.example.com", source="ns/wild")),
    default_source="ns/wild",
)


@pytest.mark.parametrize(
    ("sni", "host", "status"),
    [
        pytest.param("shop.example.com", "shop.example.com", 200, id="exact-certificate"),
        pytest.param("blog.example.com", "blog.example.com", 200, id="wildcard-certificate"),
        pytest.param(
            "shop.example.com", "blog.example.com", 421, id="host-outside-sni-listener-421"
        ),
    ],
)
async def test_sni_selects_the_certificate(sni: str, host: str, status: int) -> None:
    async with EchoServer() as echo, t.running(resources(echo.port, STORE)) as plane:
        port = t.actual(plane, t.TLS_PORT)
        async with t.client(port, client_context(), sni) as c:
            peer = c.writer.get_extra_info("ssl_object")
            assert peer.selected_alpn_protocol() == "http/1.1"
            names = [v for k, v in peer.getpeercert()["subjectAltName"]]
            assert names == [
                sni if status == 200 and sni.startswith("shop") else "*.example.com"
            ] or names == [sni]
            assert (await c.request("/", host)).status == status


def _fetch(
    port: int, context: ssl.SSLContext, session: ssl.SSLSession | None
) -> tuple[ssl.SSLSession | None, bool, str | None]:
    """One request on a new connection, offering `session`: the session it ended with (holding
    the ticket the proxy sent), whether it was resumed, and the TLS version."""
    raw = socket.create_connection(("127.0.0.1", port))
    with context.wrap_socket(raw, server_hostname="shop.example.com", session=session) as s:
        s.sendall(b"GET / HTTP/1.1\r\nHost: shop.example.com\r\nConnection: close\r\n\r\n")
        head = s.recv(12)
        while s.recv(65536):  # to the close: a TLS 1.3 ticket comes after the handshake
            pass
        assert head == b"HTTP/1.1 200"
        return s.session, bool(s.session_reused), s.version()


@pytest.mark.parametrize("version", [ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_3])
async def test_a_returning_client_resumes_its_session(version: ssl.TLSVersion) -> None:
    async with EchoServer() as echo, t.running(resources(echo.port, STORE)) as plane:
        port = t.actual(plane, t.TLS_PORT)
        context = client_context()
        context.maximum_version = version
        session, reused, first = await asyncio.to_thread(_fetch, port, context, None)
        assert not reused and session is not None
        assert session.has_ticket  # stateless resumption: a ticket, not a server-side cache
        _, reused, again = await asyncio.to_thread(_fetch, port, context, session)
        assert reused and again == first


async def test_a_swap_rotates_the_certificate_without_rebinding() -> None:
    async with EchoServer() as echo, t.running(resources(echo.port, STORE)) as plane:
        port = t.actual(plane, t.TLS_PORT)
        rotated = cert("shop.example.com", source="ns/shop")
        await plane.apply(resources(echo.port, TlsStore(t.TLS_PORT, (rotated,))))
        assert t.actual(plane, t.TLS_PORT) == port
        async with t.client(port, client_context(), "shop.example.com") as c:
            served = c.writer.get_extra_info("ssl_object").getpeercert(binary_form=True)
            assert served == ssl.PEM_cert_to_DER_cert(
                rotated.certificate_chain_pem.decode().split("-----END CERTIFICATE-----")[0]
                + "-----END CERTIFICATE-----\n"
            )
            assert (await c.request("/", "shop.example.com")).status == 200


async def test_a_delta_leaving_the_store_alone_keeps_its_contexts() -> None:
    async with EchoServer() as echo:
        listed = resources(echo.port, STORE)
        async with t.running(listed) as plane:
            assert plane.rt is not None and plane.rt.tables is not None
            store = plane.rt.tables.tls[t.TLS_PORT]
            edited = t.routes(
                "shop.example.com", t.rule("shop2", t.backend("echo")), port=t.TLS_PORT
            )
            await plane.apply([*listed[:2], edited, *listed[3:]])
            assert plane.rt.tables.tls[t.TLS_PORT] is store
            async with t.client(
                t.actual(plane, t.TLS_PORT), client_context(), "shop.example.com"
            ) as c:
                peer = c.writer.get_extra_info("ssl_object").getpeercert()
                assert [v for _, v in peer["subjectAltName"]] == ["shop.example.com"]
                assert (await c.request("/", "shop.example.com")).status == 200
