"""Moving a shared Gateway onto its own proxies without dropping a request.

Spec 002: "Switching a Gateway between modes provisions the new objects before it prunes the
old". Provisioning first is not enough for shared → dedicated: the dedicated proxies take
seconds to start, get their SVID, receive their snapshot and bind, and until they have, nothing
may stop serving the Gateway's address. So the switch goes in two phases, each read off the
cluster's own objects (which makes it survive a controller restart or a leader change):

- `WAITING`: the Gateway's Service still selects the shared pool (its component label is the
  VIP's) and its Deployment has no available replica yet. The Service stays exactly as it was
  (the shared pool's targetPorts), its inert ServiceAccount and mirrored EndpointSlices are kept,
  and the shared pool goes on serving the Gateway at its old bind ports, next to the dedicated
  proxies' own snapshot. A dedicated configuration that never becomes available therefore
  leaves traffic where it was.
- `SWITCHED`: the Deployment has an available replica (readiness is the proxy's /readyz: it
  holds a snapshot), so the Service moves to the dedicated pods. Until Kubernetes lists a Ready
  dedicated pod in the Service's EndpointSlices, the mirrored slices (the shared proxies'
  endpoints, for a Gateway outside their namespace) stay, so the Service is never without an
  endpoint, and the shared pool goes on serving.
- `DRAINING`: the dedicated pods are listed; the shared pool still serves the Gateway until no
  EndpointSlice of the Service lists a shared bind port any more, that is until the endpoints
  that load balancers and kube-proxy read have moved too.

After that the Gateway is served by its own proxies alone. Dedicated → shared needs none of
this: the shared proxies are running already, and the dedicated ones are pruned only after the
Service has moved (the provisioner's order).

Runs when the result is assembled (`Pass.result`), on the current inputs: Services and
EndpointSlices change in patched passes.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from enum import Enum
from typing import Any

from coxswain_controller.translate.gateways.gateway_states import GatewayState
from coxswain_controller.translate.inputs import Inputs, Obj, Options, generation, meta
from coxswain_controller.translate.provision import mirror, names, shared
from coxswain_controller.translate.provision.common import Target
from coxswain_controller.translate.provision.model import GatewayProvision, ObjectKey, Provisioned
from coxswain_controller.translate.scopes import SHARED_POOL, GatewayScope, Scope
from coxswain_routing import (
    ClientCaStore,
    GatewayListeners,
    HostRoutes,
    Resource,
    StreamRoute,
    TlsStore,
)

__all__ = ["Phase", "phases", "provision_during", "serve_from_shared"]


class Phase(Enum):
    WAITING = "waiting"  # the Service selects the shared pool; the dedicated proxies start
    SWITCHED = "switched"  # the Service selects the dedicated proxies; none listed yet
    DRAINING = "draining"  # dedicated proxies listed; some slice still lists the shared pool


Phases = Mapping[tuple[str, str], Phase]


def phases(gateways: Iterable[GatewayState], inputs: Inputs, options: Options) -> Phases:
    """Every dedicated Gateway still being handed over from the shared pool, by its key."""
    if not options.vip_service_type:
        return {}  # no shared Gateway had a Service of its own: there is no address to keep
    candidates = {
        (g.namespace, names.base_name(g.name, g.cls.name)): g
        for g in gateways
        if isinstance(g.scope, GatewayScope) and g.infrastructure is not None and g.served
    }
    if not candidates:
        return {}
    found: dict[tuple[str, str], Phase] = {}
    moved: dict[tuple[str, str], GatewayState] = {}
    for (namespace, base), gateway in candidates.items():
        service = inputs.get("Service", namespace, base)
        if service is None or not _owned(service, gateway):
            continue  # a new Gateway, or a Service that is not ours: nothing to hand over
        if _component(service) == shared.VIP:
            deployment = inputs.get("Deployment", namespace, base)
            key = (gateway.namespace, gateway.name)
            found[key] = Phase.SWITCHED if _available(deployment) else Phase.WAITING
        else:
            moved[(namespace, base)] = gateway
    if moved:
        listed, still_shared = _endpoints(moved, inputs)
        for service_key, gateway in moved.items():
            key = (gateway.namespace, gateway.name)
            if service_key not in listed:
                found[key] = Phase.SWITCHED
            elif service_key in still_shared:
                found[key] = Phase.DRAINING
    return found


def provision_during(
    provision: tuple[GatewayProvision, ...],
    gateways: Mapping[tuple[str, str], GatewayState],
    current: Phases,
    options: Options,
) -> tuple[GatewayProvision, ...]:
    """`provision` with each WAITING Gateway's Service left in its shared form and its shared
    objects kept, and each SWITCHED one's mirrored endpoints kept; DRAINING Gateways get their
    dedicated objects as they are."""
    if not any(phase is not Phase.DRAINING for phase in current.values()):
        return provision
    adjusted = []
    for entry in provision:
        key = (entry.gateway.namespace, entry.gateway.name)
        gateway = gateways.get(key)
        phase = current.get(key)
        if phase in (None, Phase.DRAINING) or gateway is None or entry.hold:
            adjusted.append(entry)
            continue
        assert gateway.infrastructure is not None  # phases() took only provisioned Gateways
        vip = shared.vip_service(Target(gateway, gateway.infrastructure, options))
        keep = {ObjectKey("EndpointSlice", gateway.namespace, n) for n in _mirror_names(vip)}
        objects = entry.objects
        if phase is Phase.WAITING:
            objects = tuple(vip if o.key == vip.key else o for o in objects)
            keep.add(ObjectKey("ServiceAccount", gateway.namespace, _identity_name(gateway)))
        adjusted.append(dataclasses.replace(entry, objects=objects, keep=entry.keep | keep))
    return tuple(adjusted)


def serve_from_shared(
    snapshots: dict[Scope, tuple[Resource, ...]],
    gateways: Mapping[tuple[str, str], GatewayState],
    current: Phases,
) -> dict[Scope, tuple[Resource, ...]]:
    """`snapshots`, the shared pool's also serving each Gateway being handed over: its own
    scope's resources at its shared bind ports."""
    if not current:
        return snapshots
    merged: dict[str, Resource] = {r.key: r for r in snapshots.get(SHARED_POOL, ())}
    for key in sorted(current):
        gateway = gateways[key]
        ports = {x.port: x.shared_bind_port for x in gateway.listeners if x.served}
        for resource in snapshots.get(gateway.scope, ()):
            moved = _at_shared_ports(resource, ports)
            merged.setdefault(moved.key, moved)
    out = dict(snapshots)
    out[SHARED_POOL] = tuple(merged[k] for k in sorted(merged))
    return out


