"""TLS to upstreams a BackendTLSPolicy governs, through the data plane to a TLS echo backend.

Covers: the request reaches a backend whose certificate chains to the policy's CA bundle and
carries the policy's hostname (sent as SNI); a backend whose certificate comes from another CA,
or names another host, is never sent the request; a delta keeps a TLS backend's picker unless
its endpoints change. Subject alternative names: with them the certificate must carry one of
them (DNS or URI) and the hostname is only the SNI. The Gateway's client certificate is presented
to a backend that asks for one, and a rotated one is what new connections present.
Certificates are minted in the test.
"""

from __future__ import annotations

import dataclasses
import ssl
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from coxswain_devkit.echo import EchoServer
from coxswain_devkit.pki import CertificateAuthority
from coxswain_proxy.dataplane.testing import (
    HTTP_LISTENER,
    actual,
    endpoints,
    get,
    routes,
    rule,
    running,
)
from coxswain_routing import Backend, Resource, TlsCertificate, UpstreamTLS


def _server_context(
    ca: CertificateAuthority,
    name: str,
    *,
    uris: tuple[str, ...] = (),
    clients: CertificateAuthority | None = None,
) -> ssl.SSLContext:
    """A backend's context; `clients`: the CA whose client certificates it requires."""
    issued = ca.issue(dns=[name], ips=["127.0.0.1"], uris=uris)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    if clients is not None:
        context.verify_mode = ssl.CERT_REQUIRED
        context.load_verify_locations(cadata=clients.certificate_pem.decode())
    with tempfile.TemporaryDirectory() as tmp:
        chain, key = Path(tmp, "chain.pem"), Path(tmp, "key.pem")
        chain.write_bytes(issued.chain_pem)
        key.write_bytes(issued.key_pem)
        context.load_cert_chain(chain, key)
    return context


@pytest.fixture
async def secure_echo() -> AsyncIterator[tuple[EchoServer, CertificateAuthority]]:
    ca = CertificateAuthority.create("backend CA")
    async with EchoServer(
        pod="secure-0", ssl_context=_server_context(ca, "backend.internal")
    ) as echo:
        yield echo, ca


def _tls_backend(name: str, ca_pem: bytes, sni: str) -> Backend:
    tls = UpstreamTLS(sni=sni, ca_bundle_pem=ca_pem)
    return Backend(endpoints=f"endpoints/default/{name}/80", tls=tls)


async def test_a_verified_tls_upstream_is_reached(
    secure_echo: tuple[EchoServer, CertificateAuthority],
) -> None:
    echo, ca = secure_echo
    resources: list[Resource] = [
        HTTP_LISTENER,
        endpoints("secure", echo.port),
        routes(
            "secure.example",
            rule("r", _tls_backend("secure", ca.certificate_pem, "backend.internal")),
        ),
    ]
    async with running(resources) as plane:
        response = await get(actual(plane), "/", host="secure.example")
    assert response.status == 200
    assert b'"pod": "secure-0"' in response.body


@pytest.mark.parametrize(
    ("trusted", "sni"),
    [
        pytest.param(False, "backend.internal", id="certificate-from-another-ca"),
        pytest.param(True, "other.internal", id="certificate-for-another-name"),
    ],
)
async def test_an_unverified_upstream_is_never_sent_the_request(
    secure_echo: tuple[EchoServer, CertificateAuthority], trusted: bool, sni: str
) -> None:
    echo, ca = secure_echo
    bundle = (
        ca.certificate_pem if trusted else CertificateAuthority.create("other CA").certificate_pem
    )
    resources: list[Resource] = [
        HTTP_LISTENER,
        endpoints("secure", echo.port),
        routes("secure.example", rule("r", _tls_backend("secure", bundle, sni))),
    ]
    async with running(resources) as plane:
        response = await get(actual(plane), "/", host="secure.example")
    assert response.status in (502, 503)
    assert b"secure-0" not in response.body


