"""SVID bootstrap: token and CSR in, a verified SPIFFE certificate for our own key out.

Where it sits: the discovery client calls `SvidIssuer.obtain()` before its first dial and again
at each SVID's half-life; the result is the client certificate of the mTLS discovery stream.
Each call reads the token and the trust bundle afresh, because the kubelet rotates the
projected token and the bundle ConfigMap may gain a new CA.

Why the shape: docs/discovery.md, "The proxy's side", step 1: "Read the projected token, make a
P-256 key and a CSR, call IssueSvid on --discovery-bootstrap-endpoint (server-auth TLS, verified
against the trust bundle ...), and verify the returned SVID chains to that bundle." The chain
is checked by walking issuer signatures to a bundle certificate rather than with a web-PKI
path validator: an SVID is not a web certificate, and what the spec asks is exactly this walk,
the validity window, one SPIFFE URI SAN, and that the certificate is for the key we made. The
trust bundle in the response is never trusted: only the mounted one is.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import grpc
import grpc.aio
from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from coxswain_proto import identity, rpc
from coxswain_proxy.discovery import endpoints, failures
from coxswain_proxy.discovery.clock import Clock, SystemClock


@dataclass(frozen=True, slots=True)
class Svid:
    """A verified SVID and its key, PEM-encoded for grpc's credentials."""

    chain_pem: bytes  # the leaf, then any intermediates, as the identity service sent them
    key_pem: bytes  # PKCS#8, unencrypted: it lives only in this process's memory
    trust_bundle_pem: bytes  # the mounted bundle it was verified against: the stream's roots
    spiffe_id: str  # the leaf's one URI SAN
    not_before: float  # seconds since the epoch
    not_after: float  # seconds since the epoch

    @property
    def renew_at(self) -> float:
        """Half way through its lifetime (docs/discovery.md, step 4)."""
        return self.not_before + (self.not_after - self.not_before) / 2


@dataclass(frozen=True, slots=True)
class IssuerConfig:
    endpoints: tuple[endpoints.Endpoint, ...]  # --discovery-bootstrap-endpoint
    token_path: Path  # the projected ServiceAccount token
    trust_bundle_path: Path  # the CA certificates that sign SVIDs and the controller's cert
    server_name: str | None  # the name the identity service's certificate must carry
    timeout: float = 10.0  # seconds for one IssueSvid call


class SvidIssuer:
    """Obtains SVIDs, one attempt per call, rotating through the bootstrap endpoints."""

    def __init__(self, config: IssuerConfig, clock: Clock | None = None) -> None:
        self._config = config
        self._clock = clock or SystemClock()
        self._rotation = endpoints.Rotation(config.endpoints)

    async def obtain(self) -> Svid:
        """A fresh, verified SVID, or a `CredentialsError` saying what went wrong."""
        token = read_token(self._config.token_path)
        bundle_pem, bundle = read_bundle(self._config.trust_bundle_path)
        key, csr_pem = new_key_and_csr()
        request = identity.IssueSvidRequest(token=token, csr_pem=csr_pem)
        endpoint = self._rotation.current
        try:
            response = await _issue(endpoint, request, bundle_pem, self._config)
        except failures.IssuanceFailed:
            self._rotation.advance()
            raise
        return verify(response.certificate_chain_pem, key, bundle_pem, bundle, self._clock.now())

    def trust_bundle(self, fallback: bytes) -> bytes:
        """The mounted bundle as it is now (it may have gained a CA), else `fallback`."""
        try:
            return read_bundle(self._config.trust_bundle_path)[0]
        except failures.TrustBundleUnreadable:
            return fallback


def read_token(path: Path) -> str:
    try:
        token = path.read_text().strip()
    except OSError as exc:
        raise failures.TokenUnreadable(f"token {path}: {exc.strerror or exc}") from exc
    if not token:
        raise failures.TokenUnreadable(f"token {path} is empty")
    return token


def read_bundle(path: Path) -> tuple[bytes, list[x509.Certificate]]:
    try:
        pem = path.read_bytes()
        certificates = x509.load_pem_x509_certificates(pem)
    except OSError as exc:
        raise failures.TrustBundleUnreadable(f"trust bundle {path}: {exc.strerror or exc}") from exc
    except ValueError as exc:
        raise failures.TrustBundleUnreadable(f"trust bundle {path}: {exc}") from exc
    return pem, certificates


