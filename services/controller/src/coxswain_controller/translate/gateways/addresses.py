"""Gateway addresses: where clients reach each Gateway.

A provisioned Gateway is reached at its own Service (spec 002: "Each Gateway still reports its
own VIP in status.addresses, same as if it had its own dedicated proxy"): a LoadBalancer
Service's load balancer IPs or hostnames, a ClusterIP Service's cluster IP. Until the Service
has one the Gateway is `Programmed: False, AddressNotAssigned` (Gateway API: "This reason is
used with the "Programmed" condition when none of the requested addresses have been assigned to
the Gateway"). A requested address (spec.addresses) that the Service cannot be asked for, or
that it was given another address than, is `AddressNotUsable` ("used with the "Programmed"
condition when the Gateway has an address that cannot be used").

A shared Gateway with nothing provisioned (no --vip-service-type) reports the published
Service's addresses, as spec 003 "Status" has it: "status.addresses carries the published
Service's load balancer addresses, or failing those its external IPs", and Programmed is
"lowered to False with reason ... AddressNotAssigned when kubernetes.published_service is
configured but that Service has no address yet".
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from coxswain_controller.translate.conditions import ConditionType, Reason
from coxswain_controller.translate.gateways.gateway_states import GatewayState
from coxswain_controller.translate.guard import MALFORMED, malformed_event
from coxswain_controller.translate.inputs import Inputs, Obj, Options
from coxswain_controller.translate.provision import names
from coxswain_controller.translate.provision.infrastructure import HOSTNAME, IP_ADDRESS
from coxswain_controller.translate.result import Condition, Event
from coxswain_controller.translate.scopes import SharedPool

__all__ = ["AddressOutcome", "Addresses", "gateway_addresses", "published_addresses"]

# (type, value) pairs in the order the Service lists them; None: no Service is published.
Addresses = tuple[tuple[str, str], ...] | None


def published_addresses(inputs: Inputs, options: Options, malformed: list[Event]) -> Addresses:
    key = options.published_key
    if key is None:
        return None
    service = inputs.get("Service", *key)
    if service is None:
        return ()
    try:
        return _addresses(service)
    except MALFORMED as exc:
        malformed.append(malformed_event("Service", service, exc))
        return ()  # no address known: Gateways wait with AddressNotAssigned


def _addresses(service: Obj) -> tuple[tuple[str, str], ...]:
    status: Mapping[str, Any] = service.get("status") or {}
    found: list[tuple[str, str]] = []
    for entry in (status.get("loadBalancer") or {}).get("ingress") or []:
        if entry.get("ip"):
            found.append(_typed(str(entry["ip"])))
        elif entry.get("hostname"):
            found.append(("Hostname", str(entry["hostname"])))
    if not found:
        spec: Mapping[str, Any] = service.get("spec") or {}
        found = [_typed(str(ip)) for ip in spec.get("externalIPs") or []]
    return tuple(dict.fromkeys(found))  # a value listed twice is reported once


def _typed(value: str) -> tuple[str, str]:
    try:
        ipaddress.ip_address(value)
    except ValueError:
        return ("Hostname", value)
    return ("IPAddress", value)


@dataclass(frozen=True, slots=True)
class AddressOutcome:
    addresses: Addresses  # status.addresses; None leaves the field alone
    problem: Condition | None = None  # why the Gateway is not Programmed for its address


def gateway_addresses(
    gateway: GatewayState, inputs: Inputs, options: Options, published: Addresses
) -> AddressOutcome:
    """Where `gateway` is reached, and what keeps it from being Programmed there, if anything."""
    if gateway.infrastructure is None:
        if isinstance(gateway.scope, SharedPool) and published == ():
            return AddressOutcome((), _not_assigned("the published Service has no address yet"))
        return AddressOutcome(published if isinstance(gateway.scope, SharedPool) else None)
    name = names.base_name(gateway.name, gateway.cls.name)
    wanted = service_type(gateway, options)
    service = inputs.get("Service", gateway.namespace, name)
    assigned = _assigned(service, wanted)
    where = f"Service {gateway.namespace}/{name}"
    requested = gateway.infrastructure.addresses
    refused = _refused(requested, wanted)
    if refused:
        return AddressOutcome(assigned, _not_usable(refused))
    if not assigned:
        return AddressOutcome(assigned, _not_assigned(f"{where} has no address yet"))
    missing = [value for _, value in requested if value not in {v for _, v in assigned}]
    if missing:
        given = ", ".join(v for _, v in assigned)
        message = f"{where} was given {given}, not the requested {', '.join(missing)}"
        return AddressOutcome(assigned, _not_usable(message))
    return AddressOutcome(assigned)


def service_type(gateway: GatewayState, options: Options) -> str:
    """The type of the Gateway's Service: its parameters' for a dedicated Gateway, else the
    controller's --vip-service-type (LoadBalancer when neither says)."""
    infra = gateway.infrastructure
    own = infra.parameters.service_type if infra and infra.parameters else None
    return own or options.vip_service_type or "LoadBalancer"


def _assigned(service: Obj | None, wanted: str) -> tuple[tuple[str, str], ...]:
    """The addresses `service` has as a Service of type `wanted` (none while it is another)."""
    if service is None:
        return ()
    try:
        spec: Mapping[str, Any] = service.get("spec") or {}
        if (spec.get("type") or "ClusterIP") != wanted:
            return ()  # not provisioned as wanted yet
        if wanted == "LoadBalancer":
            return _addresses(service)
        ips = spec.get("clusterIPs") or [spec.get("clusterIP")]
        return tuple(dict.fromkeys(_typed(str(ip)) for ip in ips if ip and ip != "None"))
    except MALFORMED:
        return ()  # unreadable: as if it had no address yet


def _refused(requested: tuple[tuple[str, str], ...], wanted: str) -> str:
    """Requested addresses the Service cannot be asked for at all."""
    ips = [value for kind, value in requested if kind == IP_ADDRESS]
    hostnames = [value for kind, value in requested if kind == HOSTNAME]
    problems = []
    if len(ips) > 1:
        field = "spec.loadBalancerIP" if wanted == "LoadBalancer" else "spec.clusterIP"
        problems.append(
            f"a {wanted} Service takes one requested IP ({field}): {', '.join(ips[1:])}"
        )
    if hostnames and wanted != "LoadBalancer":
        problems.append(f"a {wanted} Service has no hostname: {', '.join(hostnames)}")
    return "; ".join(problems) + (" cannot be assigned" if problems else "")


def _not_assigned(message: str) -> Condition:
    return Condition(ConditionType.PROGRAMMED, False, Reason.ADDRESS_NOT_ASSIGNED, message)


def _not_usable(message: str) -> Condition:
    return Condition(ConditionType.PROGRAMMED, False, Reason.ADDRESS_NOT_USABLE, message)
