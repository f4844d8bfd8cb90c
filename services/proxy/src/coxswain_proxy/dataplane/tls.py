"""TLS termination: each port's certificate store prebuilt into `SSLContext`s, chosen by SNI.

Where it sits: `tables.compile_tables` calls `compile_stores`, which runs `build_store` for
every `TlsStore` in a snapshot whose port changed, off the request path (loading a certificate
parses PEM and checks the key), and `compile_fronts`, which runs `front_context` once per new
store: the context a handshake on that port starts with, whose SNI callback looks the
name up in that store and switches the handshake to the chosen certificate's context. The
tables hold both; `listeners` hands each accepted connection the front of the tables served at
that moment, so a snapshot swap (one assignment) makes a rotated certificate or client CA take
effect on the next handshake without rebinding, and a handshake under way finishes with what it
started with.

Client certificates (a Gateway's `spec.tls.frontend`, the port's `ClientCaStore`): OpenSSL takes
the verify mode from the context a connection starts with and the trust from the context the
SNI callback switches to (`SSL_set_SSL_CTX` keeps the mode, not the store). So the front asks
for a certificate (CERT_REQUIRED, Gateway API AllowValidOnly: "the gateway will accept
connections only if the client presents a valid certificate") and every certificate's context
loads the port's CA bundle, the whole of the trust. A client without a valid certificate fails
the handshake, before any HTTP. AllowInsecureFallback ("accept connections even if the client
certificate is not presented or fails verification") asks for none: Python's `ssl` has no
verification callback that could request a certificate and admit one that fails, so every
client is admitted and nothing about its certificate is checked. A bundle the proxy cannot load
fails closed: the port asks for a certificate and trusts none.

Lookup order (routing docs, "TlsStore"): the exact name, then wildcards from the nearest label
boundary outward, then the store's default. The store answers for a name with the first
certificate carrying it, which is the order the controller sends them in.

Client certificates per server name (an Ingress host's auth-tls-secret: a `ClientCaStore` with a
`server_name`, mode AllowValidOrNone): such a name is no port's store and must not be taken for
one. Its clients' handshakes are read up to the server name first (`handshake.Peek`, only on a
port that has such names) and start with the name's own context (`SniStore.verifying`), which
asks for a certificate without requiring one (CERT_OPTIONAL: a certificate given must verify
or the handshake fails; none given completes it) and whose SNI callback picks the port's
certificate for the name as the front does, then switches to that certificate loaded again
with the name's CA bundle, the whole of its trust. Only the certificates the name can select
are loaded so (an exact name's one; a wildcard's those under it, those above it, the default),
not every certificate of the port per name. A bundle the proxy cannot load fails closed for
its name: a certificate is required and none trusted. Unchanged names keep their contexts
across snapshots, as unchanged ports do.

Which store validated a connection: every SNI callback that switches to contexts verifying
clients leaves that store's `peercert.ClientTrust` on the handshake's `SSLObject`
(`VERIFIED_ATTRIBUTE`), which the connection keeps (`peercert.ClientPeer`) for the rules that
check it (`http.policies.client_cert`). A port that verifies no client pays nothing for it.

A TLS listener in Terminate mode (`stream/terminate.py`) builds its port's store with `alpn=None`:
what it relays is no HTTP, so it offers no application protocol.
"""

from __future__ import annotations

import logging
import os
import ssl
import tempfile
from collections.abc import Callable, Iterable, Mapping, Set
from dataclasses import dataclass, field, replace

from coxswain_proxy.dataplane import peercert
from coxswain_routing import (
    ClientCaStore,
    ClientValidationMode,
    TlsCertificate,
    TlsStore,
    normalize_host,
)

log = logging.getLogger(__name__)

_SniCallback = Callable[[ssl.SSLObject, str | None, ssl.SSLContext], int | None]

ALPN = ["h2", "http/1.1"]  # RFC 9113 §3.2: h2 when the client offers it (the server picks)
# The attribute the SNI callback leaves on a handshake's `SSLObject`: (server name, the names of
# the listener chosen), which the connection reads to answer 421 for other Hosts.
SNI_ATTRIBUTE = "coxswain_sni"
# The attribute an SNI callback leaves on it when the context it switches to verifies clients:
# the `peercert.ClientTrust` of the store they are verified under.
VERIFIED_ATTRIBUTE = "coxswain_verified"


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
    verify: bool = False  # clients must present a certificate the port's CA bundle verifies
    verifier: peercert.ClientTrust | None = None  # the port's store, when it verifies clients
    # Server names whose clients' certificates are asked for under a CA of their own (an
    # Ingress host's `ClientCaStore`): the context each handshake offering one starts with.
    named: dict[str, Selected] = field(default_factory=dict)  # exact names
    named_wildcard: dict[str, Selected] = field(default_factory=dict)  # by suffix
    # Each certificate loaded, with what it was loaded into: a name's contexts load it again.
    loaded: tuple[tuple[TlsCertificate, Selected], ...] = ()

    @property
    def peeks(self) -> bool:
        """Its handshakes start by reading the server name (`handshake.Peek`)."""
        return bool(self.named or self.named_wildcard)

    def verifying(self, server_name: str) -> Selected | None:
        """The context of the name's own client CA: the exact name, then wildcards from the
        nearest label outward; None: the port's front decides."""
        if not server_name or not self.peeks:
            return None
        name = normalize_host(server_name)
        found = self.named.get(name)
        if found is not None:
            return found
        dot = name.find(".")
        while dot != -1:
            found = self.named_wildcard.get(name[dot + 1 :])
            if found is not None:
                return found
            dot = name.find(".", dot + 1)
        return None

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


