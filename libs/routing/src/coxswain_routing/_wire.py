"""`to_wire` / `from_wire`: snapshot resources to and from the coxswain_proto messages.

Where it sits: the controller encodes each resource once per change and hashes its bytes
(`resource_hash`); the proxy decodes only the resources that changed, off the request path.
The two directions round-trip exactly (property-tested). A resource's bytes are deterministic:
there are no map fields and every repeated field is written in the model's order, which the
controller's compiler makes canonical.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping

from coxswain_proto.gen.coxswain.discovery import v1 as pb
from coxswain_routing import _model as m
from coxswain_routing._wire_rules import (
    PROTOCOL,
    PROTOCOL_BACK,
    SCOPE,
    SCOPE_BACK,
    TLS_MODE,
    TLS_MODE_BACK,
    UnsafeValue,
    WireError,
    back,
    backend_back,
    backend_to_wire,
    certificate_back,
    certificate_to_wire,
    route_id_back,
    route_id_to_wire,
    rule_back,
    rule_to_wire,
)

__all__ = ["UnsafeValue", "WireError", "from_wire", "resource_hash", "snapshot_version", "to_wire"]

_TRANSPORT = {m.Transport.TCP: pb.Transport.TCP, m.Transport.UDP: pb.Transport.UDP}
_TRANSPORT_BACK = {v: k for k, v in _TRANSPORT.items()}
_VALIDATION = {
    m.ClientValidationMode.ALLOW_VALID_ONLY: pb.ClientValidationMode.ALLOW_VALID_ONLY,
    m.ClientValidationMode.ALLOW_INSECURE_FALLBACK: pb.ClientValidationMode.ALLOW_INSECURE_FALLBACK,
    m.ClientValidationMode.ALLOW_VALID_OR_NONE: pb.ClientValidationMode.ALLOW_VALID_OR_NONE,
}
_VALIDATION_BACK = {v: k for k, v in _VALIDATION.items()}


def _listener(x: m.Listener) -> pb.Listener:
    return pb.Listener(
        name=x.name,
        port=x.port,
        bind_port=x.bind_port,
        protocol=PROTOCOL[x.protocol],
        hostname=x.hostname,
        tls_mode=TLS_MODE[x.tls_mode],
    )


def _listener_back(x: pb.Listener) -> m.Listener:
    return m.Listener(
        name=x.name,
        port=x.port,
        bind_port=x.bind_port,
        protocol=back(PROTOCOL_BACK, x.protocol, "listener protocol"),
        hostname=x.hostname,
        tls_mode=back(TLS_MODE_BACK, x.tls_mode, "TLS mode"),
    )


def _optional_certificate(c: m.TlsCertificate | None) -> pb.TlsCertificate | None:
    return certificate_to_wire(c) if c is not None else None


def _endpoint(e: m.Endpoint) -> pb.Endpoint:
    return pb.Endpoint(
        address=e.address,
        port=e.port,
        ready=e.ready,
        serving=e.serving,
        terminating=e.terminating,
        target=e.target,
    )


def _endpoint_back(e: pb.Endpoint) -> m.Endpoint:
    return m.Endpoint(
        address=e.address,
        port=e.port,
        ready=e.ready,
        serving=e.serving,
        terminating=e.terminating,
        target=e.target,
    )


def _stream_match(s: m.StreamMatch) -> pb.StreamMatch:
    return pb.StreamMatch(
        id=route_id_to_wire(s.id),
        server_name=s.server_name,
        backends=[backend_to_wire(b) for b in s.backends],
        terminate=s.terminate,
    )


def _stream_match_back(s: pb.StreamMatch) -> m.StreamMatch:
    return m.StreamMatch(
        id=route_id_back(s.id),
        server_name=s.server_name,
        backends=tuple(backend_back(b) for b in s.backends),
        terminate=s.terminate,
    )


def to_wire(resource: m.Resource) -> pb.Resource:
    """The wire message for one resource, keyed by its canonical key."""
    key = resource.key
    match resource:
        case m.HostRoutes():
            return pb.Resource(
                key=key,
                host_routes=pb.HostRoutes(
                    table=resource.table,
                    bind_port=resource.bind_port,
                    listener_port=resource.listener_port,
                    host=resource.host,
                    wildcard_scope=SCOPE[resource.wildcard_scope],
                    rules=[rule_to_wire(r) for r in resource.rules],
                ),
            )
        case m.TlsStore():
            return pb.Resource(
                key=key,
                tls_store=pb.TlsStore(
                    bind_port=resource.bind_port,
                    certificates=[certificate_to_wire(c) for c in resource.certificates],
                    default_source=resource.default_source,
                ),
            )
        case m.ClientCaStore():
            return pb.Resource(
                key=key,
                client_ca_store=pb.ClientCaStore(
                    bind_port=resource.bind_port,
                    ca_bundle_pem=resource.ca_bundle_pem,
                    sources=list(resource.sources),
                    mode=_VALIDATION[resource.mode],
                    server_name=resource.server_name,
                ),
            )
        case m.GatewayListeners():
            return pb.Resource(
                key=key,
                gateway_listeners=pb.GatewayListeners(
                    namespace=resource.namespace,
                    name=resource.name,
                    generation=resource.generation,
                    listeners=[_listener(x) for x in resource.listeners],
                    backend_client_certificate=_optional_certificate(
                        resource.backend_client_certificate
                    ),
                ),
            )
        case m.StreamRoute():
            return pb.Resource(
                key=key,
                stream_route=pb.StreamRoute(
                    bind_port=resource.bind_port,
                    protocol=PROTOCOL[resource.protocol],
                    matches=[_stream_match(s) for s in resource.matches],
                ),
            )
        case m.EndpointSet():
            return pb.Resource(
                key=key,
                endpoint_set=pb.EndpointSet(
                    namespace=resource.namespace,
                    service=resource.service,
                    port=resource.port,
                    endpoints=[_endpoint(e) for e in resource.endpoints],
                    transport=_TRANSPORT[resource.transport],
                ),
            )


def _body_back(r: pb.Resource) -> m.Resource:
    if (h := r.host_routes) is not None:
        return m.HostRoutes(
            table=h.table,
            bind_port=h.bind_port,
            host=h.host,
            rules=tuple(rule_back(x) for x in h.rules),
            listener_port=h.listener_port,
            wildcard_scope=back(SCOPE_BACK, h.wildcard_scope, "wildcard scope"),
        )
    if (t := r.tls_store) is not None:
        certificates = tuple(certificate_back(c) for c in t.certificates)
        return m.TlsStore(t.bind_port, certificates, default_source=t.default_source)
    if (c := r.client_ca_store) is not None:
        mode = back(_VALIDATION_BACK, c.mode, "client validation mode")
        return m.ClientCaStore(c.bind_port, c.ca_bundle_pem, tuple(c.sources), mode, c.server_name)
    if (g := r.gateway_listeners) is not None:
        listeners = tuple(_listener_back(x) for x in g.listeners)
        client = g.backend_client_certificate
        certificate = certificate_back(client) if client is not None else None
        return m.GatewayListeners(g.namespace, g.name, g.generation, listeners, certificate)
    if (s := r.stream_route) is not None:
        protocol = back(PROTOCOL_BACK, s.protocol, "stream protocol")
        return m.StreamRoute(s.bind_port, protocol, tuple(_stream_match_back(x) for x in s.matches))
    if (e := r.endpoint_set) is not None:
        endpoints = tuple(_endpoint_back(x) for x in e.endpoints)
        transport = back(_TRANSPORT_BACK, e.transport, "endpoint set transport")
        return m.EndpointSet(e.namespace, e.service, e.port, endpoints, transport)
    raise WireError(f"resource {r.key!r} has no body this version understands")


def from_wire(message: pb.Resource) -> m.Resource:
    """The model resource; WireError when the body is unknown or its key is not canonical,
    UnsafeValue when it holds a value no HTTP head may carry (`_values`)."""
    resource = _body_back(message)
    if resource.key != message.key:
        raise WireError(f"resource key {message.key!r} does not match its body ({resource.key!r})")
    _refuse_unsafe(resource)
    return resource


def _refuse_unsafe(resource: m.Resource) -> None:
    """The same value checks as `Rule.validate()`, for snapshots that did not come through it
    (a hand-made one, another controller's): the proxy decodes nothing it could not write."""
    if not isinstance(resource, m.HostRoutes):
        return
    for rule in resource.rules:
        if problems := rule.value_problems():
            found = "; ".join(f"{p.field}: {p.message}" for p in problems)
            raise UnsafeValue(f"resource {resource.key!r}, {rule.id}: {found}")


def resource_hash(resource: m.Resource) -> str:
    """The hex SHA-256 of a resource's wire bytes: its content version."""
    return hashlib.sha256(bytes(to_wire(resource))).hexdigest()


def snapshot_version(hashes: Mapping[str, str]) -> str:
    """The version of a whole snapshot from its resources' keys and hashes.

    Independent of the order resources arrived in (deltas and a full snapshot of the same
    content agree), so a proxy recomputes it after applying a delta and refuses a mismatch.
    """
    digest = hashlib.sha256()
    for key in sorted(hashes):
        digest.update(f"{key}\0{hashes[key]}\n".encode())
    return digest.hexdigest()