async def test_a_delta_rebuilds_a_tls_picker_only_when_its_endpoints_change(
    secure_echo: tuple[EchoServer, CertificateAuthority],
) -> None:
    echo, ca = secure_echo
    backend = _tls_backend("secure", ca.certificate_pem, "backend.internal")
    secure = routes("secure.example", rule("r", backend))
    held = {r.key: r for r in (HTTP_LISTENER, endpoints("secure", echo.port), secure)}
    context = _server_context(ca, "backend.internal")
    async with (
        EchoServer(pod="secure-1", ssl_context=context) as moved,
        running(list(held.values())) as plane,
    ):
        assert plane.rt is not None and plane.rt.tables is not None
        picker = plane.rt.tables.own_pickers[id(backend)]
        other = routes("other.example", rule("o", Backend(endpoints=backend.endpoints)))
        held[other.key] = other
        await plane.apply(held)
        assert plane.rt.tables.own_pickers[id(backend)] is picker
        held[backend.endpoints] = endpoints("secure", moved.port)
        await plane.apply(held)
        assert plane.rt.tables.own_pickers[id(backend)] is not picker
        response = await get(actual(plane), "/", host="secure.example")
    assert b'"pod": "secure-1"' in response.body


SAN_NAME = "abc.example.com"
SAN_URI = "spiffe://abc.example.com/test-identity"


@pytest.fixture
async def san_echo() -> AsyncIterator[tuple[EchoServer, CertificateAuthority]]:
    ca = CertificateAuthority.create("backend CA")
    context = _server_context(ca, SAN_NAME, uris=(SAN_URI,))
    async with EchoServer(pod="san-0", ssl_context=context) as echo:
        yield echo, ca


@pytest.mark.parametrize(
    ("names", "uris", "reached"),
    [
        pytest.param((SAN_NAME,), (), True, id="hostname-san-matches"),
        pytest.param(("dce.example.com",), (), False, id="hostname-mismatch-though-sni-matches"),
        pytest.param((), (SAN_URI,), True, id="uri-san-matches"),
        pytest.param((), ("spiffe://def.example.com/test-identity",), False, id="uri-mismatch"),
        pytest.param(("def.example.com",), (SAN_URI,), True, id="one-of-several-matches"),
        pytest.param(
            ("def.example.com",), ("spiffe://def.example.com/x",), False, id="none-of-several"
        ),
        pytest.param(("ABC.example.com",), (), True, id="dns-names-compare-without-case"),
    ],
)
async def test_subject_alt_names_replace_the_hostname_check(
    san_echo: tuple[EchoServer, CertificateAuthority],
    names: tuple[str, ...],
    uris: tuple[str, ...],
    reached: bool,
) -> None:
    echo, ca = san_echo
    tls = UpstreamTLS(
        sni=SAN_NAME,
        ca_bundle_pem=ca.certificate_pem,
        subject_alt_names=tuple(n.lower() for n in names),
        subject_alt_uris=uris,
    )
    backend = Backend(endpoints="endpoints/default/san/80", tls=tls)
    resources: list[Resource] = [
        HTTP_LISTENER,
        endpoints("san", echo.port),
        routes("san.example", rule("r", backend)),
    ]
    async with running(resources) as plane:
        response = await get(actual(plane), "/", host="san.example")
    if reached:
        assert response.status == 200
        assert b'"pod": "san-0"' in response.body
    else:
        assert response.status in (502, 503)
        assert b"san-0" not in response.body


async def test_a_wildcard_certificate_covers_one_label_of_a_san(
    san_echo: tuple[EchoServer, CertificateAuthority],
) -> None:
    _, ca = san_echo
    context = _server_context(ca, "*.example.com")

    def via(san: str) -> Backend:
        tls = UpstreamTLS(sni=SAN_NAME, ca_bundle_pem=ca.certificate_pem, subject_alt_names=(san,))
        return Backend(endpoints="endpoints/default/wild/80", tls=tls)

    async with EchoServer(pod="wild-0", ssl_context=context) as echo:
        resources: list[Resource] = [
            HTTP_LISTENER,
            endpoints("wild", echo.port),
            routes("one.example", rule("r", via(SAN_NAME))),
            routes("two.example", rule("s", via("a.b.example.com"))),
        ]
        async with running(resources) as plane:
            assert (await get(actual(plane), "/", host="one.example")).status == 200
            assert (await get(actual(plane), "/", host="two.example")).status in (502, 503)


