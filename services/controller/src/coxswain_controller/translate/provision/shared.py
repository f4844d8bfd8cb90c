"""Shared mode: one VIP Service and one inert ServiceAccount per Gateway, in its namespace.

Spec 002: "The controller provisions one Service per Gateway. That Service selects the (single,
shared) proxy pod, but maps each of the Gateway's advertised listener ports (e.g. :443) to its
own distinct internal targetPort on that pod", with "the shared-proxy selector ... supplied by
the Helm chart via --shared-proxy-selector" and the type from --vip-service-type. And "the
controller also provisions a ServiceAccount for each owned Gateway, in that Gateway's own
namespace. This SA is deliberately inert: It carries zero RBAC ... Its job is to be the carrier
for spec.infrastructure.{labels,annotations}".
"""

from __future__ import annotations

from typing import Any

from coxswain_controller.translate.provision import common, names
from coxswain_controller.translate.provision.common import Target
from coxswain_controller.translate.provision.model import ObjectKey, Provisioned

__all__ = ["VIP", "IDENTITY", "identity", "vip_service"]

VIP = "vip"  # the component label of the VIP Service
IDENTITY = "identity"  # ... and of the inert ServiceAccount


def vip_service(target: Target) -> Provisioned:
    """The Gateway's VIP Service (also its dedicated Service's name: the address is kept when
    the Gateway changes mode). Its targetPorts are the shared pool's, also while a Gateway
    moving to dedicated mode waits for its own proxies (translate/handover.py)."""
    service_type = target.options.vip_service_type
    body: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": common.metadata(target, target.base, VIP),
        "spec": {
            "type": service_type,
            "selector": dict(target.options.shared_proxy_selector),
            "ports": common.service_ports(common.ports(target.gateway, shared=True)),
            **common.static_address_fields(service_type, target.infrastructure.addresses),
        },
    }
    return Provisioned(ObjectKey("Service", target.gateway.namespace, target.base), body)


def identity(target: Target) -> Provisioned:
    """GEP-1867's per-Gateway infrastructure identity: no RBAC, no token mounted from it."""
    name = names.shared_service_account(target.gateway.name, target.gateway.cls.name)
    body: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": common.metadata(target, name, IDENTITY),
        "automountServiceAccountToken": False,
    }
    return Provisioned(ObjectKey("ServiceAccount", target.gateway.namespace, name), body)
