"""TLS Secrets to certificates a proxy can serve, and the names each certificate carries; CA
bundles (`ca.crt`) to the trust a proxy loads.

A certificate never changes a listener's hostname: a listener with a hostname serves its
certificate for that name; a hostless listener serves it for the DNS names the certificate
itself carries (spec 003: "Hostless HTTPS listeners merge whatever their certificates, each
selected by the names it carries").

A CA bundle is the `ca.crt` key of a ConfigMap (as written) or of a Secret (base64, as Secret
data is), read whole: every certificate in it is trusted, and a bundle none of which parses is
refused. Both a Gateway's frontend validation and a BackendTLSPolicy read them here.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass

from cryptography import x509
from cryptography.hazmat.primitives import serialization

from coxswain_controller.translate.inputs import Obj, name, namespace

__all__ = ["CA_KINDS", "Certificate", "load_ca_bundle", "load_tls_secret"]

CA_KINDS = ("ConfigMap", "Secret")  # the kinds a CA bundle reference may name (core group)


@dataclass(frozen=True, slots=True)
class Certificate:
    source: str  # "<namespace>/<name>" of the Secret
    chain_pem: bytes
    key_pem: bytes
    dns_names: tuple[str, ...]  # the names the certificate carries, lower-cased


def load_tls_secret(secret: Obj) -> Certificate | str:
    """The certificate in a kubernetes.io/tls Secret, or why it cannot be used."""
    where = f"Secret {namespace(secret)}/{name(secret)}"
    if secret.get("type") != "kubernetes.io/tls":
        return f"{where} is not of type kubernetes.io/tls"
    data = secret.get("data") or {}
    try:
        chain = base64.b64decode(data.get("tls.crt", ""), validate=True)
        key = base64.b64decode(data.get("tls.key", ""), validate=True)
        certificate = x509.load_pem_x509_certificate(chain)
        serialization.load_pem_private_key(key, password=None)
    except (ValueError, TypeError, binascii.Error) as err:
        return f"{where} holds no usable certificate and key: {err}"
    try:
        sans = certificate.extensions.get_extension_for_class(x509.SubjectAlternativeName)
        names = tuple(sorted({n.lower() for n in sans.value.get_values_for_type(x509.DNSName)}))
    except x509.ExtensionNotFound:
        names = ()
    return Certificate(f"{namespace(secret)}/{name(secret)}", chain, key, names)


def load_ca_bundle(holder: Obj, kind: str) -> bytes | str:
    """The PEM certificates in a ConfigMap's or Secret's `ca.crt`, or why there are none."""
    where = f"{kind} {namespace(holder)}/{name(holder)}"
    raw = (holder.get("data") or {}).get("ca.crt")
    if not raw:
        return f"{where} has no ca.crt"
    try:
        pem = base64.b64decode(raw, validate=True) if kind == "Secret" else str(raw).encode()
        certificates = x509.load_pem_x509_certificates(pem)
    except (ValueError, TypeError, binascii.Error) as err:
        return f"{where} holds no usable CA certificate in ca.crt: {err}"
    return b"".join(c.public_bytes(serialization.Encoding.PEM) for c in certificates)
