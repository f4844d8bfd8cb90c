"""Client certificates per Ingress host (ingress-nginx's auth-tls-*): a server-named
ClientCaStore (AllowValidOrNone) and the rules' ClientCertificate, through real TLS handshakes
with certificates minted here, to a real echo backend.

Covers: no certificate answered 400, a 302 to the error page, or sent on as NONE when optional;
a valid one sent on with ssl-client-verify, the subject and issuer DNs (nginx's RFC 2253 order)
and, when asked, the escaped PEM, the client's own ssl-client-* fields dropped; a certificate of
another authority refused in the handshake; the subject pattern (403, also with no
certificate); the chain's length (an intermediate in the bundle; one only the client sends,
which the proxy cannot rebuild, refused under a bound); a request for the host on a connection
whose server name chose another host (421), and that host served without a certificate; a
wildcard name; a bundle the proxy cannot load refusing the name's clients and no one else's; a
new bundle taking effect on the next handshake, a delta leaving a name alone keeping its
contexts; TLS sessions resumed on their name only, never across names nor past a new bundle;
HTTP/2 alike; a rule naming the port's own store (a Gateway's frontend). The DN
format, byte by byte, and the chain rebuild are `peercert_test`'s; what the controller sends
is its goldens'.
"""

from __future__ import annotations

import asyncio
import datetime
import json
import socket
import ssl
from dataclasses import replace
from urllib.parse import quote

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from coxswain_devkit.echo import EchoServer
from coxswain_devkit.pki import CertificateAuthority, Issued, client_context, private_key_pem
from coxswain_proxy.dataplane import testing as t
from coxswain_proxy.dataplane.http2 import h2client
from coxswain_routing import (
    ClientCaStore,
    ClientCertificate,
    ClientValidationMode,
    ListenerProtocol,
    Policy,
    Resource,
    TlsCertificate,
    TlsStore,
)

SHOP, OPEN, APPS = "shop.example.com", "open.example.com", "*.apps.example.com"
SERVER_CA = CertificateAuthority.create("server CA")
CLIENT_CA = CertificateAuthority.create("client CA")
OTHER_CA = CertificateAuthority.create("another client CA")
FORGED = "ssl-client-verify: SUCCESS\r\nSSL-Client-Subject-DN: CN=admin\r\nssl-client-cert: x\r\n"


def authority(name: str, issuer: CertificateAuthority | None = None) -> CertificateAuthority:
    """A CA that may have intermediates under it (the devkit's may not), or one under `issuer`."""
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = datetime.datetime.now(datetime.UTC)
    usage = x509.KeyUsage(True, False, False, False, False, True, True, False, False)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer.certificate.subject if issuer else subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(usage, critical=True)
        .sign(issuer.key if issuer else key, hashes.SHA256())
    )
    return CertificateAuthority(key, certificate)


ROOT = authority("root CA")
INTERMEDIATE = authority("intermediate CA", ROOT)


def client(ca: CertificateAuthority, *names: tuple[x509.ObjectIdentifier, str]) -> Issued:
    """A client certificate whose subject is `names`, most significant first."""
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(oid, value) for oid, value in names]))
        .issuer_name(ca.certificate.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .sign(ca.key, hashes.SHA256())
    )
    pem = certificate.public_bytes(serialization.Encoding.PEM)
    return Issued(pem, private_key_pem(key), pem + ca.certificate_pem, certificate)


ALICE = client(CLIENT_CA, (NameOID.ORGANIZATION_NAME, "Example"), (NameOID.COMMON_NAME, "alice"))


def tls_store() -> TlsStore:
    certificates = []
    for name in (SHOP, OPEN, APPS):
        issued = SERVER_CA.issue(dns=[name])
        certificates.append(TlsCertificate((name,), issued.chain_pem, issued.key_pem, f"ns/{name}"))
    return TlsStore(t.TLS_PORT, tuple(certificates))


TLS = tls_store()


