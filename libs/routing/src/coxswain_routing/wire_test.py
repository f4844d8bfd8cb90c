"""The wire form: exact round trips for every resource, deterministic bytes, refusal of junk.

Covers `to_wire`/`from_wire` through generated model values (hypothesis), byte-level round
trips through the encoded message, `resource_hash` stability and sensitivity, and `WireError`
for a key that does not match its body or a body this version does not know.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from coxswain_proto.gen.coxswain.discovery import v1 as pb
from coxswain_routing import (
    Backend,
    BackendProtocol,
    ClientCaStore,
    Cors,
    Endpoint,
    EndpointSet,
    GatewayListeners,
    HostRoutes,
    Listener,
    ListenerProtocol,
    Match,
    PathMatch,
    PathModifier,
    PathModifierType,
    PathType,
    RequestHeaderModifier,
    RequestMirror,
    RequestRedirect,
    Resource,
    ResponseHeaderModifier,
    Retry,
    RouteId,
    Rule,
    StreamMatch,
    StreamRoute,
    Timeouts,
    TlsCertificate,
    TlsMode,
    TlsStore,
    UpstreamTLS,
    URLRewrite,
    ValueMatch,
    ValueMatchType,
    WildcardScope,
    WireError,
    from_wire,
    resource_hash,
    snapshot_version,
    to_wire,
)

text = st.text(max_size=12)
names = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789-.", min_size=1, max_size=12)
u32 = st.integers(min_value=0, max_value=2**32 - 1)
ports = st.integers(min_value=1, max_value=65535)
small = st.integers(min_value=0, max_value=10_000)


def tuples(
    strategy: st.SearchStrategy[Any], max_size: int = 3
) -> st.SearchStrategy[tuple[Any, ...]]:
    return st.lists(strategy, max_size=max_size).map(tuple)


route_ids = st.builds(
    RouteId,
    creation_seconds=st.integers(min_value=0, max_value=2**40),
    namespace=names,
    name=names,
    kind=st.sampled_from(["HTTPRoute", "GRPCRoute", "Ingress"]),
    rule_index=small,
    rule_name=text,
)
value_matches = st.builds(ValueMatch, name=names, value=text, type=st.sampled_from(ValueMatchType))
matches = st.builds(
    Match,
    path=st.builds(PathMatch, type=st.sampled_from(PathType), value=text),
    method=st.sampled_from(["", "GET", "POST"]),
    headers=tuples(value_matches),
    query=tuples(value_matches),
)
pairs = tuples(st.tuples(names, text))
path_modifiers = st.none() | st.builds(
    PathModifier, type=st.sampled_from(PathModifierType), value=text
)
tls = st.none() | st.builds(
    UpstreamTLS,
    sni=names,
    ca_bundle_pem=st.binary(max_size=8),
    system_roots=st.booleans(),
    subject_alt_names=tuples(names),
)
simple_filters = st.one_of(
    st.builds(RequestHeaderModifier, set=pairs, add=pairs, remove=tuples(names)),
    st.builds(ResponseHeaderModifier, set=pairs, add=pairs, remove=tuples(names)),
    st.builds(URLRewrite, hostname=text, path=path_modifiers),
    st.builds(
        RequestRedirect,
        scheme=st.sampled_from(["", "http", "https"]),
        hostname=text,
        port=u32,
        path=path_modifiers,
        status_code=st.sampled_from([301, 302, 303, 307, 308]),
    ),
    st.builds(
        Cors,
        allow_origins=tuples(text),
        allow_credentials=st.booleans(),
        allow_methods=tuples(names),
        allow_headers=tuples(names),
        expose_headers=tuples(names),
        max_age_seconds=u32,
    ),
)
leaf_backends = st.builds(
    Backend,
    weight=u32,
    endpoints=text,
    unresolved_reason=text,
    protocol=st.sampled_from(BackendProtocol),
    tls=tls,
    filters=tuples(simple_filters),
)
filters = simple_filters | st.builds(
    RequestMirror, backend=leaf_backends, numerator=u32, denominator=u32
)
backends = st.builds(
    Backend,
    weight=u32,
    endpoints=text,
    unresolved_reason=text,
    protocol=st.sampled_from(BackendProtocol),
    tls=tls,
    filters=tuples(filters),
)
rules = st.builds(
    Rule,
    id=route_ids,
    matches=tuples(matches),
    filters=tuples(filters),
    backends=tuples(backends),
    timeouts=st.builds(Timeouts, request_ms=u32, backend_request_ms=u32),
    retry=st.builds(Retry, attempts=u32, codes=tuples(st.integers(100, 599)), backoff_ms=u32),
)
resources: st.SearchStrategy[Resource] = st.one_of(
    st.builds(
        HostRoutes,
        table=names,
        bind_port=ports,
        host=names | st.just(""),
        rules=tuples(rules),
        listener_port=ports,
        wildcard_scope=st.sampled_from(WildcardScope),
    ),
    st.builds(
        TlsStore,
        bind_port=ports,
        certificates=tuples(
            st.builds(
                TlsCertificate,
                server_names=tuples(names),
                certificate_chain_pem=st.binary(max_size=16),
                private_key_pem=st.binary(max_size=16),
                source=names,
            )
        ),
        default_source=text,
    ),
    st.builds(
        ClientCaStore, bind_port=ports, ca_bundle_pem=st.binary(max_size=16), sources=tuples(names)
    ),
    st.builds(
        GatewayListeners,
        namespace=names,
        name=names,
        generation=st.integers(0, 2**40),
        listeners=tuples(
            st.builds(
                Listener,
                name=names,
                port=ports,
                bind_port=ports,
                protocol=st.sampled_from(ListenerProtocol),
                hostname=text,
                tls_mode=st.sampled_from(TlsMode),
            )
        ),
    ),
    st.builds(
        StreamRoute,
        bind_port=ports,
        protocol=st.sampled_from(ListenerProtocol),
        matches=tuples(
            st.builds(StreamMatch, id=route_ids, backends=tuples(leaf_backends), server_name=text)
        ),
    ),
    st.builds(
        EndpointSet,
        namespace=names,
        service=names,
        port=ports,
        endpoints=tuples(
            st.builds(
                Endpoint,
                address=names,
                port=ports,
                ready=st.booleans(),
                serving=st.booleans(),
                terminating=st.booleans(),
                target=text,
            )
        ),
    ),
)


@given(resources)
def test_from_wire_inverts_to_wire(resource: Resource) -> None:
    assert from_wire(to_wire(resource)) == resource


@given(resources)
def test_round_trip_through_bytes(resource: Resource) -> None:
    data = bytes(to_wire(resource))
    assert from_wire(pb.Resource.parse(data)) == resource
    assert bytes(to_wire(from_wire(pb.Resource.parse(data)))) == data


@given(resources)
def test_hash_is_a_function_of_content(resource: Resource) -> None:
    assert resource_hash(resource) == resource_hash(from_wire(to_wire(resource)))


def test_hash_changes_when_one_field_does() -> None:
    before = EndpointSet("ns", "svc", 80, (Endpoint("10.0.0.1", 8080),))
    after = EndpointSet("ns", "svc", 80, (Endpoint("10.0.0.1", 8080, ready=False),))
    assert resource_hash(before) != resource_hash(after)


def test_resources_carry_their_canonical_keys() -> None:
    assert to_wire(EndpointSet("ns", "svc", 80, ())).key == "endpoints/ns/svc/80"
    assert to_wire(HostRoutes("gateway/ns/gw", 8443, "", ())).key == "routes/gateway/ns/gw/8443/*"
    assert to_wire(StreamRoute(9000, ListenerProtocol.UDP, ())).key == "stream/udp/9000"


def test_a_key_that_does_not_match_the_body_is_refused() -> None:
    message = to_wire(EndpointSet("ns", "svc", 80, ()))
    message.key = "endpoints/other/svc/80"
    with pytest.raises(WireError, match="does not match its body"):
        from_wire(message)


def test_a_resource_without_a_known_body_is_refused() -> None:
    with pytest.raises(WireError, match="no body"):
        from_wire(pb.Resource(key="future/thing"))


def test_snapshot_version_ignores_order_but_not_content() -> None:
    a = {"endpoints/ns/a/80": "1", "routes/t/80/*": "2"}
    b = dict(reversed(list(a.items())))
    assert snapshot_version(a) == snapshot_version(b)
    assert snapshot_version(a) != snapshot_version({**a, "routes/t/80/*": "3"})
    assert snapshot_version(a) != snapshot_version({"endpoints/ns/a/80": "1"})
