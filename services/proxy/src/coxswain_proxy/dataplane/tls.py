"""TLS termination: each port's certificate store prebuilt into `SSLContext`s, chosen by SNI.

Where it sits: `tables.compile_tables` calls `build_store` for every `TlsStore` in a snapshot,
off the request path (loading a certificate parses PEM and checks the key). `listeners` gives
each HTTPS port one long-lived *front* context whose SNI callback only looks up the name in the
store of the tables currently served and switches the handshake to that context; a snapshot
swap replaces the stores in one assignment, so a rotated certificate takes effect on the next
handshake without rebinding.

Lookup order (routing docs, "TlsStore"): the exact name, then wildcards from the nearest label
boundary outward, then the store's default. The store answers for a name with the first
certificate carrying it, which is the order the controller sends them in.

A TLS listener in Terminate mode (`stream/terminate.py`) builds its port's store with `alpn=None`:
what it relays is no HTTP, so it offers no application protocol.
"""

from __future__ import annotations

import logging
import os
import ssl
import tempfile
from collections.abc import Callable
from dataclasses import dataclass

from coxswain_routing import TlsCertificate, TlsStore, normalize_host

log = logging.getLogger(__name__)

ALPN = ["h2", "http/1.1"]  # RFC 9113 §3.2: h2 when the client offers it (the server picks)
# The attribute the SNI callback leaves on a handshake's `SSLObject`: (server name, the names of
# the listener chosen), which the connection reads to answer 421 for other Hosts.
SNI_ATTRIBUTE = "coxswain_sni"


@dataclass(frozen=True, slots=True)
class Selected:
    """What SNI selected: the context to finish the handshake with and its names."""

    context: ssl.SSLContext
    names: tuple[str, ...]  # the server names of the chosen certificate


@dataclass(frozen=True, slots=True)
class SniStore:
    exact: dict[str, Selected]
    wildcard: dict[str, Selected]  # by suffix without "*.": "example.com" for "*.example.com"
    default: Selected | None

    def select(self, server_name: str | None) -> Selected | None:
        if not server_name:
            return self.default
        name = normalize_host(server_name)
        found = self.exact.get(name)
        if found is not None:
            return found
        dot = name.find(".")
        while dot != -1:
            found = self.wildcard.get(name[dot + 1 :])
            if found is not None:
                return found
            dot = name.find(".", dot + 1)
        return self.default


def server_context(alpn: list[str] | None = ALPN) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    if alpn:
        context.set_alpn_protocols(alpn)
    return context


def _load(certificate: TlsCertificate, alpn: list[str] | None) -> ssl.SSLContext:
    """A context holding one certificate. `load_cert_chain` reads only files, so the PEM goes
    through a private temporary file that is removed at once."""
    context = server_context(alpn)
    fd, path = tempfile.mkstemp(prefix="coxswain-tls-", suffix=".pem")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(certificate.certificate_chain_pem)
            handle.write(b"\n")
            handle.write(certificate.private_key_pem)
        context.load_cert_chain(path)
    finally:
        os.unlink(path)
    return context


def build_store(store: TlsStore, *, alpn: list[str] | None = ALPN) -> SniStore:
    exact: dict[str, Selected] = {}
    wildcard: dict[str, Selected] = {}
    by_source: dict[str, Selected] = {}
    first: Selected | None = None
    for certificate in store.certificates:
        try:
            selected = Selected(_load(certificate, alpn), certificate.server_names)
        except (ssl.SSLError, OSError, ValueError) as exc:
            # One unusable certificate must not take the port's others down with it.
            fields = {"source": certificate.source, "port": store.bind_port, "error": str(exc)}
            log.warning("TLS certificate unusable, skipped", extra={"fields": fields})
            continue
        first = first or selected
        by_source.setdefault(certificate.source, selected)
        for name in certificate.server_names:
            if name.startswith("*."):
                wildcard.setdefault(name[2:].lower(), selected)
            else:
                exact.setdefault(name.lower(), selected)
    default = by_source.get(store.default_source, first) if store.default_source else first
    return SniStore(exact, wildcard, default)


def front_context(lookup: Callable[[], SniStore | None]) -> ssl.SSLContext:
    """The context a port's server is created with: it only dispatches on SNI.

    `lookup` returns the port's store from the tables currently served: one attribute read and
    one dict lookup, no locks, no I/O, inside the handshake.
    """
    context = server_context()

    def on_sni(sslobj: ssl.SSLObject, server_name: str | None, _: ssl.SSLContext) -> int | None:
        store = lookup()
        selected = store.select(server_name) if store is not None else None
        if selected is None:
            return ssl.ALERT_DESCRIPTION_UNRECOGNIZED_NAME
        sslobj.context = selected.context
        # Kept on the handshake's object so the connection can enforce 421 for other Hosts.
        setattr(sslobj, SNI_ATTRIBUTE, (server_name or "", selected.names))
        return None

    context.sni_callback = on_sni
    return context
