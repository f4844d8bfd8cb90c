"""Backend references: Service ports to endpoint sets, grants, BackendTLSPolicy.

Spec 003 "Backend references": "Each backendRefs entry must be a Service (the default kind)
with a port that exists on it. A reference into another namespace needs a ReferenceGrant in that
namespace permitting HTTPRoute from the route's namespace to Service, optionally by name."
"A reference that cannot be resolved ... keeps its slot and its weight, and its share of the
traffic answers with a fixed 500". Endpoints come from EndpointSlices: ready endpoints serve,
terminating ones drain, and a named targetPort is resolved by the slice's own port names.
The stream kinds resolve the same way, by their transport's Service port and without a
BackendTLSPolicy (`STREAM_TRANSPORTS`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from coxswain_controller.translate.backends.grants import Grants
from coxswain_controller.translate.backends.policies import PolicyRead, policy_targets, read_policy
from coxswain_controller.translate.conditions import Reason
from coxswain_controller.translate.guard import MALFORMED, guarded
from coxswain_controller.translate.inputs import Inputs, Obj, created, meta, name, namespace, spec
from coxswain_controller.translate.result import Event
from coxswain_routing import Backend, BackendProtocol, Endpoint, EndpointSet, Transport, UpstreamTLS

__all__ = ["BackendResolver", "Resolved"]

GATEWAY_GROUP = "gateway.networking.k8s.io"
SERVICE_NAME_LABEL = "kubernetes.io/service-name"
# Spec 003 "TCPRoute, TLSRoute and UDPRoute": "A backendRef's port is resolved by the route's
# transport: a TCPRoute or TLSRoute selects the Service port of that number carrying TCP and a
# UDPRoute the one carrying UDP"; "a BackendTLSPolicy does not apply, since the stream is
# relayed unread." The kinds not named here are HTTP kinds: TCP, policies applied.
STREAM_TRANSPORTS = {
    "TCPRoute": Transport.TCP,
    "TLSRoute": Transport.TCP,
    "UDPRoute": Transport.UDP,
}
_PROTOCOLS = {
    "kubernetes.io/h2c": BackendProtocol.H2C,
    "kubernetes.io/ws": BackendProtocol.WEBSOCKET,
    "kubernetes.io/wss": BackendProtocol.WEBSOCKET,
}


@dataclass(frozen=True, slots=True)
class Resolved:
    backend: Backend
    endpoint_set: EndpointSet | None
    problem: tuple[Reason, str] | None  # why the reference did not resolve


class BackendResolver:
    def __init__(self, inputs: Inputs, grants: Grants) -> None:
        self._inputs = inputs
        self._grants = grants
        # Warning Events for slices and policies that could not be read (guard.py).
        self.malformed: list[Event] = []
        self._slice_events: list[Event] = []
        self._slices = _slices_by_service(inputs, self._slice_events)
        self._named: set[tuple[str, str]] | None = None  # while recording: Services looked up
        self._policies: dict[tuple[str, str], list[Obj]] = {}
        # Every endpoint set a resolved reference points at, by key, for the snapshots.
        self.endpoint_sets: dict[str, EndpointSet] = {}
        # Every BackendTLSPolicy that could be read, by (namespace, name), for its status.
        self.policies: dict[tuple[str, str], PolicyRead] = {}
        policies = inputs.all("BackendTLSPolicy")
        for policy, read in guarded(
            "BackendTLSPolicy", policies, lambda p: _read_whole(inputs, p), self.malformed
        ):
            self.policies[(namespace(policy), name(policy))] = read
            for target in {service for service, _ in policy_targets(policy)}:
                self._policies.setdefault((namespace(policy), target), []).append(policy)

    @property
    def events(self) -> list[Event]:
        return self.malformed + self._slice_events

    def resolve(
        self,
        ref: Mapping[str, Any],
        *,
        route_kind: str,
        route_namespace: str,
        filters: tuple[Any, ...] = (),
    ) -> Resolved:
        weight = int(ref.get("weight", 1))
        service_ns = ref.get("namespace") or route_namespace
        service_name = str(ref.get("name", ""))
        if self._named is not None:
            self._named.add((str(service_ns), service_name))
        failed = self._check_ref(ref, route_kind, route_namespace, service_ns, service_name)
        if failed is not None:
            return _unresolved(weight, failed, filters)
        service = self._inputs.get("Service", service_ns, service_name)
        if service is None:
            return _unresolved(
                weight,
                (Reason.BACKEND_NOT_FOUND, f"Service {service_ns}/{service_name} not found"),
                filters,
            )
        stream = STREAM_TRANSPORTS.get(route_kind)
        transport = stream or Transport.TCP
        port = _service_port(service, ref.get("port"), transport)
        if port is None:
            over = f" over {transport.value}" if stream else ""
            what = f"Service {service_ns}/{service_name} has no port {ref.get('port')}{over}"
            return _unresolved(weight, (Reason.BACKEND_NOT_FOUND, what), filters)
        tls = None if stream else self._tls(service_ns, service_name, port)
        if isinstance(tls, tuple):
            return _unresolved(weight, tls, filters)
        endpoint_set = self._endpoint_set(service_ns, service_name, port, transport)
        self.endpoint_sets[endpoint_set.key] = endpoint_set
        if stream:
            backend = Backend(weight, endpoint_set.key)  # relayed unread: no protocol, no TLS
            return Resolved(backend, endpoint_set, None)
        protocol = BackendProtocol.GRPC if route_kind == "GRPCRoute" else _protocol(port)
        backend = Backend(weight, endpoint_set.key, "", protocol, tls, filters)
        return Resolved(backend, endpoint_set, None)

    def refresh_endpoints(self, inputs: Inputs) -> set[str]:
        """Move to `inputs`, which differ from the current ones only in EndpointSlices, and
        recompute the endpoint sets of the Services whose slices changed; returns their keys.

        Resolution itself (which Service, which port, grants, TLS) never reads a slice, so
        nothing else of a pass depends on them: this is the whole effect of endpoint churn.
        """
        self._slice_events = []
        before, after = self._slices, _slices_by_service(inputs, self._slice_events)
        self._inputs, self._slices = inputs, after
        touched = set()
        for key, held in list(self.endpoint_sets.items()):
            where = (held.namespace, held.service)
            if _same_slices(before.get(where, []), after.get(where, [])):
                continue
            service = inputs.get("Service", *where)
            port = (
                _service_port(service, held.port, held.transport) if service is not None else None
            )
            if port is None:
                continue  # cannot happen while Services are unchanged; left as resolved
            self.endpoint_sets[key] = self._endpoint_set(*where, port, held.transport)
            touched.add(key)
        return touched

    @contextlib.contextmanager
    def recording(self) -> Iterator[set[tuple[str, str]]]:
        """Collect the (namespace, name) of every Service looked up inside the block."""
        outer, self._named = self._named, set()
        named = self._named
        try:
            yield named
        finally:
            if outer is not None:
                outer.update(named)
            self._named = outer

    def refresh_services(self, inputs: Inputs, changed: set[tuple[str, str]]) -> set[str]:
        """Move to `inputs`, whose Services differ in `changed`; recompute (or drop) the
        endpoint sets of those Services and return their keys. The routes naming them are
        translated again by the caller, which re-resolves their references."""
        self._inputs = inputs
        touched = set()
        for key, held in list(self.endpoint_sets.items()):
            if (held.namespace, held.service) not in changed:
                continue
            touched.add(key)
            service = inputs.get("Service", held.namespace, held.service)
            try:
                port = (
                    _service_port(service, held.port, held.transport)
                    if service is not None
                    else None
                )
            except MALFORMED:
                port = None  # the routes naming it are refused when translated again
            if port is None:
                del self.endpoint_sets[key]
            else:
                self.endpoint_sets[key] = self._endpoint_set(
                    held.namespace, held.service, port, held.transport
                )
        return touched

    def port_number(self, ns: str, service: str, port_name: str) -> int | None:
        """The number of a Service port named `port_name` (Ingress backends may name ports)."""
        if self._named is not None:
            self._named.add((ns, service))
        obj = self._inputs.get("Service", ns, service)
        for port in spec(obj or {}).get("ports") or []:
            if port.get("name") == port_name:
                return int(port["port"])
        return None

    def _check_ref(
        self,
        ref: Mapping[str, Any],
        route_kind: str,
        route_ns: str,
        service_ns: str,
        service_name: str,
    ) -> tuple[Reason, str] | None:
        group, kind = ref.get("group") or "", ref.get("kind") or "Service"
        if group != "" or kind != "Service":
            return Reason.INVALID_KIND, f"backendRef kind {group or 'core'}/{kind} is not supported"
        if ref.get("port") is None:
            return (
                Reason.BACKEND_NOT_FOUND,
                f"backendRef to Service {service_ns}/{service_name} needs a port",
            )
        if service_ns != route_ns and not self._grants.permits(
            from_group=GATEWAY_GROUP,
            from_kind=route_kind,
            from_namespace=route_ns,
            to_kind="Service",
            to_namespace=service_ns,
            to_name=service_name,
        ):
            return Reason.REF_NOT_PERMITTED, (
                f"no ReferenceGrant in {service_ns} permits {route_kind} from {route_ns} "
                f"to Service {service_name}"
            )
        return None

    def _endpoint_set(
        self, ns: str, service: str, port: Mapping[str, Any], transport: Transport = Transport.TCP
    ) -> EndpointSet:
        port_name = port.get("name") or ""
        endpoints: set[Endpoint] = set()
        for slice_ in self._slices.get((ns, service), []):
            number = _slice_port(slice_, port_name)
            if number is None:
                continue
            for endpoint in slice_.get("endpoints") or []:
                endpoints.update(_endpoints(endpoint, number))
        ordered = tuple(sorted(endpoints, key=lambda e: (e.address, e.port)))
        return EndpointSet(ns, service, int(port["port"]), ordered, transport)

    def _tls(
        self, ns: str, service: str, port: Mapping[str, Any]
    ) -> UpstreamTLS | tuple[Reason, str] | None:
        policies = self._policies.get((ns, service))
        if not policies:
            return None
        port_name = port.get("name") or ""

        # Spec 003: "A port-specific policy outranks one for the whole Service, and of two
        # policies selecting one target the older wins".
        def rank(policy: Obj) -> tuple[int, int, str]:
            targets = [t for t in spec(policy).get("targetRefs") or [] if t.get("name") == service]
            specific = any(t.get("sectionName") == port_name and port_name for t in targets)
            return (0 if specific else 1, created(policy), name(policy))

        applicable = [
            p
            for p in policies
            if any(
                not t.get("sectionName") or t.get("sectionName") == port_name
                for t in spec(p).get("targetRefs") or []
                if t.get("name") == service
            )
        ]
        if not applicable:
            return None
        read = self.policies[(ns, name(min(applicable, key=rank)))]
        if read.tls is None:
            return Reason.UNSUPPORTED_PROTOCOL, read.refusal
        return read.tls


def _unresolved(weight: int, problem: tuple[Reason, str], filters: tuple[Any, ...]) -> Resolved:
    return Resolved(Backend(weight, "", problem[1], filters=filters), None, problem)


def _service_port(
    service: Obj, number: Any, transport: Transport = Transport.TCP
) -> Mapping[str, Any] | None:
    """The Service port of that number carrying `transport` (a port's protocol defaults to
    TCP): one number may be exposed over both, with different names and targets."""
    for port in spec(service).get("ports") or []:
        if port.get("port") == number and (port.get("protocol") or "TCP") == transport.value:
            port_map: Mapping[str, Any] = port
            return port_map
    return None


def _protocol(port: Mapping[str, Any]) -> BackendProtocol:
    return _PROTOCOLS.get(str(port.get("appProtocol") or ""), BackendProtocol.HTTP1)


def _read_whole(inputs: Inputs, policy: Obj) -> PolicyRead:
    """A BackendTLSPolicy read through, targets included, so that a malformed one is caught
    here rather than in the middle of a route's resolution."""
    policy_targets(policy)
    return read_policy(inputs, policy)


