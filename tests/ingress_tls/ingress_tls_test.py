"""ingress-nginx's TLS annotations through translation and a real data plane, on real sockets.

Each test translates Ingress manifests with the controller's own `translate` and serves the
shared pool's snapshot with a shared-mode `Dataplane` on loopback (the Ingress ports bound to
ephemeral ones); backends are the devkit's echo server, over TLS where the annotations ask,
and every certificate is minted in the test. Covers proxy-ssl-* (the backend verified by
proxy-ssl-name against the Secret's ca.crt, its client certificate presented, a backend of
another CA never sent the request); ssl-passthrough (a client verifying the backend's own
certificate through the Ingress HTTPS port, beside a host the port terminates, and a
passthrough host's plain HTTP not served); auth-tls-* (a host whose clients must present a
certificate of the Secret's CA, one where it is optional, the certificate's subject sent on, the
client's own ssl-client-* fields replaced, and a request for the host on a connection whose TLS
server name chose another host refused). What each annotation becomes as data is in the golden
cases (translate/testdata/ingress-nginx-*); the proxy's own TLS tests cover the rest.
"""

from __future__ import annotations

import base64
import contextlib
import json
import ssl
from collections.abc import AsyncIterator, Sequence
from typing import Any

from coxswain_controller.translate import Inputs, Options, translate
from coxswain_controller.translate.scopes import SHARED_POOL
from coxswain_devkit import pki
from coxswain_devkit.echo import EchoServer
from coxswain_devkit.pki import CertificateAuthority, Issued
from coxswain_proxy.dataplane.core import Dataplane
from coxswain_proxy.dataplane.core import Options as PlaneOptions
from coxswain_proxy.dataplane.testing import client, get

Obj = dict[str, Any]
NS = "shop"
P = "nginx.ingress.kubernetes.io/"
HTTP, HTTPS = 80, 443
BACKEND_NAME = "web.shop.internal"


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def ingress_class() -> Obj:
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "IngressClass",
        "metadata": {"name": "coxswain"},
        "spec": {"controller": "coxswain-labs.dev/ingress-controller"},
    }


def service(name: str, port: int, target: int, port_name: str = "https") -> list[Obj]:
    """A Service and the EndpointSlice putting its one endpoint at 127.0.0.1:`target`."""
    return [
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": name, "namespace": NS},
            "spec": {"ports": [{"name": port_name, "port": port}]},
        },
        {
            "apiVersion": "discovery.k8s.io/v1",
            "kind": "EndpointSlice",
            "metadata": {
                "name": f"{name}-1",
                "namespace": NS,
                "labels": {"kubernetes.io/service-name": name},
            },
            "addressType": "IPv4",
            "ports": [{"name": port_name, "port": target, "protocol": "TCP"}],
            "endpoints": [{"addresses": ["127.0.0.1"], "conditions": {"ready": True}}],
        },
    ]


def secret(name: str, data: dict[str, bytes], kind: str = "Opaque") -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name, "namespace": NS},
        "type": kind,
        "data": {k: _b64(v) for k, v in data.items()},
    }


def ingress(
    name: str,
    host: str,
    backend: str,
    port: int,
    annotations: dict[str, str],
    *,
    tls_secret: str = "",
    path: str = "/",
) -> Obj:
    spec: Obj = {
        "ingressClassName": "coxswain",
        "rules": [
            {
                "host": host,
                "http": {
                    "paths": [
                        {
                            "path": path,
                            "pathType": "Prefix",
                            "backend": {"service": {"name": backend, "port": {"number": port}}},
                        }
                    ]
                },
            }
        ],
    }
    if tls_secret:
        spec["tls"] = [{"hosts": [host], "secretName": tls_secret}]
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "Ingress",
        "metadata": {
            "name": name,
            "namespace": NS,
            "annotations": {P + k: v for k, v in annotations.items()},
        },
        "spec": spec,
    }