def named(bundle: bytes, server_name: str = SHOP) -> ClientCaStore:
    mode = ClientValidationMode.ALLOW_VALID_OR_NONE
    return ClientCaStore(t.TLS_PORT, bundle, ("Secret ns/ca",), mode, server_name)


CHECK = ClientCertificate(store=f"client-ca/{t.TLS_PORT}/{SHOP}")


def resources(
    echo: int, checked: ClientCertificate | None, *cas: ClientCaStore, host: str = SHOP
) -> list[Resource]:
    rule = t.rule("shop", t.backend("echo"))
    if checked is not None:
        rule = replace(rule, policy=Policy(client_certificate=checked))
    return [
        t.listeners((t.TLS_PORT, ListenerProtocol.HTTPS, "")),
        t.endpoints("echo", echo),
        t.routes(host, rule, port=t.TLS_PORT),
        t.routes(OPEN, t.rule("open", t.backend("echo")), port=t.TLS_PORT),
        TLS,
        *cas,
    ]


def context(certificate: Issued | None = None, alpn: str = "http/1.1") -> ssl.SSLContext:
    return client_context(SERVER_CA.certificate_pem, certificate, alpn)


async def ask(
    port: int, certificate: Issued | None, *, sni: str = SHOP, host: str = SHOP, extra: str = ""
) -> t.Response | str:
    """One request's response, or "refused" when the handshake (or the connection) ended."""
    try:
        async with t.client(port, context(certificate), sni) as c:
            return await c.request("/", host, extra)
    except (ssl.SSLError, ConnectionError, OSError):
        return "refused"


def seen(response: t.Response | str) -> dict[str, list[str]]:
    """The ssl-client-* fields the echo backend received."""
    assert isinstance(response, t.Response) and response.status == 200, response
    headers: dict[str, list[str]] = json.loads(response.body)["headers"]
    return {k.lower(): v for k, v in headers.items() if k.lower().startswith("ssl-client")}


def status(response: t.Response | str) -> int | str:
    return response.status if isinstance(response, t.Response) else response


SUBJECT, ISSUER = "CN=alice,O=Example", "CN=client CA"


async def test_a_valid_certificate_is_sent_on_with_its_fields_and_forgeries_dropped() -> None:
    ca = named(CLIENT_CA.certificate_pem)
    async with EchoServer() as echo, t.running(resources(echo.port, CHECK, ca)) as plane:
        answer = await ask(t.actual(plane, t.TLS_PORT), ALICE, extra=FORGED)
        assert seen(answer) == {
            "ssl-client-verify": ["SUCCESS"],
            "ssl-client-subject-dn": [SUBJECT],
            "ssl-client-issuer-dn": [ISSUER],
        }


async def test_the_certificate_is_passed_on_escaped_when_asked() -> None:
    ca, checked = named(CLIENT_CA.certificate_pem), replace(CHECK, pass_certificate=True)
    async with EchoServer() as echo, t.running(resources(echo.port, checked, ca)) as plane:
        answer = await ask(t.actual(plane, t.TLS_PORT), ALICE, extra=FORGED)
        assert seen(answer)["ssl-client-cert"] == [quote(ALICE.certificate_pem.decode(), safe="")]


@pytest.mark.parametrize(
    ("checked", "expected", "location"),
    [
        pytest.param(CHECK, 400, None, id="required-no-certificate-400"),
        pytest.param(
            replace(CHECK, error_page="https://errors.example/cert"), 302,
            "https://errors.example/cert", id="required-no-certificate-error-page-302",
        ),
        pytest.param(replace(CHECK, required=False), 200, None, id="optional-sent-on-as-none"),
    ],
)  # fmt: skip
async def test_no_certificate(
    checked: ClientCertificate, expected: int, location: str | None
) -> None:
    ca = named(CLIENT_CA.certificate_pem)
    async with EchoServer() as echo, t.running(resources(echo.port, checked, ca)) as plane:
        answer = await ask(t.actual(plane, t.TLS_PORT), None, extra=FORGED)
        assert isinstance(answer, t.Response) and answer.status == expected
        assert answer.header("location") == location
        if expected == 200:
            assert seen(answer) == {"ssl-client-verify": ["NONE"]}