def _slice_service(slice_: Obj) -> str:
    """The Service a slice belongs to ("" for none), after reading every field resolution will
    read, so that a malformed slice costs only itself."""
    labels = meta(slice_).get("labels") or {}
    for port in slice_.get("ports") or []:
        _slice_port(slice_, port.get("name") or "")
    for endpoint in slice_.get("endpoints") or []:
        set(_endpoints(endpoint, 0))  # endpoint sets are built from sets: each must hash
    return str(labels.get(SERVICE_NAME_LABEL) or "")


def _slices_by_service(inputs: Inputs, malformed: list[Event]) -> dict[tuple[str, str], list[Obj]]:
    found: dict[tuple[str, str], list[Obj]] = {}
    for slice_, service in guarded(
        "EndpointSlice", inputs.all("EndpointSlice"), _slice_service, malformed
    ):
        if service:
            found.setdefault((namespace(slice_), service), []).append(slice_)
    return found


def _same_slices(a: list[Obj], b: list[Obj]) -> bool:
    return len(a) == len(b) and all(x is y for x, y in zip(a, b, strict=True))


def _slice_port(slice_: Obj, port_name: str) -> int | None:
    for port in slice_.get("ports") or []:
        if (port.get("name") or "") == port_name and port.get("port") is not None:
            return int(port["port"])
    return None


def _endpoints(endpoint: Mapping[str, Any], port: int) -> list[Endpoint]:
    conditions = endpoint.get("conditions") or {}
    # EndpointSlice API: a nil `ready` means ready; `serving` defaults to `ready`.
    ready = conditions.get("ready") is not False
    serving = conditions.get("serving", ready) is not False
    terminating = bool(conditions.get("terminating"))
    target = endpoint.get("targetRef") or {}
    pod = target.get("name", "") if target.get("kind") == "Pod" else ""
    return [
        Endpoint(
            str(address), port, ready=ready, serving=serving, terminating=terminating, target=pod
        )
        for address in endpoint.get("addresses") or []
    ]
