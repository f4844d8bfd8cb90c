"""CSR checks and SVID signing: what a proxy asks for is checked, and then mostly ignored.

The CSR only proves possession of the key the SVID will certify. Every name in it (subject,
SANs, extensions) is ignored: the SVID's one name is the SPIFFE ID of the ServiceAccount the
token proved, and its lifetime is ours to choose, never beyond the CA's own.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID

from coxswain_identity import errors
from coxswain_identity.ca import Authority

LeafKey = ec.EllipticCurvePublicKey | rsa.RSAPublicKey
# "Checks the CSR (PEM PKCS#10; key type and size: EC P-256/P-384 or RSA >= 2048)" (issue 5).
ALLOWED_CURVES = (ec.SECP256R1, ec.SECP384R1)
MIN_RSA_BITS = 2048
MAX_CSR_BYTES = 16 * 1024
# A little backdating absorbs clock skew between us and the peers that verify the SVID.
CLOCK_SKEW = datetime.timedelta(seconds=30)


@dataclass(frozen=True, slots=True)
class Svid:
    certificate: x509.Certificate  # the leaf, its only SAN the SPIFFE ID
    chain_pem: bytes  # the leaf, then the CA's intermediates (if any)


def spiffe_id(trust_domain: str, namespace: str, service_account: str) -> str:
    return f"spiffe://{trust_domain}/ns/{namespace}/sa/{service_account}"


def check(pem: bytes) -> x509.CertificateSigningRequest:
    """The parsed CSR, or `errors.InvalidCsr` saying what is wrong with it."""
    if not pem:
        raise errors.InvalidCsr("csr_pem is empty")
    if len(pem) > MAX_CSR_BYTES:
        raise errors.InvalidCsr(f"csr_pem is larger than {MAX_CSR_BYTES} bytes")
    try:
        csr = x509.load_pem_x509_csr(pem)
    except ValueError as exc:
        # The parser's own text stays out of the answer: it is third-party and may quote input.
        raise errors.InvalidCsr("csr_pem is not a PEM PKCS#10 request") from exc
    _check_key(csr)
    if not csr.is_signature_valid:
        raise errors.InvalidCsr("the CSR's signature does not verify with its public key")
    return csr


def _check_key(csr: x509.CertificateSigningRequest) -> None:
    try:
        key = csr.public_key()
    except ValueError as exc:
        raise errors.InvalidCsr("the CSR's public key cannot be read") from exc
    if isinstance(key, ec.EllipticCurvePublicKey):
        if not isinstance(key.curve, ALLOWED_CURVES):
            raise errors.InvalidCsr(f"EC curve {key.curve.name} not allowed (P-256 or P-384)")
    elif isinstance(key, rsa.RSAPublicKey):
        if key.key_size < MIN_RSA_BITS:
            raise errors.InvalidCsr(f"RSA key of {key.key_size} bits (at least {MIN_RSA_BITS})")
    else:
        raise errors.InvalidCsr(f"key type {type(key).__name__} not allowed (EC or RSA)")


def sign(
    csr: x509.CertificateSigningRequest,
    authority: Authority,
    uri: str,
    *,
    ttl: datetime.timedelta,
    now: datetime.datetime,
) -> Svid:
    """An SVID for the CSR's key: `uri` its only name, client+server auth, capped by the CA."""
    key = csr.public_key()
    if not isinstance(key, LeafKey):  # `check` let it through: a bug, not the caller's fault
        raise TypeError(f"cannot certify a {type(key).__name__}")
    not_after = min(now + ttl, authority.not_after)
    certificate = (
        leaf_builder(authority, key, not_before=now - CLOCK_SKEW, not_after=not_after)
        .add_extension(x509.SubjectAlternativeName([x509.UniformResourceIdentifier(uri)]), True)
        .sign(authority.key, hashes.SHA256())
    )
    chain = certificate.public_bytes(serialization.Encoding.PEM) + authority.intermediates_pem
    return Svid(certificate, chain)


def leaf_builder(
    authority: Authority,
    public_key: LeafKey,
    *,
    not_before: datetime.datetime,
    not_after: datetime.datetime,
) -> x509.CertificateBuilder:
    """What every leaf we sign shares: empty subject, end entity, client+server auth EKU."""
    is_rsa = isinstance(public_key, rsa.RSAPublicKey)
    return (
        x509.CertificateBuilder()
        .subject_name(x509.Name([]))
        .issuer_name(authority.certificate.subject)
        .public_key(public_key)
        .serial_number(x509.random_serial_number())
        .not_valid_before(not_before)
        .not_valid_after(not_after)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(_leaf_key_usage(key_encipherment=is_rsa), critical=True)
        .add_extension(
            x509.ExtendedKeyUsage(
                [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]
            ),
            critical=False,
        )
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(authority.key.public_key()),
            critical=False,
        )
    )


def _leaf_key_usage(*, key_encipherment: bool) -> x509.KeyUsage:
    return x509.KeyUsage(
        digital_signature=True,
        content_commitment=False,
        key_encipherment=key_encipherment,
        data_encipherment=False,
        key_agreement=False,
        key_cert_sign=False,
        crl_sign=False,
        encipher_only=False,
        decipher_only=False,
    )
