"""The shared proxies' endpoints, mirrored next to each shared Gateway's VIP Service.

Spec 002: the VIP Service "selects the (single, shared) proxy pod", but a Service selects Pods
only in its own namespace (Kubernetes Service: "the set of Pods targeted by a Service is usually
determined by a selector" — within the Service's namespace), and the shared proxies run in
coxswain-system while the VIP Service sits in the Gateway's namespace (its owner reference
cannot cross namespaces). So for a Gateway in another namespace the controller also writes the
endpoints the selector cannot find: an EndpointSlice labelled `kubernetes.io/service-name:
<VIP Service>`, listing the shared proxies' endpoints (taken from the EndpointSlices of
--shared-proxy-service, the Service that does select them) with the Gateway's bind ports under
the VIP Service's port names. kube-proxy, cloud load balancers and the devkit's load balancer
route by EndpointSlices, so the Gateway is reached at its own address whatever its namespace.

It reads EndpointSlices, which a patched pass changes (endpoint churn): it runs when the
result is assembled (`Pass.result`), on the current inputs, not in `build`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from coxswain_controller.translate.gateways.gateway_states import GatewayState
from coxswain_controller.translate.inputs import Inputs, Obj, Options
from coxswain_controller.translate.provision import common
from coxswain_controller.translate.provision.common import Target
from coxswain_controller.translate.provision.model import (
    GatewayProvision,
    Mode,
    ObjectKey,
    Provisioned,
)

__all__ = ["ENDPOINTS", "SERVICE_NAME_LABEL", "SLICE_MANAGER", "slice_name", "with_endpoints"]

ENDPOINTS = "endpoints"  # the component label of the mirrored slices
SERVICE_NAME_LABEL = "kubernetes.io/service-name"
# EndpointSlice "endpointslice.kubernetes.io/managed-by": the EndpointSlice controller changes
# only the slices it manages, so it leaves these alone.
SLICE_MANAGER_LABEL = "endpointslice.kubernetes.io/managed-by"
SLICE_MANAGER = "provisioner.coxswain-labs.dev"
_ENDPOINT_FIELDS = ("addresses", "conditions", "hostname", "nodeName", "zone", "targetRef")


def with_endpoints(
    provision: tuple[GatewayProvision, ...],
    gateways: Mapping[tuple[str, str], GatewayState],
    inputs: Inputs,
    options: Options,
) -> tuple[GatewayProvision, ...]:
    """`provision`, each shared Gateway outside the shared proxies' namespace given its
    mirrored EndpointSlices (after its VIP Service)."""
    source_ns, _, source_name = options.shared_proxy_service.partition("/")
    if not source_name:
        return provision
    endpoints = _source_endpoints(inputs, source_ns, source_name)
    mirrored = []
    for entry in provision:
        gateway = gateways.get((entry.gateway.namespace, entry.gateway.name))
        if (
            entry.mode is Mode.SHARED
            and not entry.hold
            and gateway is not None
            and gateway.infrastructure is not None
            and gateway.namespace != source_ns
        ):
            target = Target(gateway, gateway.infrastructure, options)
            slices = tuple(_slice(target, kind, found) for kind, found in sorted(endpoints.items()))
            entry = GatewayProvision(
                entry.gateway, entry.uid, entry.mode, entry.objects + slices, keep=entry.keep
            )
        mirrored.append(entry)
    return tuple(mirrored)


def _source_endpoints(inputs: Inputs, namespace: str, service: str) -> dict[str, list[Obj]]:
    """The shared proxies' endpoints by address type (one slice each), in a stable order;
    IPv4 always present, so a slice exists (empty) before the first proxy is ready."""
    found: dict[str, dict[str, Obj]] = {"IPv4": {}}
    for obj in inputs.all("EndpointSlice"):
        metadata = obj.get("metadata")
        # A slice that cannot be read mirrors nothing (the backend resolver reports it).
        if not isinstance(metadata, Mapping) or metadata.get("namespace") != namespace:
            continue
        labels = metadata.get("labels") or {}
        if not isinstance(labels, Mapping) or labels.get(SERVICE_NAME_LABEL) != service:
            continue
        kind = obj.get("addressType")
        endpoints = obj.get("endpoints") or []
        if kind not in ("IPv4", "IPv6") or not isinstance(endpoints, list):
            continue  # an FQDN slice, or one that cannot be read: nothing to mirror
        for endpoint in endpoints:
            copied = _endpoint(endpoint)
            if copied is not None:
                # An endpoint in two slices (mid-rollout) is listed once, as first found.
                found.setdefault(str(kind), {}).setdefault(",".join(copied["addresses"]), copied)
    return {kind: [by[k] for k in sorted(by)] for kind, by in found.items()}


def _endpoint(endpoint: Any) -> Obj | None:
    if not isinstance(endpoint, Mapping):
        return None
    addresses = endpoint.get("addresses")
    if not isinstance(addresses, list) or not addresses:
        return None
    copied = {k: endpoint[k] for k in _ENDPOINT_FIELDS if endpoint.get(k) is not None}
    copied["addresses"] = [str(a) for a in addresses]
    return copied


def slice_name(service: str, address_type: str) -> str:
    """The mirrored slice of `service` for one address type (IPv4 or IPv6)."""
    return f"{service[:54].rstrip('-')}-{address_type.lower()}"


def _slice(target: Target, address_type: str, endpoints: list[Obj]) -> Provisioned:
    name = slice_name(target.base, address_type)
    metadata = common.metadata(target, name, ENDPOINTS)
    metadata["labels"] |= {SERVICE_NAME_LABEL: target.base, SLICE_MANAGER_LABEL: SLICE_MANAGER}
    body = {
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": metadata,
        "addressType": address_type,
        "endpoints": endpoints,
        # EndpointSlice ports pair with the Service's by name: each listener port's bind port.
        "ports": [
            {"name": p.name, "port": p.bind_port, "protocol": p.protocol}
            for p in common.ports(target.gateway)
        ],
    }
    return Provisioned(ObjectKey("EndpointSlice", target.gateway.namespace, name), body)