async def test_an_optional_rule_sends_a_valid_certificate_on_as_success() -> None:
    ca = named(CLIENT_CA.certificate_pem)
    checked = replace(CHECK, required=False)
    async with EchoServer() as echo, t.running(resources(echo.port, checked, ca)) as plane:
        answer = await ask(t.actual(plane, t.TLS_PORT), ALICE)
        assert seen(answer)["ssl-client-verify"] == ["SUCCESS"]


@pytest.mark.parametrize("required", [True, False], ids=["required", "optional"])
async def test_a_certificate_of_another_authority_is_refused_in_the_handshake(
    required: bool,
) -> None:
    ca = named(CLIENT_CA.certificate_pem)
    checked = replace(CHECK, required=required)
    async with EchoServer() as echo, t.running(resources(echo.port, checked, ca)) as plane:
        stranger = client(OTHER_CA, (NameOID.COMMON_NAME, "alice"))
        assert await ask(t.actual(plane, t.TLS_PORT), stranger) == "refused"


@pytest.mark.parametrize(
    ("certificate", "expected"),
    [
        pytest.param(ALICE, 200, id="subject-matching-admitted"),
        pytest.param(client(CLIENT_CA, (NameOID.COMMON_NAME, "bob")), 403, id="other-subject-403"),
        pytest.param(None, 403, id="no-certificate-empty-subject-403"),
    ],
)
async def test_the_subject_pattern(certificate: Issued | None, expected: int) -> None:
    ca = named(CLIENT_CA.certificate_pem)
    checked = replace(CHECK, required=False, subject="CN=alice(,|$)")
    async with EchoServer() as echo, t.running(resources(echo.port, checked, ca)) as plane:
        assert status(await ask(t.actual(plane, t.TLS_PORT), certificate)) == expected


DEEP = client(INTERMEDIATE, (NameOID.COMMON_NAME, "deep"))  # its chain_pem: leaf, intermediate


@pytest.mark.parametrize(
    ("bundle", "max_chain", "expected"),
    [
        pytest.param(ROOT.certificate_pem + INTERMEDIATE.certificate_pem, 3, 200, id="3-of-3"),
        pytest.param(ROOT.certificate_pem + INTERMEDIATE.certificate_pem, 2, 400, id="3-over-2"),
        pytest.param(ROOT.certificate_pem + INTERMEDIATE.certificate_pem, 0, 200, id="0-any"),
        # OpenSSL verifies with the intermediate the client sent, which Python's ssl does not
        # show: the chain is not rebuilt, so a bound on its length refuses it.
        pytest.param(ROOT.certificate_pem, 3, 400, id="intermediate-only-sent-bounded-400"),
        pytest.param(ROOT.certificate_pem, 0, 200, id="intermediate-only-sent-unbounded"),
    ],
)
async def test_the_chains_length(bundle: bytes, max_chain: int, expected: int) -> None:
    checked = replace(CHECK, max_chain=max_chain)
    async with (
        EchoServer() as echo,
        t.running(resources(echo.port, checked, named(bundle))) as plane,
    ):
        answer = await ask(t.actual(plane, t.TLS_PORT), DEEP)
        assert status(answer) == expected
        if expected == 200:
            assert seen(answer)["ssl-client-issuer-dn"] == ["CN=intermediate CA"]


async def test_another_hosts_server_name_is_misdirected_and_that_host_asks_nothing() -> None:
    ca = named(CLIENT_CA.certificate_pem)
    async with EchoServer() as echo, t.running(resources(echo.port, CHECK, ca)) as plane:
        port = t.actual(plane, t.TLS_PORT)
        assert status(await ask(port, None, sni=OPEN, host=OPEN)) == 200
        # A rule without the check passes on what the client sent, as nginx does.
        assert seen(await ask(port, ALICE, sni=OPEN, host=OPEN, extra=FORGED)) == {
            "ssl-client-verify": ["SUCCESS"],
            "ssl-client-subject-dn": ["CN=admin"],
            "ssl-client-cert": ["x"],
        }
        async with t.client(port, context(ALICE), OPEN) as c:
            assert (await c.request("/", SHOP)).status == 421
            assert (await c.request("/", OPEN)).status == 200
        async with t.client(port, context(ALICE), SHOP) as c:
            assert (await c.request("/", SHOP)).status == 200
            assert (await c.request("/", OPEN)).status == 200


