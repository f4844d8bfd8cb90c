"""Gateway addresses: where clients reach the shared proxies, from the published Service.

Spec 003 "Status": "status.addresses carries the published Service's load balancer addresses,
or failing those its external IPs", and Programmed is "lowered to False with reason ...
AddressNotAssigned when kubernetes.published_service is configured but that Service has no
address yet". Only Gateways the shared proxies serve get them: a dedicated Gateway's proxies sit
behind a Service of their own.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from typing import Any

from coxswain_controller.translate.guard import MALFORMED, malformed_event
from coxswain_controller.translate.inputs import Inputs, Obj, Options
from coxswain_controller.translate.result import Event

__all__ = ["Addresses", "published_addresses"]

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
