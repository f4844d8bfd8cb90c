"""The gRPC listener's own certificate, and credentials that change under a running server.

The listener is bound once, at start, and never restarted: `grpc.dynamic_ssl_server_credentials`
asks `ServingCredentials` for a new certificate before each handshake, so a CA change takes
effect on the next connection while calls in flight finish on theirs. Until a CA is loaded the
listener presents a throwaway self-signed certificate that no trust bundle holds, so a proxy's
handshake fails (UNAVAILABLE) and the port can still be bound and announced at start.
"""

from __future__ import annotations

import datetime
import ipaddress
import threading
from collections.abc import Sequence

import grpc
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from coxswain_identity import csr
from coxswain_identity.ca import Authority

DEFAULT_DNS = ("coxswain-controller-discovery-bootstrap.coxswain-system.svc", "localhost")
SERVING_IPS = ("127.0.0.1",)


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def issue(
    authority: Authority, dns: Sequence[str], *, now: datetime.datetime
) -> tuple[bytes, bytes]:
    """(key PEM, chain PEM) of a serving certificate for `dns` and 127.0.0.1, until the CA ends.

    It lives as long as the CA: it is re-issued whenever the CA changes and at every start.
    """
    key = ec.generate_private_key(ec.SECP256R1())
    names: list[x509.GeneralName] = [x509.DNSName(name) for name in dns]
    names += [x509.IPAddress(ipaddress.ip_address(ip)) for ip in SERVING_IPS]
    certificate = (
        csr.leaf_builder(
            authority,
            key.public_key(),
            not_before=now - csr.CLOCK_SKEW,
            not_after=authority.not_after,
        )
        .add_extension(x509.SubjectAlternativeName(names), critical=True)
        .sign(authority.key, hashes.SHA256())
    )
    chain = certificate.public_bytes(serialization.Encoding.PEM) + authority.intermediates_pem
    return _key_pem(key), chain


def placeholder(*, now: datetime.datetime) -> tuple[bytes, bytes]:
    """A self-signed certificate nobody trusts: what the listener shows before any CA exists."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "coxswain-identity: no CA loaded")])
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - csr.CLOCK_SKEW)
        .not_valid_after(now + datetime.timedelta(days=1))
        .sign(key, hashes.SHA256())
    )
    return _key_pem(key), certificate.public_bytes(serialization.Encoding.PEM)


class ServingCredentials:
    """Server credentials whose certificate `update()` replaces for the next handshake."""

    def __init__(self, key_pem: bytes, chain_pem: bytes) -> None:
        self._initial = _config(key_pem, chain_pem)
        # Read by gRPC's threads, written from the event loop.
        self._lock = threading.Lock()
        self._pending: object | None = None

    def credentials(self) -> grpc.ServerCredentials:
        return grpc.dynamic_ssl_server_credentials(
            self._initial, self._fetch, require_client_authentication=False
        )

    def update(self, key_pem: bytes, chain_pem: bytes) -> None:
        with self._lock:
            self._pending = _config(key_pem, chain_pem)

    def _fetch(self) -> object | None:
        # gRPC calls this before each handshake; None keeps the certificate it has.
        with self._lock:
            pending, self._pending = self._pending, None
        return pending


def _config(key_pem: bytes, chain_pem: bytes) -> object:
    return grpc.ssl_server_certificate_configuration([(key_pem, chain_pem)])
