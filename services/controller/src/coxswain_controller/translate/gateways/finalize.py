"""Finalizing Gateways: the listeners each Gateway's proxies bind, and the certificates served.

Runs once routes and Ingresses are in the tables. It reads only what the Gateway stage settled
(each served listener's bind port, hostname and certificates), never a route, so a patched pass
(incremental.py) keeps what it added as it is.
"""

from __future__ import annotations

from collections.abc import Iterable

from coxswain_controller.translate.gateways.gateway_states import GatewayState
from coxswain_controller.translate.inputs import generation
from coxswain_controller.translate.tables import ScopeTables
from coxswain_routing import Listener, TlsCertificate

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
            Listener(x.name, x.port, x.bind_port, x.model_protocol, x.hostname, x.tls_mode)
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
    tables.add_listeners(
        gateway.scope, gateway.namespace, gateway.name, generation(gateway.obj), listeners
    )
