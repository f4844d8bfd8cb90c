"""Certificates made in tests: a throwaway CA, SVIDs, serving certificates.

Tests use real TLS with certificates minted here, never fixtures checked into the repo, so
every run exercises the real handshake with fresh keys (P-256: fast to generate).

    ca = CertificateAuthority.create("test CA")
    svid = ca.issue(uris=["spiffe://cluster.local/ns/coxswain-system/sa/coxswain-proxy"])
    server = ca.issue(dns=["localhost"], ips=["127.0.0.1"])
"""

from __future__ import annotations

import datetime
import ipaddress
import os
import ssl
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

__all__ = ["CertificateAuthority", "Issued", "client_context", "spiffe_id", "private_key_pem"]


def spiffe_id(trust_domain: str, namespace: str, service_account: str) -> str:
    return f"spiffe://{trust_domain}/ns/{namespace}/sa/{service_account}"


def private_key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


@dataclass(frozen=True)
class Issued:
    """A leaf certificate and its key, PEM-encoded, ready for an SSL context or grpc creds."""

    certificate_pem: bytes
    key_pem: bytes
    chain_pem: bytes  # the leaf followed by the issuing CA
    certificate: x509.Certificate

    def load_into(self, context: ssl.SSLContext) -> None:
        """The certificate and its key into `context`: `load_cert_chain` reads only files, so
        through a private temporary file, removed at once."""
        fd, path = tempfile.mkstemp(suffix=".pem")
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(self.chain_pem + b"\n" + self.key_pem)
            context.load_cert_chain(path)
        finally:
            os.unlink(path)


def client_context(
    trust: bytes, certificate: Issued | None = None, alpn: str = "http/1.1"
) -> ssl.SSLContext:
    """A TLS client's context verifying servers under the CA bundle `trust`, offering `alpn`,
    and presenting `certificate` when one is given."""
    context = ssl.create_default_context(cadata=trust.decode())
    context.set_alpn_protocols([alpn])
    if certificate is not None:
        certificate.load_into(context)
    return context


@dataclass(frozen=True)
class CertificateAuthority:
    key: ec.EllipticCurvePrivateKey
    certificate: x509.Certificate

    @property
    def certificate_pem(self) -> bytes:
        return self.certificate.public_bytes(serialization.Encoding.PEM)

    @property
    def key_pem(self) -> bytes:
        return private_key_pem(self.key)

    @classmethod
    def create(
        cls, common_name: str = "coxswain test CA", *, days: int = 1
    ) -> CertificateAuthority:
        key = ec.generate_private_key(ec.SECP256R1())
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
        now = _now()
        certificate = (
            x509.CertificateBuilder()
            .subject_name(name)
            .issuer_name(name)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=days))
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=True,
                    content_commitment=False,
                    key_encipherment=False,
                    data_encipherment=False,
                    key_agreement=False,
                    key_cert_sign=True,
                    crl_sign=True,
                    encipher_only=False,
                    decipher_only=False,
                ),
                critical=True,
            )
            .add_extension(
                x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False
            )
            .sign(key, hashes.SHA256())
        )
        return cls(key, certificate)

    def issue(
        self,
        *,
        uris: Sequence[str] = (),
        dns: Sequence[str] = (),
        ips: Sequence[str] = (),
        common_name: str = "",
        lifetime: datetime.timedelta = datetime.timedelta(hours=1),
        not_before: datetime.datetime | None = None,
    ) -> Issued:
        """A leaf certificate for client and server use with the given names."""
        key = ec.generate_private_key(ec.SECP256R1())
        start = not_before or _now() - datetime.timedelta(minutes=5)
        names: list[x509.GeneralName] = [x509.UniformResourceIdentifier(u) for u in uris]
        names += [x509.DNSName(d) for d in dns]
        names += [x509.IPAddress(ipaddress.ip_address(i)) for i in ips]
        builder = (
            x509.CertificateBuilder()
            .subject_name(
                x509.Name(
                    [x509.NameAttribute(NameOID.COMMON_NAME, common_name)] if common_name else []
                )
            )
            .issuer_name(self.certificate.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(start)
            .not_valid_after(start + lifetime)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(
                x509.ExtendedKeyUsage(
                    [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]
                ),
                critical=False,
            )
        )
        if names:
            builder = builder.add_extension(
                x509.SubjectAlternativeName(names), critical=bool(not common_name)
            )
        certificate = builder.sign(self.key, hashes.SHA256())
        pem = certificate.public_bytes(serialization.Encoding.PEM)
        return Issued(pem, private_key_pem(key), pem + self.certificate_pem, certificate)
