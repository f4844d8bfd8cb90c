"""auth-tls-* through translation and the real matcher: what each host's requests are matched to
on each Ingress port, and the client CA store beside them.

Covers: a host's store (AllowValidOrNone, for "on" and "optional" alike) and the
ClientCertificate on every rule of the host on the HTTPS port, whichever Ingress brings the
rule; the oldest Ingress setting auth-tls-secret on a host deciding for it (a younger one
told); verify-client "off" asking for nothing yet sending ssl-client-verify NONE; the HTTP port
unchecked, redirected by ssl-redirect or served with the ssl-client-* headers taken out (and
said so); wildcard hosts; hostless rules refused, a defaultBackend served unchecked; a host
passed through getting no store. The values each annotation accepts are policy_test's; what the
proxy does with the store and the check is the proxy's own tests'.
"""

from __future__ import annotations

import base64
import datetime
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from coxswain_controller.translate.ingress.client_tls import HEADERS
from coxswain_controller.translate.ingress.ingress_nginx_test import (
    HTTP,
    HTTPS,
    _cert,
    events,
    ingress,
    run,
    served,
)
from coxswain_controller.translate.result import TranslateResult
from coxswain_controller.translate.scopes import SHARED_POOL
from coxswain_routing import (
    ClientCaStore,
    ClientCertificate,
    ClientValidationMode,
    RequestHeaderModifier,
    RequestRedirect,
    Router,
)


def _ca_pem(name: str) -> bytes:
    """A self-signed CA certificate (translation's tests may not use the devkit's PKI)."""
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = datetime.datetime.now(datetime.UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    return certificate.public_bytes(serialization.Encoding.PEM)


CA = _ca_pem("client CA")
OTHER_CA = _ca_pem("other client CA")


def ca_secret(name: str = "ca", authority: bytes = CA) -> dict[str, Any]:
    """An Opaque Secret holding only ca.crt, as `kubectl create secret generic` makes it."""
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "Opaque",
        "metadata": {"name": name, "namespace": "shop"},
        "data": {"ca.crt": base64.b64encode(authority).decode()},
    }


def stores(result: TranslateResult) -> dict[str, ClientCaStore]:
    found = result.snapshots[SHARED_POOL]
    return {r.key: r for r in found if isinstance(r, ClientCaStore)}


def check(router: Router, host: str, path: str = "/") -> ClientCertificate | None:
    policy = served(router, host, path, HTTPS).rule.policy
    return policy.client_certificate if policy is not None else None


def header_modifier(router: Router, host: str, path: str, port: int) -> RequestHeaderModifier:
    rule = served(router, host, path, port).rule
    return next(f for f in rule.filters if isinstance(f, RequestHeaderModifier))


def redirected(router: Router, host: str, path: str = "/") -> bool:
    rule = served(router, host, path, HTTP).rule
    return any(isinstance(f, RequestRedirect) for f in rule.filters)


def test_a_host_asks_for_certificates_on_https_and_checks_each_request() -> None:
    annotations = {
        "auth-tls-secret": "shop/ca",
        "auth-tls-verify-depth": "2",
        "auth-tls-match-cn": "CN=(alice|bob)",
        "auth-tls-pass-certificate-to-upstream": "true",
        "auth-tls-error-page": "https://login.example/cert",
    }
    router, result = run(_cert(), ca_secret(), ingress("m", "m.example", tls=True,
                                                       annotations=annotations))  # fmt: skip
    assert stores(result) == {
        "client-ca/443/m.example": ClientCaStore(
            HTTPS,
            CA,
            ("Secret shop/ca",),
            ClientValidationMode.ALLOW_VALID_OR_NONE,
            "m.example",
        )
    }
    assert check(router, "m.example", "/any") == ClientCertificate(
        "client-ca/443/m.example",
        required=True,
        max_chain=4,
        subject="CN=(alice|bob)",
        pass_certificate=True,
        error_page="https://login.example/cert",
    )
    assert redirected(router, "m.example")  # ssl-redirect: HTTP never reaches the backend
    assert events(result, "m") == []


def test_optional_asks_the_same_way_and_sends_on_a_request_without_one() -> None:
    optional = {"auth-tls-secret": "ca", "auth-tls-verify-client": "optional"}
    router, result = run(_cert(), ca_secret(), ingress("o", "o.example", tls=True,
                                                       annotations=optional))  # fmt: skip
    [store] = stores(result).values()
    assert store.mode is ClientValidationMode.ALLOW_VALID_OR_NONE
    assert check(router, "o.example") == ClientCertificate(store.key, required=False, max_chain=3)