async def test_a_connection_verified_under_another_names_store_is_misdirected() -> None:
    # Both names trust the same CA: what counts is which store verified the connection.
    cas = named(CLIENT_CA.certificate_pem), named(CLIENT_CA.certificate_pem, APPS)
    async with (
        EchoServer() as echo,
        t.running(resources(echo.port, CHECK, *cas)) as plane,
        t.client(t.actual(plane, t.TLS_PORT), context(ALICE), "a.apps.example.com") as c,
    ):
        assert (await c.request("/", SHOP)).status == 421


async def test_a_wildcard_name_verifies_the_names_under_it() -> None:
    ca = named(CLIENT_CA.certificate_pem, APPS)
    checked = replace(CHECK, store=ca.key)
    async with (
        EchoServer() as echo,
        t.running(resources(echo.port, checked, ca, host=APPS)) as plane,
    ):
        port, name = t.actual(plane, t.TLS_PORT), "a.apps.example.com"
        answer = await ask(port, ALICE, sni=name, host=name)
        assert seen(answer)["ssl-client-subject-dn"] == [SUBJECT]
        assert status(await ask(port, None, sni=name, host=name)) == 400
        assert status(await ask(port, None, sni=OPEN, host=OPEN)) == 200


async def test_a_bundle_the_proxy_cannot_load_refuses_that_names_clients_only() -> None:
    ca = named(b"-----BEGIN CERTIFICATE-----\nnot base64\n-----END CERTIFICATE-----\n")
    checked = replace(CHECK, required=False)
    async with EchoServer() as echo, t.running(resources(echo.port, checked, ca)) as plane:
        port = t.actual(plane, t.TLS_PORT)
        assert await ask(port, ALICE) == "refused"
        assert await ask(port, None) == "refused"
        assert status(await ask(port, None, sni=OPEN, host=OPEN)) == 200


async def test_a_new_bundle_takes_effect_on_the_next_handshake_and_a_delta_keeps_a_name() -> None:
    bob = client(OTHER_CA, (NameOID.COMMON_NAME, "bob"))
    async with EchoServer() as echo:
        listed = resources(echo.port, CHECK, named(CLIENT_CA.certificate_pem))
        async with t.running(listed) as plane:
            assert plane.rt is not None and plane.rt.tables is not None
            port = t.actual(plane, t.TLS_PORT)
            entry = plane.rt.tables.tls[t.TLS_PORT].named[SHOP]
            # A route edited: the name keeps the contexts it was built with.
            edited = t.routes(OPEN, t.rule("open2", t.backend("echo")), port=t.TLS_PORT)
            await plane.apply([*listed[:3], edited, *listed[4:]])
            assert plane.rt.tables.tls[t.TLS_PORT].named[SHOP] is entry
            # The name's bundle rotated: the port's certificates are kept, the name rebuilt.
            store = plane.rt.tables.tls[t.TLS_PORT]
            await plane.apply([*listed[:-1], named(OTHER_CA.certificate_pem)])
            rotated = plane.rt.tables.tls[t.TLS_PORT]
            assert rotated.named[SHOP] is not entry and rotated.exact is store.exact
            assert t.actual(plane, t.TLS_PORT) == port
            assert seen(await ask(port, bob))["ssl-client-subject-dn"] == ["CN=bob"]
            assert await ask(port, ALICE) == "refused"
            # The name's store withdrawn: no certificate is asked for, the rule answers 421.
            await plane.apply(listed[:-1])
            assert not plane.rt.tables.tls[t.TLS_PORT].peeks
            assert status(await ask(port, None)) == 421


