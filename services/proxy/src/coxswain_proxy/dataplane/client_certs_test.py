"""Client certificates on HTTPS ports (a Gateway's spec.tls.frontend, the port's ClientCaStore):
real handshakes with certificates minted in the test.

Covers: AllowValidOnly admits a client whose certificate the port's bundle verifies and refuses,
in the handshake, one without a certificate or with one from another authority; each port
checks its own bundle; AllowInsecureFallback admits every client; a snapshot rotating the
bundle, or dropping validation, takes effect on the next handshake without rebinding; a bundle
the proxy cannot load refuses everyone; a delta leaving the port alone keeps its contexts.
Leaves out what the controller sends (the goldens) and HTTP/2 (the same handshake).
"""

from __future__ import annotations

import ssl

import pytest

from coxswain_devkit import pki
from coxswain_devkit.echo import EchoServer
from coxswain_devkit.pki import CertificateAuthority, Issued
from coxswain_proxy.dataplane import testing as t
from coxswain_routing import (
    ClientCaStore,
    ClientValidationMode,
    ListenerProtocol,
    TlsCertificate,
    TlsStore,
)

SERVER_CA = CertificateAuthority.create("server CA")
CLIENT_CA = CertificateAuthority.create("client CA")
OTHER_CA = CertificateAuthority.create("another client CA")
OTHER_PORT = 18444
HOST = "shop.example.com"


def store(port: int = t.TLS_PORT) -> TlsStore:
    issued = SERVER_CA.issue(dns=[HOST])
    return TlsStore(port, (TlsCertificate((HOST,), issued.chain_pem, issued.key_pem, "ns/shop"),))


def client_ca(
    bundle: bytes,
    port: int = t.TLS_PORT,
    mode: ClientValidationMode = ClientValidationMode.ALLOW_VALID_ONLY,
) -> ClientCaStore:
    return ClientCaStore(port, bundle, ("ConfigMap ns/client-ca",), mode)


def resources(echo_port: int, *extra: t.Resource) -> list[t.Resource]:
    return [
        t.listeners(
            (t.TLS_PORT, ListenerProtocol.HTTPS, HOST), (OTHER_PORT, ListenerProtocol.HTTPS, HOST)
        ),
        t.endpoints("echo", echo_port),
        t.routes(HOST, t.rule("shop", t.backend("echo")), port=t.TLS_PORT),
        t.routes(HOST, t.rule("other", t.backend("echo")), port=OTHER_PORT),
        store(),
        store(OTHER_PORT),
        *extra,
    ]


def client_context(certificate: Issued | None = None) -> ssl.SSLContext:
    return pki.client_context(SERVER_CA.certificate_pem, certificate)


async def answer(port: int, certificate: Issued | None) -> int | str:
    """The status of one request, or why the connection ended without one."""
    try:
        async with t.client(port, client_context(certificate), HOST) as c:
            return (await c.request("/", HOST)).status
    except ssl.SSLError as exc:
        return f"refused: {exc.reason}"
    except (ConnectionError, OSError) as exc:
        return f"refused: {exc!r}"


@pytest.mark.parametrize(
    ("issuer", "admitted"),
    [
        pytest.param(CLIENT_CA, True, id="certificate-the-bundle-verifies-admitted"),
        pytest.param(None, False, id="no-certificate-refused"),
        pytest.param(OTHER_CA, False, id="certificate-of-another-authority-refused"),
    ],
)
async def test_allow_valid_only(issuer: CertificateAuthority | None, admitted: bool) -> None:
    certificate = issuer.issue(dns=["client.example.com"]) if issuer else None
    ca = client_ca(CLIENT_CA.certificate_pem)
    async with EchoServer() as echo, t.running(resources(echo.port, ca)) as plane:
        result = await answer(t.actual(plane, t.TLS_PORT), certificate)
        if admitted:
            assert result == 200
        else:
            assert isinstance(result, str) and result.startswith("refused"), result


async def test_each_port_checks_its_own_bundle() -> None:
    cas = client_ca(CLIENT_CA.certificate_pem), client_ca(OTHER_CA.certificate_pem, OTHER_PORT)
    async with EchoServer() as echo, t.running(resources(echo.port, *cas)) as plane:
        mine = CLIENT_CA.issue(dns=["client.example.com"])
        theirs = OTHER_CA.issue(dns=["client.example.com"])
        assert await answer(t.actual(plane, t.TLS_PORT), mine) == 200
        assert await answer(t.actual(plane, OTHER_PORT), theirs) == 200
        assert str(await answer(t.actual(plane, t.TLS_PORT), theirs)).startswith("refused")
        assert str(await answer(t.actual(plane, OTHER_PORT), mine)).startswith("refused")


