"""TLS to upstreams a BackendTLSPolicy governs: one client context per policy, verified.

Spec 003 "BackendTLSPolicy": "validation.hostname is sent as the SNI and is the name the
certificate is verified against ... a bundle from caCertificateRefs is the whole of the trust for
that backend, so a certificate from a public authority is refused, and only a policy selecting
System trusts the system roots." Contexts are cached by the (frozen) `UpstreamTLS` value, so a
snapshot that keeps a policy keeps its context, and its pooled connections stay reusable.

Where it sits: `tables` asks `client_for` once per backend a policy governs, when it compiles a
snapshot; the `TlsClient` rides in that backend's origins (`picker.Origin`), so the pool dials
them over TLS (`picker.tls_arguments`). Serving TLS to clients is `dataplane.tls`.
"""

from __future__ import annotations

import functools
import ssl
from dataclasses import dataclass

from coxswain_routing import UpstreamTLS

__all__ = ["TlsClient", "client_for"]


@dataclass(frozen=True, eq=False)
class TlsClient:
    """How to dial one TLS upstream: the context and the name to send and verify."""

    context: ssl.SSLContext
    sni: str


@functools.lru_cache(maxsize=256)
def client_for(tls: UpstreamTLS) -> TlsClient:
    if tls.system_roots:
        context = ssl.create_default_context()
    else:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        context.load_verify_locations(cadata=tls.ca_bundle_pem.decode())
    context.check_hostname = True
    context.verify_mode = ssl.CERT_REQUIRED
    context.set_alpn_protocols(["http/1.1"])
    return TlsClient(context, tls.sni)