def _at_shared_ports(resource: Resource, ports: Mapping[int, int]) -> Resource:
    if isinstance(resource, GatewayListeners):
        listeners = tuple(
            dataclasses.replace(x, bind_port=ports.get(x.bind_port, x.bind_port))
            for x in resource.listeners
        )
        ordered = tuple(sorted(listeners, key=lambda x: (x.bind_port, x.protocol.value, x.name)))
        return dataclasses.replace(resource, listeners=ordered)
    if isinstance(resource, HostRoutes):
        advertised = resource.listener_port or resource.bind_port
        return dataclasses.replace(
            resource,
            bind_port=ports.get(resource.bind_port, resource.bind_port),
            listener_port=advertised,
        )
    if isinstance(resource, StreamRoute | TlsStore | ClientCaStore):
        return dataclasses.replace(
            resource, bind_port=ports.get(resource.bind_port, resource.bind_port)
        )
    return resource  # endpoint sets: the same wherever they are served


def _owned(service: Obj, gateway: GatewayState) -> bool:
    labels = meta(service).get("labels") or {}
    return (
        isinstance(labels, Mapping)
        and labels.get(names.MANAGED_BY_LABEL) == names.MANAGED_BY
        and labels.get(names.GATEWAY_LABEL) == names.label_value(gateway.name)
    )


def _component(service: Obj) -> Any:
    labels = meta(service).get("labels") or {}
    return labels.get(names.COMPONENT_LABEL) if isinstance(labels, Mapping) else None


def _available(deployment: Obj | None) -> bool:
    """At least one replica of the current template is Ready (the proxy's /readyz)."""
    if deployment is None:
        return False
    status = deployment.get("status") or {}
    if not isinstance(status, Mapping):
        return False
    current = status.get("observedGeneration", 0) == generation(deployment)
    available = status.get("availableReplicas", 0)
    return current and isinstance(available, int) and available >= 1


def _endpoints(
    services: Mapping[tuple[str, str], GatewayState], inputs: Inputs
) -> tuple[set[tuple[str, str]], set[tuple[str, str]]]:
    """Of the Services in `services`: those whose own slices (not the mirrored ones) list a
    Ready endpoint at a dedicated proxy's port, and those with a slice still listing an
    endpoint at a shared bind port."""
    listed, still_shared = set(), set()
    for obj in inputs.all("EndpointSlice"):
        metadata = obj.get("metadata")
        if not isinstance(metadata, Mapping):
            continue
        labels = metadata.get("labels") or {}
        if not isinstance(labels, Mapping):
            continue
        key = (str(metadata.get("namespace", "")), str(labels.get(mirror.SERVICE_NAME_LABEL, "")))
        gateway = services.get(key)
        endpoints = obj.get("endpoints")
        if gateway is None or not isinstance(endpoints, list) or not endpoints:
            continue
        ports = {p.get("port") for p in obj.get("ports") or [] if isinstance(p, Mapping)}
        own = {x.port for x in gateway.listeners if x.served}
        if ports & ({x.shared_bind_port for x in gateway.listeners if x.served} - own):
            still_shared.add(key)
        mirrored = labels.get(mirror.SLICE_MANAGER_LABEL) == mirror.SLICE_MANAGER
        if not mirrored and ports & own and any(map(_ready, endpoints)):
            listed.add(key)
    return listed, still_shared


def _ready(endpoint: Any) -> bool:
    conditions = endpoint.get("conditions") if isinstance(endpoint, Mapping) else None
    return not isinstance(conditions, Mapping) or conditions.get("ready") is not False


def _identity_name(gateway: GatewayState) -> str:
    return names.shared_service_account(gateway.name, gateway.cls.name)


def _mirror_names(vip: Provisioned) -> tuple[str, ...]:
    return tuple(mirror.slice_name(vip.key.name, kind) for kind in ("IPv4", "IPv6"))
