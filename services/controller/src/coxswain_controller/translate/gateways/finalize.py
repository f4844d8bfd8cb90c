"""Finalizing Gateways: the listeners each Gateway's proxies bind, the certificates served,
how each HTTPS port checks its clients' certificates, and the certificate presented to backends.

Runs once routes and Ingresses are in the tables. It reads only what the Gateway stage settled
(each served listener's bind port, hostname and certificates, the Gateway's spec.tls), never a
route, so a patched pass (incremental.py) keeps what it added as it is.
"""

from __future__ import annotations

from collections.abc import Iterable

from coxswain_controller.translate.gateways.gateway_states import GatewayState
from coxswain_controller.translate.inputs import generation
from coxswain_controller.translate.tables import ScopeTables
from coxswain_routing import ClientCaStore, Listener, TlsCertificate

__all__ = ["finalize_gateways"]


def finalize_gateways(gateways: Iterable[GatewayState], tables: ScopeTables) -> None:
    """Every Gateway's scope, with its served listeners and their ports' TLS stores."""
    for gateway in gateways:
        _finalize_gateway(gateway, tables)


def _finalize_gateway(gateway: GatewayState, tables: ScopeTables) -> None:
    """The listeners a proxy binds for this Gateway and the certificates its ports serve."""
    tables.scope(gateway.scope)
    if not gateway.served:
        return
    listeners = []
    for x in gateway.listeners:
        if not x.served:
            continue
        listeners.append(
            Listener(x.wire_name, x.port, x.bind_port, x.model_protocol, x.hostname, x.tls_mode)
        )
        for certificate in x.certificates:
            names = (x.hostname,) if x.hostname else certificate.dns_names
            tables.add_certificate(
                gateway.scope,
                x.bind_port,
                TlsCertificate(
                    names, certificate.chain_pem, certificate.key_pem, certificate.source
                ),
            )
        validation = gateway.tls.validation.get(x.port) if x.protocol == "HTTPS" else None
        if validation is not None:
            store = ClientCaStore(
                x.bind_port, validation.ca_bundle_pem, validation.sources, validation.mode
            )
            tables.add_client_ca(gateway.scope, store)
    tables.add_listeners(
        gateway.scope,
        gateway.namespace,
        gateway.name,
        generation(gateway.obj),
        listeners,
        _backend_certificate(gateway),
    )


def _backend_certificate(gateway: GatewayState) -> TlsCertificate | None:
    """spec.tls.backend's certificate as the proxy presents it (it names no server)."""
    held = gateway.tls.backend_certificate
    if held is None:
        return None
    return TlsCertificate((), held.chain_pem, held.key_pem, held.source)
