"""TLS to upstreams a BackendTLSPolicy governs: one client context per policy, verified.

Spec 003 "BackendTLSPolicy": "validation.hostname is sent as the SNI and is the name the
certificate is verified against ... a bundle from caCertificateRefs is the whole of the trust for
that backend, so a certificate from a public authority is refused, and only a policy selecting
System trusts the system roots." Contexts are cached by the (frozen) `UpstreamTLS` value, so a
snapshot that keeps a policy keeps its context, and its pooled connections stay reusable.

Where it sits: `tables` asks `client_for` once per backend a policy governs, when it compiles a
snapshot; the `TlsClient` rides in that backend's origins (`picker.Origin`), so the pool dials
them over TLS (`picker.tls_arguments`). Serving TLS to clients is `dataplane.tls`.

An h2c or gRPC backend under a policy is HTTP/2 over TLS: its context offers only `h2` in ALPN
(RFC 9113 §3.2: "HTTP/2 over TLS uses the "h2" protocol identifier"), and the pool dials it with
`h2c.H2cConnection` (`picker.is_h2c`), `:scheme` https. One that picks no protocol is spoken to
in HTTP/2 all the same (prior knowledge, §3.3); one that speaks only HTTP/1.1 fails its
handshake or its preface, a connect failure (503), not a garbled exchange.
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
    h2: bool = False  # HTTP/2 over TLS (ALPN h2): dialled as `h2c.H2cConnection`


@functools.lru_cache(maxsize=256)
def client_for(tls: UpstreamTLS, http2: bool = False) -> TlsClient:
    if tls.system_roots:
        context = ssl.create_default_context()
    else:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        context.load_verify_locations(cadata=tls.ca_bundle_pem.decode())
    context.check_hostname = True
    context.verify_mode = ssl.CERT_REQUIRED
    context.set_alpn_protocols(["h2"] if http2 else ["http/1.1"])
    return TlsClient(context, tls.sni, http2)