def new_key_and_csr() -> tuple[ec.EllipticCurvePrivateKey, bytes]:
    """A P-256 key and a CSR for it; the identity service ignores the names a CSR asks for."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "coxswain-proxy")])
    csr = x509.CertificateSigningRequestBuilder().subject_name(name).sign(key, hashes.SHA256())
    return key, csr.public_bytes(serialization.Encoding.PEM)


async def _issue(
    endpoint: endpoints.Endpoint,
    request: identity.IssueSvidRequest,
    bundle_pem: bytes,
    config: IssuerConfig,
) -> identity.IssueSvidResponse:
    # Server-auth TLS only: the proxy has no certificate yet (identity.proto).
    credentials = grpc.ssl_channel_credentials(root_certificates=bundle_pem)
    options = endpoints.channel_options(config.server_name)
    async with grpc.aio.secure_channel(endpoint.target, credentials, options=options) as channel:
        try:
            response = await rpc.issue_svid(channel)(request, timeout=config.timeout)
        except grpc.aio.AioRpcError as exc:
            detail = f"IssueSvid on {endpoint}: {exc.code().name}: {exc.details()}"
            raise failures.IssuanceFailed(detail) from exc
    assert isinstance(response, identity.IssueSvidResponse)
    return response


def verify(
    chain_pem: bytes,
    key: ec.EllipticCurvePrivateKey,
    bundle_pem: bytes,
    bundle: Sequence[x509.Certificate],
    now: float,
) -> Svid:
    """The SVID in `chain_pem` if it is ours, current, a SPIFFE SVID, and chains to `bundle`."""
    try:
        chain = x509.load_pem_x509_certificates(chain_pem)
    except ValueError as exc:
        raise failures.SvidRejected(f"the returned chain does not parse: {exc}") from exc
    leaf, intermediates = chain[0], chain[1:]
    if _public_der(leaf.public_key()) != _public_der(key.public_key()):
        raise failures.SvidRejected("the returned certificate is not for the key this proxy sent")
    spiffe_id = _spiffe_id(leaf)
    _chain_to_bundle(leaf, intermediates, bundle, now)
    key_pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    return Svid(
        chain_pem=chain_pem,
        key_pem=key_pem,
        trust_bundle_pem=bundle_pem,
        spiffe_id=spiffe_id,
        not_before=leaf.not_valid_before_utc.timestamp(),
        not_after=leaf.not_valid_after_utc.timestamp(),
    )


def _public_der(public_key: object) -> bytes:
    if not isinstance(public_key, ec.EllipticCurvePublicKey):
        return b""
    return public_key.public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )


def _spiffe_id(leaf: x509.Certificate) -> str:
    # docs/discovery.md, "The channel": "one URI SAN spiffe://<trust-domain>/ns/<namespace>/
    # sa/<serviceaccount>".
    try:
        san = leaf.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound as exc:
        raise failures.SvidRejected("the returned certificate has no SAN") from exc
    uris = san.get_values_for_type(x509.UniformResourceIdentifier)
    if len(uris) != 1 or not uris[0].startswith("spiffe://"):
        raise failures.SvidRejected(f"the returned certificate needs one spiffe:// URI SAN: {uris}")
    return uris[0]


def _chain_to_bundle(
    leaf: x509.Certificate,
    intermediates: Sequence[x509.Certificate],
    bundle: Sequence[x509.Certificate],
    now: float,
) -> None:
    current = leaf
    # Each step climbs one issuer, so a chain longer than the intermediates plus one loops.
    for _ in range(len(intermediates) + 1):
        _check_window(current, now)
        for root in bundle:
            if _issued_by(current, root):
                _check_window(root, now)
                return
        parent = next((c for c in intermediates if _is_ca(c) and _issued_by(current, c)), None)
        if parent is None:
            break
        current = parent
    raise failures.SvidRejected("the returned certificate does not chain to the trust bundle")


def _issued_by(certificate: x509.Certificate, issuer: x509.Certificate) -> bool:
    try:
        certificate.verify_directly_issued_by(issuer)
    except (ValueError, TypeError, InvalidSignature):
        return False
    return True


def _is_ca(certificate: x509.Certificate) -> bool:
    try:
        return certificate.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    except x509.ExtensionNotFound:
        return False


def _check_window(certificate: x509.Certificate, now: float) -> None:
    start = certificate.not_valid_before_utc.timestamp()
    end = certificate.not_valid_after_utc.timestamp()
    if not start <= now <= end:
        subject = certificate.subject.rfc4514_string() or "(no subject)"
        raise failures.SvidRejected(f"certificate {subject} is not valid now")
