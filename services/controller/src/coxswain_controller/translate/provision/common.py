"""What every provisioned object shares: its metadata, the Gateway's ports, requested addresses.

Metadata: the Gateway's infrastructure labels and annotations (GatewayInfrastructurePropagation:
"the infrastructure labels and annotations go on every generated object"), then the labels the
controller relies on, which win (they are how it finds and prunes its objects and how Services
select pods), and one owner reference to the Gateway, `controller: true` with
`blockOwnerDeletion`, so that deleting the Gateway garbage-collects all of it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from coxswain_controller.translate.gateways.gateway_states import GatewayState
from coxswain_controller.translate.inputs import Options, uid
from coxswain_controller.translate.provision import names
from coxswain_controller.translate.provision.infrastructure import IP_ADDRESS, Infrastructure

__all__ = ["Port", "Target", "metadata", "ports", "service_ports", "static_address_fields"]

GATEWAY_API_VERSION = "gateway.networking.k8s.io/v1"


@dataclass(frozen=True, slots=True)
class Port:
    name: str  # tcp-443, udp-53: one Service port per declared port and protocol space
    port: int  # the listener's declared port
    bind_port: int  # where the proxy listens for it (the shared pool's distinct port)
    protocol: str  # TCP or UDP


@dataclass(frozen=True, slots=True)
class Target:
    """One Gateway, as the renderers need it."""

    gateway: GatewayState
    infrastructure: Infrastructure
    options: Options

    @property
    def base(self) -> str:
        return names.base_name(self.gateway.name, self.gateway.cls.name)

    @property
    def gateway_label(self) -> str:
        return names.label_value(self.gateway.name)


def metadata(
    target: Target,
    name: str,
    component: str,
    *,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """`labels`/`annotations`: more of the user's (parameters), under the Gateway's own."""
    gateway, infra = target.gateway, target.infrastructure
    return {
        "name": name,
        "namespace": gateway.namespace,
        "labels": {
            **(labels or {}),
            **infra.labels,
            names.MANAGED_BY_LABEL: names.MANAGED_BY,
            names.CONTROLLER_LABEL: names.controller_label_value(target.options.gateway_controller),
            names.GATEWAY_LABEL: target.gateway_label,
            names.COMPONENT_LABEL: component,
        },
        "annotations": {**(annotations or {}), **infra.annotations},
        "ownerReferences": [
            {
                "apiVersion": GATEWAY_API_VERSION,
                "kind": "Gateway",
                "name": gateway.name,
                "uid": uid(gateway.obj),
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ],
    }


def ports(gateway: GatewayState, *, shared: bool = False) -> list[Port]:
    """One port per served listener port and protocol space (listeners sharing a port differ
    only by hostname, which the proxy tells apart), in declaration order. `shared`: bound on
    the shared pool (its distinct port), even for a dedicated Gateway on its way to its own
    proxies (translate/handover.py)."""
    found: dict[tuple[str, int], Port] = {}
    for listener in gateway.listeners:
        if not listener.served:
            continue
        protocol = "UDP" if listener.protocol == "UDP" else "TCP"
        key = (protocol, listener.port)
        if key not in found:
            name = f"{protocol.lower()}-{listener.port}"
            bind = listener.shared_bind_port if shared else listener.bind_port
            found[key] = Port(name, listener.port, bind, protocol)
    return list(found.values())


def static_address_fields(
    service_type: str, requested: tuple[tuple[str, str], ...]
) -> dict[str, Any]:
    """The Service fields that ask for the Gateway's first requested IP address: a
    LoadBalancer's `loadBalancerIP` (honoured by MetalLB and most cloud load balancers), a
    ClusterIP's `clusterIP`. Hostnames cannot be asked for; addresses.py reports the rest."""
    first = next((value for kind, value in requested if kind == IP_ADDRESS), None)
    if first is None:
        return {}
    return {"loadBalancerIP": first} if service_type == "LoadBalancer" else {"clusterIP": first}


def service_ports(target_ports: list[Port]) -> list[dict[str, Any]]:
    """Service ports: each declared port to the proxy's bind port for it (spec 002: a shared
    pool's distinct internal targetPort; a dedicated proxy binds the declared port itself)."""
    return [
        {"name": p.name, "port": p.port, "targetPort": p.bind_port, "protocol": p.protocol}
        for p in target_ports
    ]