async def test_a_port_without_a_client_ca_store_asks_for_no_certificate() -> None:
    ca = client_ca(CLIENT_CA.certificate_pem)
    async with EchoServer() as echo, t.running(resources(echo.port, ca)) as plane:
        assert await answer(t.actual(plane, OTHER_PORT), None) == 200
        assert str(await answer(t.actual(plane, t.TLS_PORT), None)).startswith("refused")


@pytest.mark.parametrize(
    "issuer",
    [
        pytest.param(CLIENT_CA, id="valid-certificate"),
        pytest.param(OTHER_CA, id="certificate-failing-verification"),
        pytest.param(None, id="no-certificate"),
    ],
)
async def test_allow_insecure_fallback_admits_every_client(
    issuer: CertificateAuthority | None,
) -> None:
    certificate = issuer.issue(dns=["client.example.com"]) if issuer else None
    ca = client_ca(CLIENT_CA.certificate_pem, mode=ClientValidationMode.ALLOW_INSECURE_FALLBACK)
    async with EchoServer() as echo, t.running(resources(echo.port, ca)) as plane:
        assert await answer(t.actual(plane, t.TLS_PORT), certificate) == 200


async def test_rotating_the_bundle_takes_effect_without_rebinding() -> None:
    before = CLIENT_CA.issue(dns=["client.example.com"])
    after = OTHER_CA.issue(dns=["client.example.com"])
    ca = client_ca(CLIENT_CA.certificate_pem)
    async with EchoServer() as echo, t.running(resources(echo.port, ca)) as plane:
        port = t.actual(plane, t.TLS_PORT)
        assert await answer(port, before) == 200
        await plane.apply(resources(echo.port, client_ca(OTHER_CA.certificate_pem)))
        assert t.actual(plane, t.TLS_PORT) == port
        assert await answer(port, after) == 200
        assert str(await answer(port, before)).startswith("refused")
        # Validation withdrawn: the next handshake asks for no certificate.
        await plane.apply(resources(echo.port))
        assert t.actual(plane, t.TLS_PORT) == port
        assert await answer(port, None) == 200


async def test_a_bundle_the_proxy_cannot_load_refuses_every_client() -> None:
    ca = client_ca(b"-----BEGIN CERTIFICATE-----\nnot base64\n-----END CERTIFICATE-----\n")
    async with EchoServer() as echo, t.running(resources(echo.port, ca)) as plane:
        certificate = CLIENT_CA.issue(dns=["client.example.com"])
        assert str(await answer(t.actual(plane, t.TLS_PORT), certificate)).startswith("refused")
        assert await answer(t.actual(plane, OTHER_PORT), None) == 200


async def test_a_delta_reloads_a_port_only_when_its_certificates_or_bundle_change() -> None:
    ca = client_ca(CLIENT_CA.certificate_pem)
    async with EchoServer() as echo:
        listed = resources(echo.port, ca)
        async with t.running(listed) as plane:
            assert plane.rt is not None and plane.rt.tables is not None
            kept, front = plane.rt.tables.tls[t.TLS_PORT], plane.rt.tables.fronts[t.TLS_PORT]
            other = plane.rt.tables.tls[OTHER_PORT]
            rotated = [*listed[:-1], client_ca(OTHER_CA.certificate_pem)]
            await plane.apply(rotated)
            tables = plane.rt.tables
            assert tables.tls[OTHER_PORT] is other
            assert tables.tls[t.TLS_PORT] is not kept and tables.fronts[t.TLS_PORT] is not front
            rebuilt, front = tables.tls[t.TLS_PORT], tables.fronts[t.TLS_PORT]
            edited = t.routes(HOST, t.rule("shop2", t.backend("echo")), port=t.TLS_PORT)
            await plane.apply([*rotated[:2], edited, *rotated[3:]])
            assert plane.rt.tables.tls[t.TLS_PORT] is rebuilt
            assert plane.rt.tables.fronts[t.TLS_PORT] is front