async def test_a_san_check_still_verifies_the_chain(
    san_echo: tuple[EchoServer, CertificateAuthority],
) -> None:
    echo, _ = san_echo
    stranger = CertificateAuthority.create("other CA").certificate_pem
    tls = UpstreamTLS(sni=SAN_NAME, ca_bundle_pem=stranger, subject_alt_names=(SAN_NAME,))
    resources: list[Resource] = [
        HTTP_LISTENER,
        endpoints("san", echo.port),
        routes("san.example", rule("r", Backend(endpoints="endpoints/default/san/80", tls=tls))),
    ]
    async with running(resources) as plane:
        assert (await get(actual(plane), "/", host="san.example")).status in (502, 503)


def _gateway_listeners(certificate: TlsCertificate | None) -> Resource:
    return dataclasses.replace(HTTP_LISTENER, backend_client_certificate=certificate)


def _client_certificate(ca: CertificateAuthority) -> TlsCertificate:
    issued = ca.issue(dns=["gateway.internal"])
    return TlsCertificate((), issued.chain_pem, issued.key_pem, "default/gateway-client")


async def test_the_gateway_client_certificate_is_presented_and_rotated() -> None:
    ca, clients, others = (CertificateAuthority.create(n) for n in ("backend", "gw", "other"))
    context = _server_context(ca, "backend.internal", clients=clients)
    backend = _tls_backend("mtls", ca.certificate_pem, "backend.internal")
    secure = routes("mtls.example", rule("r", backend))

    def held(certificate: TlsCertificate | None) -> list[Resource]:
        return [_gateway_listeners(certificate), endpoints("mtls", echo.port), secure]

    async with (
        EchoServer(pod="mtls-0", ssl_context=context) as echo,
        running(held(None)) as plane,
    ):
        port = actual(plane)
        assert (await get(port, "/", host="mtls.example")).status in (502, 503)
        await plane.apply(held(_client_certificate(clients)))
        response = await get(port, "/", host="mtls.example")
        assert response.status == 200 and b'"pod": "mtls-0"' in response.body
        # Rotated to a certificate the backend does not trust: new connections present it,
        # so the pooled one that carried the old certificate is not what answers.
        await plane.apply(held(_client_certificate(others)))
        assert (await get(port, "/", host="mtls.example")).status in (502, 503)
        await plane.apply(held(_client_certificate(clients)))
        assert (await get(port, "/", host="mtls.example")).status == 200


async def test_only_the_gateways_own_routes_present_its_certificate() -> None:
    ca, clients = CertificateAuthority.create("backend"), CertificateAuthority.create("gw")
    context = _server_context(ca, "backend.internal", clients=clients)
    # Each resource decoded from the wire has Backend objects of its own: so do these.
    backend = _tls_backend("mtls", ca.certificate_pem, "backend.internal")
    other_backend = _tls_backend("mtls", ca.certificate_pem, "backend.internal")
    other_gateway = dataclasses.replace(
        routes("other.example", rule("o", other_backend)), table="gateway/default/other"
    )
    async with EchoServer(pod="mtls-0", ssl_context=context) as echo:
        resources: list[Resource] = [
            _gateway_listeners(_client_certificate(clients)),
            endpoints("mtls", echo.port),
            routes("mtls.example", rule("r", backend)),
            other_gateway,
        ]
        async with running(resources) as plane:
            assert (await get(actual(plane), "/", host="mtls.example")).status == 200
            assert (await get(actual(plane), "/", host="other.example")).status in (502, 503)