def server_context(issued: Issued, clients: CertificateAuthority | None = None) -> ssl.SSLContext:
    """A TLS backend's context; `clients`: the CA whose client certificates it requires."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    if clients is not None:
        context.verify_mode = ssl.CERT_REQUIRED
        context.load_verify_locations(cadata=clients.certificate_pem.decode())
    issued.load_into(context)
    return context


@contextlib.asynccontextmanager
async def serving(manifests: Sequence[Obj]) -> AsyncIterator[dict[int, int]]:
    """The manifests translated and served: the bound port of each Ingress port."""
    result = translate(Inputs.from_objects([ingress_class(), *manifests]), Options())
    options = PlaneOptions(shared=True, address="127.0.0.1", port_map=lambda _: 0)
    plane = await Dataplane(options).start()
    try:
        await plane.apply(list(result.snapshots[SHARED_POOL]))
        yield {b.port: b.actual for b in plane.bound()}
    finally:
        await plane.close(grace=1.0)


def seen(body: bytes) -> Obj:
    found: Obj = json.loads(body)
    return found


# ------------------------------------------------------------------------------ proxy-ssl-*


def _proxy_ssl(secret_name: str) -> dict[str, str]:
    return {
        "backend-protocol": "HTTPS",
        "proxy-ssl-secret": f"{NS}/{secret_name}",
        "proxy-ssl-verify": "on",
        "proxy-ssl-name": BACKEND_NAME,
    }


async def test_proxy_ssl_verifies_the_backend_and_presents_the_secret_certificate() -> None:
    backends, proxies = CertificateAuthority.create("backends"), CertificateAuthority.create("px")
    context = server_context(backends.issue(dns=[BACKEND_NAME]), clients=proxies)
    client = proxies.issue(dns=["proxy.shop"])
    async with EchoServer(pod="web-0", ssl_context=context) as echo:
        manifests = [
            *service("web", 443, echo.port),
            secret(
                "mtls",
                {
                    "ca.crt": backends.certificate_pem,
                    "tls.crt": client.chain_pem,
                    "tls.key": client.key_pem,
                },
            ),
            secret("ca-only", {"ca.crt": backends.certificate_pem}),
            ingress("mtls", "mtls.example", "web", 443, _proxy_ssl("mtls")),
            ingress("ca-only", "ca-only.example", "web", 443, _proxy_ssl("ca-only")),
        ]
        async with serving(manifests) as ports:
            answered = await get(ports[HTTP], "/", host="mtls.example")
            refused = await get(ports[HTTP], "/", host="ca-only.example")
    assert answered.status == 200 and seen(answered.body)["pod"] == "web-0"
    # The backend requires a client certificate: without the Secret's, no request reaches it.
    assert refused.status in (502, 503) and b"web-0" not in refused.body


async def test_proxy_ssl_never_sends_a_request_to_a_backend_it_cannot_verify() -> None:
    backends, stranger = CertificateAuthority.create("backends"), CertificateAuthority.create("x")
    context = server_context(stranger.issue(dns=[BACKEND_NAME]))
    async with EchoServer(pod="web-0", ssl_context=context) as echo:
        manifests = [
            *service("web", 443, echo.port),
            secret("trust", {"ca.crt": backends.certificate_pem}),
            ingress("web", "web.example", "web", 443, _proxy_ssl("trust")),
        ]
        async with serving(manifests) as ports:
            response = await get(ports[HTTP], "/", host="web.example")
    assert response.status in (502, 503) and b"web-0" not in response.body


def client_context(ca: CertificateAuthority) -> ssl.SSLContext:
    return pki.client_context(ca.certificate_pem)


# --------------------------------------------------------------------------- ssl-passthrough


async def test_passthrough_relays_the_backend_tls_beside_a_terminated_host() -> None:
    backends, edge = CertificateAuthority.create("backends"), CertificateAuthority.create("edge")
    context = server_context(backends.issue(dns=["pass.example"]))
    served = edge.issue(dns=["web.example"])
    async with (
        EchoServer(pod="secure-0", ssl_context=context) as secure,
        EchoServer(pod="web-0") as web,
    ):
        manifests = [
            *service("secure", 443, secure.port),
            *service("web", 80, web.port, "http"),
            secret(
                "web-tls",
                {"tls.crt": served.chain_pem, "tls.key": served.key_pem},
                "kubernetes.io/tls",
            ),
            ingress("pass", "pass.example", "secure", 443, {"ssl-passthrough": "true"}),
            ingress("web", "web.example", "web", 80, {}, tls_secret="web-tls"),
        ]
        async with serving(manifests) as ports:
            # The client verifies the backend's own certificate: the proxy holds no key for it.
            async with client(ports[HTTPS], client_context(backends), "pass.example") as c:
                passed = await c.request("/", host="pass.example")
            async with client(ports[HTTPS], client_context(edge), "web.example") as c:
                terminated = await c.request("/", host="web.example")
            plain = await get(ports[HTTP], "/", host="pass.example")
    assert passed.status == 200 and seen(passed.body)["pod"] == "secure-0"
    assert terminated.status == 200 and seen(terminated.body)["pod"] == "web-0"
    assert plain.status == 404


async def test_a_passthrough_host_never_hands_its_connection_to_the_proxy_tls() -> None:
    backends, edge = CertificateAuthority.create("backends"), CertificateAuthority.create("edge")
    context = server_context(backends.issue(dns=["pass.example"]))
    served = edge.issue(dns=["pass.example"])
    async with EchoServer(pod="secure-0", ssl_context=context) as secure:
        manifests = [
            *service("secure", 443, secure.port),
            secret(
                "edge-tls",
                {"tls.crt": served.chain_pem, "tls.key": served.key_pem},
                "kubernetes.io/tls",
            ),
            # The Ingress's own certificate for the host is never what the client sees.
            ingress(
                "pass", "pass.example", "secure", 443, {"ssl-passthrough": "true"},
                tls_secret="edge-tls",
            ),
        ]  # fmt: skip
        async with serving(manifests) as ports:
            try:
                async with client(ports[HTTPS], client_context(edge), "pass.example") as c:
                    await c.request("/", host="pass.example")
                verified_by_edge = True
            except ssl.SSLCertVerificationError:
                verified_by_edge = False
    assert not verified_by_edge


# -------------------------------------------------------------------------------- auth-tls-*


def _field(body: bytes, name: str) -> list[str]:
    """The values the echo saw under a field name, whatever its case."""
    headers: dict[str, list[str]] = seen(body)["headers"]
    return [v for k, values in headers.items() if k.lower() == name for v in values]


def presenting(trust: CertificateAuthority, certificate: Issued | None) -> ssl.SSLContext:
    """A client context verifying the proxy under `trust` and presenting `certificate`."""
    return pki.client_context(trust.certificate_pem, certificate)


async def test_auth_tls_asks_each_host_for_a_certificate_of_its_own_ca() -> None:
    edge, clients, stranger = (CertificateAuthority.create(n) for n in ("edge", "clients", "x"))
    served = edge.issue(dns=["strict.example", "lax.example", "open.example"])
    alice, mallory = clients.issue(common_name="alice"), stranger.issue(common_name="mallory")
    forged = "ssl-client-verify: SUCCESS\r\nssl-client-subject-dn: CN=admin\r\n"
    async with EchoServer(pod="web-0") as web:
        tls = {"tls.crt": served.chain_pem, "tls.key": served.key_pem}
        ca = {"auth-tls-secret": f"{NS}/client-ca"}
        manifests = [
            *service("web", 80, web.port, "http"),
            secret("edge-tls", tls, "kubernetes.io/tls"),
            secret("client-ca", {"ca.crt": clients.certificate_pem}),
            ingress(
                "strict", "strict.example", "web", 80,
                {**ca, "auth-tls-pass-certificate-to-upstream": "true"},
                tls_secret="edge-tls",
            ),
            ingress(
                "lax", "lax.example", "web", 80,
                {**ca, "auth-tls-verify-client": "optional"},
                tls_secret="edge-tls",
            ),
            ingress("open", "open.example", "web", 80, {}, tls_secret="edge-tls"),
        ]  # fmt: skip
        async with serving(manifests) as ports:
            https = ports[HTTPS]
            async with client(https, presenting(edge, alice), "strict.example") as c:
                admitted = await c.request("/", host="strict.example", extra=forged)
            async with client(https, presenting(edge, None), "strict.example") as c:
                bare = await c.request("/", host="strict.example")
            async with client(https, presenting(edge, None), "lax.example") as c:
                optional = await c.request("/", host="lax.example", extra=forged)
            async with client(https, presenting(edge, None), "open.example") as c:
                unasked = await c.request("/", host="open.example")
                # The certificate check belongs to the connection's server name, not the Host.
                smuggled = await c.request("/", host="strict.example")
            refused_in_handshake = False
            try:
                async with client(https, presenting(edge, mallory), "strict.example") as c:
                    await c.request("/", host="strict.example")
            except (ssl.SSLError, ConnectionError):
                refused_in_handshake = True
    assert admitted.status == 200
    assert _field(admitted.body, "ssl-client-verify") == ["SUCCESS"]
    assert _field(admitted.body, "ssl-client-subject-dn") == ["CN=alice"]
    assert _field(admitted.body, "ssl-client-cert")[0].startswith("-----BEGIN%20CERTIFICATE")
    assert bare.status == 400 and b"web-0" not in bare.body
    assert optional.status == 200 and _field(optional.body, "ssl-client-verify") == ["NONE"]
    assert _field(optional.body, "ssl-client-subject-dn") == []
    assert unasked.status == 200 and _field(unasked.body, "ssl-client-verify") == []
    assert smuggled.status == 421 and b"web-0" not in smuggled.body
    assert refused_in_handshake
