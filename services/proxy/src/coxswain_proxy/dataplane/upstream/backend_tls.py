"""TLS to upstreams a BackendTLSPolicy governs: one client context per policy, verified.

Spec 003 "BackendTLSPolicy": "validation.hostname is sent as the SNI and is the name the
certificate is verified against ... a bundle from caCertificateRefs is the whole of the trust for
that backend, so a certificate from a public authority is refused, and only a policy selecting
System trusts the system roots." Contexts are cached by the (frozen) `UpstreamTLS` value, so a
snapshot that keeps a policy keeps its context, and its pooled connections stay reusable.

Where it sits: `tables` asks `client_for` once per backend a policy governs, when it compiles a
snapshot; the `TlsClient` rides in that backend's origins (`picker.Origin`), so the pool dials
them over TLS (`picker.tls_arguments`). Serving TLS to clients is `dataplane.tls`.

Subject alternative names (the Gateway API's BackendTLSPolicySANValidation): "If SubjectAltNames
are specified, Hostname can be used for certificate selection but MUST NOT be used for
authentication", and the certificate "MUST have at least one Subject Alternate Name matching one
of the specified SubjectAltNames". The hostname is then only the SNI: OpenSSL's own name check is
off, the chain is still verified, and the SSL object the context makes (`_SanChecked`, the
context's `sslobject_class`, which the event loop's TLS transport creates through `wrap_bio`)
compares the verified certificate's DNS and URI names once its handshake completes, failing the
handshake (a connect failure) when none matches. A DNS name matches case-insensitively; a
certificate's `*.suffix` covers one label, as RFC 6125 §6.4.3 allows.

Client certificates (the Gateway API's GatewayBackendClientCertificate): the Gateway's
`spec.tls.backend.clientCertificateRef`, which the controller sends in the Gateway's
`GatewayListeners`, is loaded into the context and presented when the backend asks. It is part
of the cache key, so a rotated certificate makes a new context, hence new origins and new
connections, while the old ones finish what they carry.

An h2c or gRPC backend under a policy is HTTP/2 over TLS: its context offers only `h2` in ALPN
(RFC 9113 §3.2: "HTTP/2 over TLS uses the "h2" protocol identifier"), and the pool dials it with
`h2c.H2cConnection` (`picker.is_h2c`), `:scheme` https. One that picks no protocol is spoken to
in HTTP/2 all the same (prior knowledge, §3.3); one that speaks only HTTP/1.1 fails its
handshake or its preface, a connect failure (503), not a garbled exchange.
"""

from __future__ import annotations

import functools
import os
import ssl
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from typing import cast

from coxswain_routing import GatewayListeners, Resource, TlsCertificate, UpstreamTLS

__all__ = ["TlsClient", "client_certificates", "client_for"]


@dataclass(frozen=True, eq=False)
class TlsClient:
    """How to dial one TLS upstream: the context and the name to send and verify."""

    context: ssl.SSLContext
    sni: str
    h2: bool = False  # HTTP/2 over TLS (ALPN h2): dialled as `h2c.H2cConnection`


# The attribute of a SAN-checking context holding the names its peers must carry one of.
_SANS = "coxswain_subject_alt_names"


class _SanChecked(ssl.SSLObject):
    """An SSL object that, once its handshake is done, checks the peer's names itself."""

    def do_handshake(self) -> None:
        super().do_handshake()  # raises until done: the check runs once, on completion
        dns, uris = getattr(self.context, _SANS)
        peer = self.getpeercert() or {}
        names = cast("tuple[tuple[str, str], ...]", peer.get("subjectAltName", ()))
        if not any(_san_matches(kind, value, dns, uris) for kind, value in names):
            raise ssl.SSLCertVerificationError(
                f"the backend's certificate carries none of the names {[*dns, *uris]}"
            )


def _san_matches(kind: str, value: str, dns: tuple[str, ...], uris: tuple[str, ...]) -> bool:
    if kind == "URI":
        return value in uris
    if kind != "DNS":
        return False
    value = value.lower()
    if value in dns:
        return True
    # A certificate's "*.suffix" covers exactly one label (RFC 6125 §6.4.3).
    return value.startswith("*.") and any(
        "." in name and name.split(".", 1)[1] == value[2:] for name in dns
    )


def _present(context: ssl.SSLContext, certificate: TlsCertificate) -> None:
    """Load the client certificate; `load_cert_chain` reads only files, so the PEM goes
    through a private temporary file removed at once."""
    fd, path = tempfile.mkstemp(prefix="coxswain-client-", suffix=".pem")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(certificate.certificate_chain_pem + b"\n" + certificate.private_key_pem)
        context.load_cert_chain(path)
    finally:
        os.unlink(path)


@functools.lru_cache(maxsize=256)
def client_for(
    tls: UpstreamTLS, http2: bool = False, certificate: TlsCertificate | None = None
) -> TlsClient:
    """The context for one policy's backends (and the Gateway's client certificate, if any).

    Raises `ssl.SSLError` or `ValueError` for a bundle or certificate that cannot be loaded."""
    if tls.system_roots:
        context = ssl.create_default_context()
    else:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        context.load_verify_locations(cadata=tls.ca_bundle_pem.decode())
    context.verify_mode = ssl.CERT_REQUIRED
    if tls.verifies_sans:
        context.check_hostname = False  # the names are checked by `_SanChecked` instead
        setattr(context, _SANS, (tls.subject_alt_names, tls.subject_alt_uris))
        context.sslobject_class = _SanChecked
    else:
        context.check_hostname = True
    if certificate is not None:
        _present(context, certificate)
    context.set_alpn_protocols(["h2"] if http2 else ["http/1.1"])
    return TlsClient(context, tls.sni, http2)


def client_certificates(resources: Iterable[Resource]) -> dict[str, TlsCertificate]:
    """The certificate each Gateway's routes present to TLS backends, by `HostRoutes.table`."""
    return {
        r.table: r.backend_client_certificate
        for r in resources
        if isinstance(r, GatewayListeners) and r.backend_client_certificate is not None
    }
