"""The discovery listener's TLS: a serving certificate minted from the CA, client certs required.

The controller signs its own serving certificate with the discovery CA (the same CA the
identity service issues SVIDs from), so proxies verify it against the trust bundle they
already mount. Client certificates are mandatory and must chain to that CA; SPIFFE identity
is checked per stream (`server`). The certificate is minted once at start: a rotated CA
reaches the controller when it restarts (see docs/security.md on rotation).
"""

from __future__ import annotations

import datetime
import ipaddress
from collections.abc import Sequence
from dataclasses import dataclass

import grpc
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID

__all__ = [
    "CertificateAuthority",
    "ServingCertificate",
    "server_credentials",
    "mint_serving_certificate",
]

SERVING_LIFETIME = datetime.timedelta(days=7)


@dataclass(frozen=True, slots=True)
class CertificateAuthority:
    certificate_pem: bytes
    key_pem: bytes


@dataclass(frozen=True, slots=True)
class ServingCertificate:
    chain_pem: bytes
    key_pem: bytes
    client_ca_pem: bytes


def mint_serving_certificate(
    ca: CertificateAuthority,
    *,
    dns_names: Sequence[str],
    ip_addresses: Sequence[str] = ("127.0.0.1",),
    spiffe_id: str = "",
) -> ServingCertificate:
    ca_cert = x509.load_pem_x509_certificate(ca.certificate_pem)
    ca_key = serialization.load_pem_private_key(ca.key_pem, password=None)
    if not isinstance(ca_key, ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey):
        raise ValueError("the CA key must be an EC or RSA private key")
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    names: list[x509.GeneralName] = [x509.DNSName(d) for d in dns_names]
    names += [x509.IPAddress(ipaddress.ip_address(i)) for i in ip_addresses]
    if spiffe_id:
        names.append(x509.UniformResourceIdentifier(spiffe_id))
    not_after = min(now + SERVING_LIFETIME, ca_cert.not_valid_after_utc)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([]))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(not_after)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.SubjectAlternativeName(names), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    chain = certificate.public_bytes(serialization.Encoding.PEM) + ca.certificate_pem
    key_pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    return ServingCertificate(chain, key_pem, ca.certificate_pem)


def server_credentials(certificate: ServingCertificate) -> grpc.ServerCredentials:
    """Server credentials requiring a client certificate chained to the CA."""
    return grpc.ssl_server_credentials(
        [(certificate.key_pem, certificate.chain_pem)],
        root_certificates=certificate.client_ca_pem,
        require_client_auth=True,
    )
