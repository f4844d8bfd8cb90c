"""TLS Secrets to certificates a proxy can serve, and the names each certificate carries; CA
bundles (`ca.crt`) to the trust a proxy loads.

A certificate never changes a listener's hostname: a listener with a hostname serves its
certificate for that name; a hostless listener serves it for the DNS names the certificate
itself carries (spec 003: "Hostless HTTPS listeners merge whatever their certificates, each
selected by the names it carries").

A CA bundle is the `ca.crt` key of a ConfigMap (as written) or of a Secret (base64, as Secret
data is), read whole: every certificate in it is trusted, and a bundle none of which parses is
refused. Both a Gateway's frontend validation and a BackendTLSPolicy read them here.

`certificate_ref` reads one listener certificateRef of a Gateway or of a ListenerSet, from its
owner's namespace: GEP-1713, "A ListenerSet must be able to reference a secret/backend in the
same namespace as itself without a ReferenceGrant", and "When a ReferenceGrant is applied to a
Gateway it MUST NOT be inherited by child ListenerSets" (nor the other way round), so a grant
must name the owner's own kind.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import serialization

from coxswain_controller.translate.backends.grants import Grants
from coxswain_controller.translate.conditions import Reason
from coxswain_controller.translate.inputs import Inputs, Obj, name, namespace

__all__ = ["CA_KINDS", "Certificate", "certificate_ref", "load_ca_bundle", "load_tls_secret"]

GATEWAY_GROUP = "gateway.networking.k8s.io"

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


def certificate_ref(
    inputs: Inputs, owner: Obj, owner_kind: str, ref: Mapping[str, Any], grants: Grants
) -> Certificate | tuple[Reason, str]:
    """The certificate one listener certificateRef of `owner` (a `owner_kind`) names, or the
    reason and message it cannot be used."""
    group, kind = ref.get("group") or "", ref.get("kind") or "Secret"
    secret_ns = ref.get("namespace") or namespace(owner)
    secret_name = str(ref.get("name", ""))
    if group or kind != "Secret":
        return (
            Reason.INVALID_CERTIFICATE_REF,
            f"certificateRef kind {group or 'core'}/{kind} is not supported",
        )
    if secret_ns != namespace(owner) and not grants.permits(
        from_group=GATEWAY_GROUP,
        from_kind=owner_kind,
        from_namespace=namespace(owner),
        to_kind="Secret",
        to_namespace=secret_ns,
        to_name=secret_name,
    ):
        return (
            Reason.REF_NOT_PERMITTED,
            f"no ReferenceGrant in {secret_ns} permits {owner_kind} from {namespace(owner)} "
            f"to Secret {secret_name}",
        )
    secret = inputs.get("Secret", secret_ns, secret_name)
    if secret is None:
        return Reason.INVALID_CERTIFICATE_REF, f"Secret {secret_ns}/{secret_name} not found"
    loaded = load_tls_secret(secret)
    if isinstance(loaded, str):
        return Reason.INVALID_CERTIFICATE_REF, loaded
    return loaded
