"""CSR rules and SVID shape, as pure functions: no network.

Covers which keys a CSR may carry (P-256, P-384, RSA >= 2048; not P-521, RSA-1024, Ed25519),
unparseable and tampered requests, and what `sign` makes: the SPIFFE ID as the only name, end
entity, both EKUs, and a lifetime capped by the CA's own expiry. The gRPC path is in
issuance_test.py.
"""

from __future__ import annotations

import datetime
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa

from coxswain_identity import ca, csr, errors
from coxswain_identity.conftest import make_csr

NOW = datetime.datetime.now(datetime.UTC)
URI = "spiffe://cluster.local/ns/coxswain-system/sa/coxswain-proxy"


def _rsa(bits: int) -> Any:
    return rsa.generate_private_key(public_exponent=65537, key_size=bits)


def _ed25519_csr() -> bytes:
    key = ed25519.Ed25519PrivateKey.generate()
    request = x509.CertificateSigningRequestBuilder().subject_name(x509.Name([])).sign(key, None)
    return request.public_bytes(serialization.Encoding.PEM)


@pytest.mark.parametrize(
    "pem",
    [
        pytest.param(lambda: make_csr(ec.generate_private_key(ec.SECP256R1())), id="p256"),
        pytest.param(lambda: make_csr(ec.generate_private_key(ec.SECP384R1())), id="p384"),
        pytest.param(lambda: make_csr(_rsa(2048)), id="rsa-2048"),
    ],
)
def test_accepts_allowed_keys(pem: Any) -> None:
    csr.check(pem())


@pytest.mark.parametrize(
    ("pem", "detail"),
    [
        pytest.param(lambda: b"", "empty", id="empty"),
        pytest.param(lambda: b"hello", "not a PEM", id="not-pem"),
        pytest.param(lambda: b"x" * 20_000, "larger than", id="oversized"),
        pytest.param(
            lambda: make_csr(ec.generate_private_key(ec.SECP521R1())), "secp521r1", id="p521"
        ),
        pytest.param(lambda: make_csr(_rsa(1024)), "1024 bits", id="rsa-1024"),
        pytest.param(_ed25519_csr, "Ed25519", id="ed25519"),
    ],
)
def test_refuses_unusable_requests(pem: Any, detail: str) -> None:
    with pytest.raises(errors.InvalidCsr, match=detail):
        csr.check(pem())


def test_sign_ignores_every_name_the_csr_asks_for() -> None:
    authority = ca.generate(now=NOW)
    request = csr.check(make_csr(dns=("a.example",), uris=("spiffe://x/y",), cn="admin"))
    svid = csr.sign(request, authority, URI, ttl=datetime.timedelta(hours=1), now=NOW)
    names = svid.certificate.extensions.get_extension_for_class(x509.SubjectAlternativeName)
    assert list(names.value) == [x509.UniformResourceIdentifier(URI)]
    assert names.critical, "an empty subject needs a critical SAN (RFC 5280 4.2.1.6)"
    constraints = svid.certificate.extensions.get_extension_for_class(x509.BasicConstraints)
    assert constraints.value.ca is False
    assert svid.certificate.not_valid_after_utc == (NOW + datetime.timedelta(hours=1)).replace(
        microsecond=0
    )


def test_sign_never_outlives_the_ca() -> None:
    authority = ca.generate(now=NOW - ca.AUTO_CA_VALIDITY + datetime.timedelta(hours=2))
    request = csr.check(make_csr())
    svid = csr.sign(request, authority, URI, ttl=datetime.timedelta(hours=24), now=NOW)
    assert svid.certificate.not_valid_after_utc == authority.not_after
