"""The Secrets an Ingress's TLS annotations name, read: proxy-ssl-secret and auth-tls-secret.

Where it sits: `ingresses.stages` reads each Ingress's here right after its plan (beside the
basic-auth Secret, `policies.load_secrets`), so a Secret that is missing, of another
namespace, or holding nothing usable refuses the Ingress before any path is lowered.

Both are ingress-nginx's "namespace/secretName". ingress-nginx reads only the Ingress's own
namespace unless its `allow-cross-namespace-resources` flag is set ("cross namespace secrets
are not supported"), and so does Coxswain: a Secret of another namespace is refused.

- proxy-ssl-secret: `ca.crt`, the whole of the trust for the backend (as a BackendTLSPolicy's
  caCertificateRefs), and, when present, `tls.crt` and `tls.key`: the certificate ingress-nginx
  presents to the backend (proxy_ssl_certificate), which the proxy presents too. Either Secret
  type will do (an Opaque one, or a kubernetes.io/tls one carrying ca.crt).
- auth-tls-secret: `ca.crt`, the CA bundle client certificates are verified against.
"""

from __future__ import annotations

import base64
import binascii

from cryptography import x509
from cryptography.hazmat.primitives import serialization

from coxswain_controller.translate.gateways.certificates import load_ca_bundle
from coxswain_controller.translate.ingress.plans import IngressPlan
from coxswain_controller.translate.inputs import Inputs, Obj, namespace
from coxswain_controller.translate.inputs import name as name_of
from coxswain_routing import TlsCertificate, UpstreamTLS

__all__ = ["load_tls_secrets"]


def load_tls_secrets(plan: IngressPlan, inputs: Inputs) -> None:
    """Read the TLS annotations' Secrets into `plan`, or refuse it saying why."""
    backend = plan.policy.backend_tls
    if backend is not None:
        secret = _secret(plan, inputs, "proxy-ssl-secret", backend.namespace, backend.secret)
        if secret is not None:
            loaded = _upstream(secret, backend.name)
            if isinstance(loaded, str):
                plan.refusals.append(f"proxy-ssl-secret {_where(secret)}: {loaded}")
            else:
                plan.backend_tls = loaded
    client = plan.policy.client_tls
    if client is not None:
        secret = _secret(plan, inputs, "auth-tls-secret", client.namespace, client.secret)
        if secret is not None:
            bundle = load_ca_bundle(secret, "Secret")
            if isinstance(bundle, str):
                plan.refusals.append(f"auth-tls-secret: {bundle}")
            else:
                plan.client_ca = (bundle, f"Secret {_where(secret)}")


def _where(secret: Obj) -> str:
    return f"{namespace(secret)}/{name_of(secret)}"


def _secret(plan: IngressPlan, inputs: Inputs, key: str, ns: str, name: str) -> Obj | None:
    own = namespace(plan.obj)
    if ns and ns != own:
        plan.refusals.append(
            f"{key} names a Secret of namespace {ns}: only the Ingress's own namespace ({own}) "
            "is read, as ingress-nginx reads it without allow-cross-namespace-resources"
        )
        return None
    secret = inputs.get("Secret", own, name)
    if secret is None:
        plan.refusals.append(f"{key} {own}/{name} not found")
    return secret


def _upstream(secret: Obj, name: str) -> UpstreamTLS | str:
    bundle = load_ca_bundle(secret, "Secret")
    if isinstance(bundle, str):
        return "has no CA to verify the backend with: " + bundle
    data = secret.get("data") or {}
    if not data.get("tls.crt") and not data.get("tls.key"):
        return UpstreamTLS(name, bundle)
    pair = _key_pair(data)
    if isinstance(pair, str):
        return pair
    client = TlsCertificate((), pair[0], pair[1], _where(secret))
    return UpstreamTLS(name, bundle, client_certificate=client)


def _key_pair(data: dict[str, object]) -> tuple[bytes, bytes] | str:
    """tls.crt and tls.key, checked as a certificate and its private key."""
    try:
        chain = base64.b64decode(str(data.get("tls.crt", "")), validate=True)
        key = base64.b64decode(str(data.get("tls.key", "")), validate=True)
        certificate = x509.load_pem_x509_certificate(chain)
        private = serialization.load_pem_private_key(key, password=None)
    except (ValueError, TypeError, binascii.Error) as err:
        return f"its tls.crt and tls.key are not a certificate and its key: {err}"
    public = certificate.public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    mine = private.public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    if public != mine:
        return "its tls.key is not the key of its tls.crt"
    return chain, key
