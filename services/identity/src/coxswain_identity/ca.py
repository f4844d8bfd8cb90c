"""The certificate authority: read from its Secret, or created there when the mode allows it.

Every replica is stateless and reads the same Secret (spec 001: "issuance needs no shared state
beyond the one CA Secret all replicas already read"), so this module has no cache of its own: it
turns a Secret's data into an `Authority` and, in `auto` mode, creates the Secret when it is
absent. Several replicas may start at once: each generates a CA, the API server's AlreadyExists
decides which one was first, and the losers re-read and use the winner's. `ca_watch` follows the
Secret afterwards; `service` swaps the Authority in.
"""

from __future__ import annotations

import base64
import datetime
import enum
import hashlib
import logging
from dataclasses import dataclass
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import NameOID

from coxswain_identity import errors, kube

log = logging.getLogger(__name__)

SigningKey = ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey

# A self-created CA lives a year; SVIDs (24 h) and the serving certificate never outlive it.
AUTO_CA_VALIDITY = datetime.timedelta(days=365)
AUTO_CA_NAME = "coxswain discovery CA"
TLS_SECRET_TYPE = "kubernetes.io/tls"  # noqa: S105 - a Secret type, not a password


class Mode(enum.StrEnum):
    AUTO = "auto"  # use the Secret, creating a self-signed CA in it when absent
    EXTERNAL = "external"  # use the Secret the operator provides; without it, serve nothing


@dataclass(frozen=True, slots=True)
class ObjectRef:
    """A namespaced object's name, written `namespace/name` on the command line."""

    namespace: str
    name: str

    @classmethod
    def parse(cls, text: str) -> ObjectRef:
        namespace, sep, name = text.partition("/")
        if not sep or not namespace or not name or "/" in name:
            raise ValueError(f"expected namespace/name, got {text!r}")
        return cls(namespace, name)

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True, slots=True)
class Authority:
    """A CA that can sign: its certificate, its key, and what clients should trust."""

    certificate: x509.Certificate  # signs SVIDs and the serving certificate
    key: SigningKey  # the certificate's private key
    intermediates_pem: bytes  # tls.crt after its first certificate: sent after each leaf
    bundle_pem: bytes  # the trust bundle: the Secret's ca.crt if it has one, else the CA itself

    @property
    def certificate_pem(self) -> bytes:
        return self.certificate.public_bytes(serialization.Encoding.PEM)

    @property
    def fingerprint(self) -> str:
        """Identifies this CA across reloads: a Secret rewrite with the same CA is no change."""
        digest = hashlib.sha256(self.certificate.public_bytes(serialization.Encoding.DER))
        return digest.hexdigest()[:16]

    @property
    def not_after(self) -> datetime.datetime:
        return self.certificate.not_valid_after_utc


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


def from_secret_data(data: dict[str, str] | None, *, now: datetime.datetime) -> Authority:
    """Parse a kubernetes.io/tls Secret's (base64) data; `errors.InvalidCa` says what is wrong."""
    data = data or {}
    try:
        chain = x509.load_pem_x509_certificates(base64.b64decode(data.get("tls.crt", "")))
        key = serialization.load_pem_private_key(base64.b64decode(data.get("tls.key", "")), None)
        extra = base64.b64decode(data.get("ca.crt", ""))
    except ValueError as exc:
        raise errors.InvalidCa(f"tls.crt or tls.key cannot be read: {exc}") from exc
    if not isinstance(key, ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey):
        raise errors.InvalidCa("tls.key must be an EC or RSA key")
    certificate = chain[0]
    _check_is_ca(certificate, key, now=now)
    rest = b"".join(c.public_bytes(serialization.Encoding.PEM) for c in chain[1:])
    bundle = (
        extra.strip() + b"\n"
        if extra.strip()
        else chain[0].public_bytes(serialization.Encoding.PEM)
    )
    return Authority(certificate, key, rest, bundle)


def _check_is_ca(certificate: x509.Certificate, key: SigningKey, *, now: datetime.datetime) -> None:
    try:
        constraints = certificate.extensions.get_extension_for_class(x509.BasicConstraints).value
    except x509.ExtensionNotFound:
        constraints = None
    if constraints is None or not constraints.ca:
        raise errors.InvalidCa("tls.crt is not a CA certificate (basicConstraints CA:TRUE)")
    public = serialization.PublicFormat.SubjectPublicKeyInfo
    if certificate.public_key().public_bytes(
        serialization.Encoding.DER, public
    ) != key.public_key().public_bytes(serialization.Encoding.DER, public):
        raise errors.InvalidCa("tls.key does not match tls.crt")
    if certificate.not_valid_after_utc <= now:
        raise errors.InvalidCa(f"the CA expired at {certificate.not_valid_after_utc.isoformat()}")


def generate(*, now: datetime.datetime | None = None) -> Authority:
    """A fresh self-signed P-256 CA, for `auto` mode."""
    now = now or _now()
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, AUTO_CA_NAME)])
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + AUTO_CA_VALIDITY)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(_ca_key_usage(), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    pem = certificate.public_bytes(serialization.Encoding.PEM)
    return Authority(certificate, key, b"", pem)


def _ca_key_usage() -> x509.KeyUsage:
    return x509.KeyUsage(
        digital_signature=True,
        content_commitment=False,
        key_encipherment=False,
        data_encipherment=False,
        key_agreement=False,
        key_cert_sign=True,
        crl_sign=True,
        encipher_only=False,
        decipher_only=False,
    )


def secret_body(ref: ObjectRef, authority: Authority) -> dict[str, Any]:
    key_pem = authority.key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": TLS_SECRET_TYPE,
        "metadata": {
            "name": ref.name,
            "namespace": ref.namespace,
            "labels": {"app.kubernetes.io/managed-by": "coxswain-identity"},
        },
        "data": {
            "tls.crt": base64.b64encode(authority.certificate_pem).decode(),
            "tls.key": base64.b64encode(key_pem).decode(),
        },
    }


def read(core: Any, ref: ObjectRef) -> Authority:
    """Blocking: the Authority in the Secret; `errors.CaMissing` when there is no Secret."""
    try:
        secret = kube.blocking(core.read_namespaced_secret, ref.name, ref.namespace)
    except kube.ApiException as exc:
        if kube.status_of(exc) == 404:
            raise errors.CaMissing(f"CA Secret {ref} not found") from exc
        raise errors.Unavailable(f"reading CA Secret {ref}: {exc.status} {exc.reason}") from exc
    return from_secret_data(secret.data, now=_now())


def create(core: Any, ref: ObjectRef) -> Authority:
    """Blocking, `auto` mode: create a CA in the Secret, or adopt the one a peer created first."""
    try:
        kube.blocking(core.create_namespaced_secret, ref.namespace, secret_body(ref, generate()))
        log.info("certificate authority created", extra={"fields": {"secret": str(ref)}})
    except kube.ApiException as exc:
        # AlreadyExists is the arbiter between replicas starting together: whoever lost
        # re-reads and uses the winner's CA, so every replica ends up with the same one.
        if kube.status_of(exc) != 409:
            raise errors.Unavailable(
                f"creating CA Secret {ref}: {exc.status} {exc.reason}"
            ) from exc
        log.info("CA Secret created by a peer first", extra={"fields": {"secret": str(ref)}})
    return read(core, ref)