def test_the_oldest_ingress_setting_it_decides_for_every_path_of_the_host() -> None:
    plain = ingress("plain", "h.example", "/plain", at=0, tls=True)
    older = ingress(
        "older",
        "h.example",
        "/a",
        at=1,
        tls=True,
        annotations={"auth-tls-secret": "ca", "auth-tls-verify-client": "optional"},
    )
    younger = ingress(
        "younger",
        "h.example",
        "/b",
        at=2,
        tls=True,
        annotations={"auth-tls-secret": "other", "auth-tls-match-cn": "CN=x"},
    )
    same = ingress(
        "same",
        "h.example",
        "/c",
        at=3,
        tls=True,
        annotations={"auth-tls-secret": "ca", "auth-tls-verify-client": "optional"},
    )
    router, result = run(_cert(), ca_secret(), ca_secret("other", OTHER_CA),
                         plain, older, younger, same)  # fmt: skip
    wanted = ClientCertificate("client-ca/443/h.example", required=False, max_chain=3)
    assert {check(router, "h.example", p) for p in ("/plain", "/a", "/b", "/c")} == {wanted}
    assert [s.sources for s in stores(result).values()] == [("Secret shop/ca",)]
    for told in ("plain", "younger"):
        [message] = events(result, told)
        assert "auth-tls-* of Ingress shop/older say" in message and "h.example" in message
    assert events(result, "same") == []  # it says what the host does: nothing to tell
    assert events(result, "older") == []


def test_a_younger_ingress_owns_a_host_the_older_one_leaves_unchecked() -> None:
    # ingress-nginx: the server's CertificateAuth is taken by the first Ingress with a CA.
    first = ingress("first", "h.example", "/a", at=0, tls=True)
    second = ingress("second", "h.example", "/b", at=1, tls=True,
                     annotations={"auth-tls-secret": "ca"})  # fmt: skip
    router, result = run(_cert(), ca_secret(), first, second)
    assert check(router, "h.example", "/a") == check(router, "h.example", "/b") is not None
    assert events(result, "second") == []
    [message] = events(result, "first")  # its paths are checked now, as nginx checks them
    assert "auth-tls-* of Ingress shop/second say" in message


def test_verify_client_off_asks_nothing_and_says_so_upstream() -> None:
    off = {"auth-tls-secret": "ca", "auth-tls-verify-client": "off"}
    router, result = run(_cert(), ca_secret(), ingress("off", "f.example", tls=True,
                                                       annotations=off))  # fmt: skip
    assert stores(result) == {}
    assert check(router, "f.example") is None
    modifier = header_modifier(router, "f.example", "/", HTTPS)
    assert modifier.set == (("ssl-client-verify", "NONE"),)
    assert set(modifier.remove) == set(HEADERS) - {"ssl-client-verify"}


def test_plain_http_is_served_unchecked_without_the_clients_headers_and_said_so() -> None:
    no_redirect = {"auth-tls-secret": "ca", "ssl-redirect": "false", "x-forwarded-prefix": "/p"}
    router, result = run(_cert(), ca_secret(), ingress("p", "p.example", tls=True,
                                                       annotations=no_redirect))  # fmt: skip
    assert check(router, "p.example") is not None
    http = served(router, "p.example", "/", HTTP).rule
    assert http.policy is None or http.policy.client_certificate is None
    modifier = header_modifier(router, "p.example", "/", HTTP)  # the prefix's, merged into
    assert modifier.set == (("X-Forwarded-Prefix", "/p"),) and modifier.remove == HEADERS
    [message] = events(result, "p")
    assert "p.example served on the HTTP port without client certificates" in message


def test_a_wildcard_host_has_a_wildcard_store() -> None:
    router, result = run(ca_secret(), ingress("w", "*.w.example", annotations={
        "auth-tls-secret": "ca", "force-ssl-redirect": "true"}))  # fmt: skip
    assert list(stores(result)) == ["client-ca/443/*.w.example"]
    certificate = check(router, "a.w.example")
    assert certificate is not None and certificate.store == "client-ca/443/*.w.example"


def test_a_rule_without_a_host_is_refused() -> None:
    router, result = run(ca_secret(), ingress("any", "", annotations={"auth-tls-secret": "ca"}))
    assert router.match(HTTPS, "x.example", "GET", "/").status == 404
    assert stores(result) == {}
    [message] = events(result, "any")
    assert "a rule without a host" in message and "not served" in message


def test_a_default_backend_is_served_unchecked_as_nginx_serves_it() -> None:
    obj = ingress("d", "d.example", tls=True, annotations={"auth-tls-secret": "ca"})
    obj["spec"]["defaultBackend"] = {"service": {"name": "api", "port": {"number": 80}}}
    router, result = run(_cert(), ca_secret(), obj)
    assert check(router, "d.example") is not None
    assert check(router, "elsewhere.example") is None
    assert list(stores(result)) == ["client-ca/443/d.example"]


def test_a_host_passed_through_gets_no_store() -> None:
    passing = ingress("pass", "t.example", at=0, annotations={"ssl-passthrough": "true"})
    checked = ingress("checked", "t.example", "/x", at=1, annotations={"auth-tls-secret": "ca"})
    _, result = run(ca_secret(), passing, checked)
    assert stores(result) == {}


def test_a_secret_without_a_ca_refuses_the_ingress() -> None:
    empty = ca_secret()
    empty["data"] = {"tls.crt": empty["data"]["ca.crt"]}
    router, result = run(empty, ingress("n", "n.example", annotations={"auth-tls-secret": "ca"}))
    assert router.match(HTTPS, "n.example", "GET", "/").status == 404
    assert any("has no ca.crt" in m and "not served" in m for m in events(result, "n"))