def _load(
    certificate: TlsCertificate, alpn: list[str] | None, trust: bytes | None = None
) -> ssl.SSLContext:
    """A context holding one certificate (and, verifying clients, the CA bundle it trusts for
    them). `load_cert_chain` reads only files, so the PEM goes through a private temporary file
    that is removed at once."""
    context = server_context(alpn)
    if trust is not None:
        context.verify_mode = ssl.CERT_REQUIRED
        if trust:
            context.load_verify_locations(cadata=trust.decode("ascii"))
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


def client_trust(client_ca: ClientCaStore | None) -> bytes | None:
    """The CA bundle the port's (or a name's) certificate contexts load: None when clients are
    not verified, empty (trust nothing, so every client is refused) when the bundle cannot be
    loaded."""
    if client_ca is None or client_ca.mode is ClientValidationMode.ALLOW_INSECURE_FALLBACK:
        return None
    try:
        ssl.create_default_context(cadata=client_ca.ca_bundle_pem.decode("ascii"))
    except (ssl.SSLError, ValueError) as exc:
        fields = {
            "port": client_ca.bind_port,
            "server_name": client_ca.server_name,
            "sources": list(client_ca.sources),
            "error": str(exc),
        }
        log.warning("client CA bundle unusable, every client refused", extra={"fields": fields})
        return b""
    return client_ca.ca_bundle_pem


def build_store(
    store: TlsStore,
    *,
    alpn: list[str] | None = ALPN,
    client_ca: ClientCaStore | None = None,
    named: Iterable[ClientCaStore] = (),
) -> SniStore:
    """The port's certificates by name; `client_ca`: how its clients' certificates are checked
    (None: they are not asked for); `named`: the server names that check their own way."""
    trust = client_trust(client_ca)
    exact: dict[str, Selected] = {}
    wildcard: dict[str, Selected] = {}
    by_source: dict[str, Selected] = {}
    first: Selected | None = None
    loaded = []
    for certificate in store.certificates:
        try:
            selected = Selected(_load(certificate, alpn, trust), certificate.server_names)
        except (ssl.SSLError, OSError, ValueError) as exc:
            # One unusable certificate must not take the port's others down with it.
            fields = {"source": certificate.source, "port": store.bind_port, "error": str(exc)}
            log.warning("TLS certificate unusable, skipped", extra={"fields": fields})
            continue
        first = first or selected
        loaded.append((certificate, selected))
        by_source.setdefault(certificate.source, selected)
        for name in certificate.server_names:
            if name.startswith("*."):
                wildcard.setdefault(name[2:].lower(), selected)
            else:
                exact.setdefault(name.lower(), selected)
    default = by_source.get(store.default_source, first) if store.default_source else first
    verifier = None
    if trust and client_ca is not None:
        verifier = peercert.ClientTrust(client_ca.key, trust)
    built = SniStore(exact, wildcard, default, trust is not None, verifier, loaded=tuple(loaded))
    return with_names(built, named, alpn=alpn) if named else built


def compile_stores(
    stores: Mapping[str, TlsStore],
    client_cas: Mapping[str, ClientCaStore],
    *,
    held: Mapping[str, object],
    before: Mapping[int, SniStore],
) -> dict[int, SniStore]:
    """Each port's store (by bind port), with its clients' CA bundle when it verifies them and
    the server names that verify theirs under a bundle of their own.

    `held` are the resources `before` was compiled from, by key: loading certificates is the
    slowest step of a compile, so a port whose `TlsStore` and port `ClientCaStore` are the very
    objects it was built from keeps its certificates, and each name whose `ClientCaStore` is
    keeps its contexts."""
    by_port: dict[int, tuple[str, ClientCaStore]] = {}
    named: dict[int, dict[str, ClientCaStore]] = {}
    for key, ca in client_cas.items():
        if ca.server_name:
            named.setdefault(ca.bind_port, {})[key] = ca
        else:
            by_port[ca.bind_port] = (key, ca)
    built = {}
    for key, store in stores.items():
        port = store.bind_port
        ca_key, client_ca = by_port.get(port, (f"client-ca/{port}", None))
        names = named.get(port, {})
        old = before.get(port)
        if old is None or held.get(key) is not store or held.get(ca_key) is not client_ca:
            built[port] = build_store(store, client_ca=client_ca, named=names.values())
            continue
        kept = {key for key, ca in names.items() if held.get(key) is ca}
        if len(kept) == len(names) == len(old.named) + len(old.named_wildcard):
            built[port] = old
        else:
            built[port] = with_names(old, names.values(), kept=kept)
    return built