async def test_http2_is_checked_and_sent_on_alike() -> None:
    ca = named(CLIENT_CA.certificate_pem)
    async with EchoServer() as echo, t.running(resources(echo.port, CHECK, ca)) as plane:
        port = t.actual(plane, t.TLS_PORT)
        forged = [(b"ssl-client-subject-dn", b"CN=admin")]
        async with h2client.connected(port, context(ALICE, "h2"), SHOP) as h2:
            assert h2.writer.get_extra_info("ssl_object").selected_alpn_protocol() == "h2"
            answer = await h2.answer(h2.request("/", SHOP, extra=forged))
            assert answer.status == 200
            headers = json.loads(answer.body)["headers"]
            assert headers["ssl-client-subject-dn"] == [SUBJECT]
            assert headers["ssl-client-verify"] == ["SUCCESS"]
            misdirected = await h2.answer(h2.request("/", OPEN))
            assert misdirected.status == 200  # a host without the check, on the same connection
        async with h2client.connected(port, context(None, "h2"), SHOP) as h2:
            assert (await h2.get("/", SHOP)).status == 400
        async with h2client.connected(port, context(ALICE, "h2"), OPEN) as h2:
            assert (await h2.get("/", SHOP)).status == 421


async def test_a_rule_may_name_the_ports_own_store() -> None:
    # A Gateway's frontend validation (the port's store, AllowValidOnly) verifies every client.
    port_ca = ClientCaStore(t.TLS_PORT, CLIENT_CA.certificate_pem, ("ConfigMap ns/ca",))
    checked = replace(CHECK, store=port_ca.key)
    async with EchoServer() as echo, t.running(resources(echo.port, checked, port_ca)) as plane:
        answer = await ask(t.actual(plane, t.TLS_PORT), ALICE)
        assert seen(answer)["ssl-client-subject-dn"] == [SUBJECT]


def resumed(
    port: int, made: ssl.SSLContext, sni: str, session: ssl.SSLSession | None
) -> tuple[ssl.SSLSession | None, bool, bytes]:
    """One request over a blocking socket (asyncio's streams cannot offer a session): the
    session to resume next, whether this one was resumed, the status line."""
    with (
        socket.create_connection(("127.0.0.1", port), timeout=10.0) as raw,
        made.wrap_socket(raw, server_hostname=sni, session=session) as tls,
    ):
        tls.sendall(f"GET / HTTP/1.1\r\nHost: {SHOP}\r\nConnection: close\r\n\r\n".encode())
        data = b""
        try:
            while chunk := tls.recv(65536):
                data += chunk
        except (ssl.SSLError, OSError):
            pass
        return tls.session, bool(tls.session_reused), data.split(b"\r\n", 1)[0]


async def test_a_session_resumes_on_its_name_only_and_not_past_a_new_bundle() -> None:
    # TLS 1.3 resumption carries the certificate verified when the session began: it must never
    # stand for a verification under another store, or under a bundle since replaced.
    async with EchoServer() as echo:
        cas = named(CLIENT_CA.certificate_pem), named(CLIENT_CA.certificate_pem, APPS)
        listed = resources(echo.port, CHECK, *cas)
        async with t.running(listed) as plane:
            port, made = t.actual(plane, t.TLS_PORT), context(ALICE)
            session, reused, line = await asyncio.to_thread(resumed, port, made, SHOP, None)
            assert (reused, line) == (False, b"HTTP/1.1 200 OK")
            _, reused, line = await asyncio.to_thread(resumed, port, made, SHOP, session)
            assert (reused, line) == (True, b"HTTP/1.1 200 OK")
            other = await asyncio.to_thread(resumed, port, made, "a.apps.example.com", session)
            assert other[1:] == (False, b"HTTP/1.1 421 Misdirected Request")
            both = named(CLIENT_CA.certificate_pem + OTHER_CA.certificate_pem)
            await plane.apply([*listed[:-2], both, listed[-1]])
            _, reused, line = await asyncio.to_thread(resumed, port, made, SHOP, session)
            assert (reused, line) == (False, b"HTTP/1.1 200 OK")
