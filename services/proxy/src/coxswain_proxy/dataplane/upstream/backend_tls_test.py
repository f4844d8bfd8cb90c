"""TLS to upstreams a BackendTLSPolicy governs, through the data plane to a TLS echo backend.

Covers: the request reaches a backend whose certificate chains to the policy's CA bundle and
carries the policy's hostname (sent as SNI); a backend whose certificate comes from another CA,
or names another host, is never sent the request; a delta keeps a TLS backend's picker unless
its endpoints change. Certificates are minted in the test.
"""

from __future__ import annotations

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
from coxswain_routing import Backend, Resource, UpstreamTLS


def _server_context(ca: CertificateAuthority, name: str) -> ssl.SSLContext:
    issued = ca.issue(dns=[name], ips=["127.0.0.1"])
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
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