def with_names(
    store: SniStore,
    named: Iterable[ClientCaStore],
    *,
    alpn: list[str] | None = ALPN,
    kept: Set[str] = frozenset(),
) -> SniStore:
    """`store` with the server names that verify clients their own way; those whose key is in
    `kept` keep the contexts `store` has for them."""
    exact: dict[str, Selected] = {}
    wildcard: dict[str, Selected] = {}
    for ca in named:
        name = ca.server_name.lower()
        into, pattern = (wildcard, name[2:]) if name.startswith("*.") else (exact, name)
        before = store.named_wildcard if into is wildcard else store.named
        entry = before.get(pattern) if ca.key in kept else None
        into[pattern] = entry or _named_entry(store, ca, name, alpn)
    return replace(store, named=exact, named_wildcard=wildcard)


def _named_entry(store: SniStore, ca: ClientCaStore, name: str, alpn: list[str] | None) -> Selected:
    """The context the handshakes of `name`'s clients start with (`SniStore.verifying`)."""
    trust = client_trust(ca)
    variants: dict[Selected, Selected] = {}
    for certificate, selected in store.loaded:
        if not _may_select(store, selected, certificate, name):
            continue
        if trust is None:
            variants[selected] = selected  # AllowInsecureFallback: nothing is asked for
            continue
        try:
            variants[selected] = Selected(_load(certificate, alpn, trust), selected.names)
        except (ssl.SSLError, OSError, ValueError) as exc:
            fields = {"source": certificate.source, "server_name": name, "error": str(exc)}
            log.warning("TLS certificate unusable, skipped", extra={"fields": fields})
    verifier = peercert.ClientTrust(ca.key, trust) if trust else None
    context = server_context(alpn)
    if trust is not None:
        # Gateway API AllowValidOnly, or a bundle that cannot be loaded (trust is empty):
        # required; AllowValidOrNone: asked for, and one given must verify.
        optional = bool(trust) and ca.mode is ClientValidationMode.ALLOW_VALID_OR_NONE
        context.verify_mode = ssl.CERT_OPTIONAL if optional else ssl.CERT_REQUIRED
    context.sni_callback = _switch(store, variants, verifier)
    return Selected(context, (name,))


def _may_select(
    store: SniStore, selected: Selected, certificate: TlsCertificate, name: str
) -> bool:
    """Whether `store` may select `selected` for a server name `name` is chosen for: an exact
    name's own; for "*.suffix", the default and the certificates for names under, at or above
    the suffix (those `SniStore.select` may reach from a name under it)."""
    if not name.startswith("*."):
        return store.select(name) is selected
    if selected is store.default:
        return True
    suffix = name[2:]
    for own in certificate.server_names:
        own = own.lower()
        under = own[2:] if own.startswith("*.") else own
        if under.endswith("." + suffix) or (own != under and f".{suffix}".endswith(f".{under}")):
            return True
    return False


def _switch(
    store: SniStore, variants: dict[Selected, Selected], verifier: peercert.ClientTrust | None
) -> _SniCallback:
    """An SNI callback choosing as `store` does, switching to that certificate's variant."""

    def on_sni(sslobj: ssl.SSLObject, server_name: str | None, _: ssl.SSLContext) -> int | None:
        selected = store.select(server_name)
        chosen = variants.get(selected) if selected is not None else None
        if selected is None or chosen is None:
            return ssl.ALERT_DESCRIPTION_UNRECOGNIZED_NAME
        sslobj.context = chosen.context
        setattr(sslobj, SNI_ATTRIBUTE, (server_name or "", selected.names))
        if verifier is not None:
            setattr(sslobj, VERIFIED_ATTRIBUTE, verifier)
        return None

    return on_sni


def compile_fronts(
    stores: Mapping[int, SniStore],
    *,
    before: Mapping[int, SniStore],
    fronts: Mapping[int, ssl.SSLContext],
) -> dict[int, ssl.SSLContext]:
    """The front context of each store; a store kept from `before` keeps its front."""
    return {
        port: fronts[port] if before.get(port) is store and port in fronts else front_context(store)
        for port, store in stores.items()
    }


def front_context(store: SniStore | None) -> ssl.SSLContext:
    """The context a handshake on the port starts with: it asks for a client certificate when
    the store verifies clients, and only dispatches on SNI (one dict lookup inside the
    handshake, no locks, no I/O). No store: every handshake is refused."""
    context = server_context()
    if store is not None and store.verify:
        context.verify_mode = ssl.CERT_REQUIRED
    verifier = store.verifier if store is not None else None

    def on_sni(sslobj: ssl.SSLObject, server_name: str | None, _: ssl.SSLContext) -> int | None:
        selected = store.select(server_name) if store is not None else None
        if selected is None:
            return ssl.ALERT_DESCRIPTION_UNRECOGNIZED_NAME
        sslobj.context = selected.context
        # Kept on the handshake's object so the connection can enforce 421 for other Hosts.
        setattr(sslobj, SNI_ATTRIBUTE, (server_name or "", selected.names))
        if verifier is not None:
            setattr(sslobj, VERIFIED_ATTRIBUTE, verifier)
        return None

    context.sni_callback = on_sni
    return context
