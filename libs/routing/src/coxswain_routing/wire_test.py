"""The wire form: exact round trips for every resource, deterministic bytes, refusal of junk.

Covers `to_wire`/`from_wire` through generated model values (hypothesis), byte-level round
trips through the encoded message, `resource_hash` stability and sensitivity, and `WireError`
for a key that does not match its body or a body this version does not know. The generated
values that reach an HTTP head (header fields, hostnames, paths, ports, CORS lists) are drawn
from what `_values` accepts; `UnsafeValue` for a hand-made message carrying one it refuses is
covered here, the rules themselves in values_test.py.
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
    ClientValidationMode,
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
    Transport,
    UnsafeValue,
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
from coxswain_routing._values import FRAMING_FIELDS

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
# What may reach an HTTP head (`_values`): tokens that do not frame, field values, host names.
header_names = names.filter(lambda n: n not in FRAMING_FIELDS)
field_values = st.text(
    st.characters(min_codepoint=0x20, max_codepoint=0xFF, exclude_characters="\x7f")
    | st.just("\t"),
    max_size=12,
).map(lambda v: v.strip(" \t"))
labels = st.from_regex(r"[a-z0-9]([a-z0-9-]{0,6}[a-z0-9])?", fullmatch=True)
hostnames = (
    st.just("")
    | st.sampled_from(["10.0.0.1", "[::1]"])
    | st.lists(labels, min_size=1, max_size=3).map(".".join)
)
paths = st.just("") | st.from_regex(r"(/[A-Za-z0-9._~:@!$&'()*+,;=-]{0,5}){1,3}", fullmatch=True)
origins = st.sampled_from(["*", "https://app.example.com", "http://*.example.org:8080"])
pairs = tuples(st.tuples(header_names, field_values))
path_modifiers = st.none() | st.builds(
    PathModifier, type=st.sampled_from(PathModifierType), value=paths
)
certificates = st.builds(
    TlsCertificate,
    server_names=tuples(names),
    certificate_chain_pem=st.binary(max_size=16),
    private_key_pem=st.binary(max_size=16),
    source=names,
)
tls = st.none() | st.builds(
    UpstreamTLS,
    sni=names,
    ca_bundle_pem=st.binary(max_size=8),
    system_roots=st.booleans(),
    subject_alt_names=tuples(names),
    subject_alt_uris=tuples(names),
    client_certificate=st.none() | certificates,
)
simple_filters = st.one_of(
    st.builds(RequestHeaderModifier, set=pairs, add=pairs, remove=tuples(header_names)),
    st.builds(ResponseHeaderModifier, set=pairs, add=pairs, remove=tuples(header_names)),
    st.builds(URLRewrite, hostname=hostnames, path=path_modifiers),
    st.builds(
        RequestRedirect,
        scheme=st.sampled_from(["", "http", "https"]),
        hostname=hostnames,
        port=st.integers(min_value=0, max_value=65535),
        path=path_modifiers,
        status_code=st.sampled_from([301, 302, 303, 307, 308]),
    ),
    st.builds(
        Cors,
        allow_origins=tuples(origins),
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
    st.builds(TlsStore, bind_port=ports, certificates=tuples(certificates), default_source=text),
    st.builds(
        ClientCaStore,
        bind_port=ports,
        ca_bundle_pem=st.binary(max_size=16),
        sources=tuples(names),
        mode=st.sampled_from(ClientValidationMode),
        server_name=st.just("") | names,
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
        backend_client_certificate=st.none() | certificates,
    ),
    st.builds(
        StreamRoute,
        bind_port=ports,
        protocol=st.sampled_from(ListenerProtocol),
        matches=tuples(
            st.builds(
                StreamMatch,
                id=route_ids,
                backends=tuples(leaf_backends),
                server_name=text,
                terminate=st.booleans(),
            )
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
        transport=st.sampled_from(Transport),
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
    udp = EndpointSet("ns", "svc", 53, (), Transport.UDP)
    assert to_wire(udp).key == "endpoints/ns/svc/53/udp"
    assert to_wire(HostRoutes("gateway/ns/gw", 8443, "", ())).key == "routes/gateway/ns/gw/8443/*"
    assert to_wire(StreamRoute(9000, ListenerProtocol.UDP, ())).key == "stream/udp/9000"


def test_a_tcp_endpoint_set_is_written_as_before_the_transport_field() -> None:
    # TRANSPORT_TCP is the enum's zero: a TCP set's bytes (and hash) are what they were before
    # UDP sets existed, so a proxy built before them decodes every TCP set unchanged.
    tcp = EndpointSet("ns", "svc", 80, (Endpoint("10.0.0.1", 8080),))
    message = to_wire(tcp)
    before = pb.EndpointSet(
        namespace="ns",
        service="svc",
        port=80,
        endpoints=[pb.Endpoint(address="10.0.0.1", port=8080, ready=True, serving=True)],
    )
    assert message.endpoint_set is not None
    assert bytes(message.endpoint_set) == bytes(before)
    assert from_wire(message) == tcp


def test_the_tls_fields_added_later_leave_older_bytes_alone() -> None:
    # A client CA store in the default mode, listeners without a backend client certificate and
    # an upstream without SAN URIs encode as they did before those fields existed, so a proxy
    # built before them decodes them unchanged (and their hashes do not move).
    store = to_wire(ClientCaStore(8443, b"ca", ("ConfigMap ns/ca",)))
    assert store.client_ca_store is not None
    old = pb.ClientCaStore(bind_port=8443, ca_bundle_pem=b"ca", sources=["ConfigMap ns/ca"])
    assert bytes(store.client_ca_store) == bytes(old)
    listeners = to_wire(GatewayListeners("ns", "gw", 1, ()))
    assert listeners.gateway_listeners is not None
    assert bytes(listeners.gateway_listeners) == bytes(
        pb.GatewayListeners(namespace="ns", name="gw", generation=1)
    )
    fallback = ClientCaStore(8443, b"ca", mode=ClientValidationMode.ALLOW_INSECURE_FALLBACK)
    assert from_wire(to_wire(fallback)) == fallback


def test_one_port_number_over_tcp_and_udp_is_two_endpoint_sets() -> None:
    tcp = EndpointSet("ns", "dns", 53, (Endpoint("10.0.0.1", 5353),))
    udp = EndpointSet("ns", "dns", 53, (Endpoint("10.0.0.1", 5354),), Transport.UDP)
    assert tcp.key != udp.key
    assert from_wire(to_wire(udp)) == udp


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


# ---------------------------------------------------------------- hand-made unsafe messages

KEY = "routes/ingress/80/x.example.com"


def hand_made(filter_: pb.Filter) -> pb.Resource:
    """A HostRoutes message built field by field, as no controller would: one rule, `filter_`."""
    rule = pb.Rule(
        id=pb.RouteId(kind="HTTPRoute", namespace="team", name="web"),
        filters=[filter_],
        backends=[pb.Backend(weight=1, endpoints="endpoints/team/web/80")],
    )
    routes = pb.HostRoutes(table="ingress", bind_port=80, host="x.example.com", rules=[rule])
    return pb.Resource(key=KEY, host_routes=routes)


def header_set(name: str, value: str) -> pb.HeaderModifier:
    return pb.HeaderModifier(set=[pb.Header(name=name, value=value)])


def full_path(value: str) -> pb.PathModifier:
    return pb.PathModifier(type=pb.PathModifierType.REPLACE_FULL_PATH, value=value)


@pytest.mark.parametrize(
    ("filter_", "field"),
    [
        pytest.param(
            pb.Filter(request_header_modifier=header_set("x-a", "a\r\nX-Injected: yes")),
            "filters[0].set[0].value",
            id="crlf-in-a-request-header-value",
        ),
        pytest.param(
            pb.Filter(response_header_modifier=header_set("x a", "1")),
            "filters[0].set[0].name",
            id="response-header-name-not-a-token",
        ),
        pytest.param(
            pb.Filter(request_header_modifier=header_set("Content-Length", "0")),
            "filters[0].set[0].name",
            id="framing-field-modified",
        ),
        pytest.param(
            pb.Filter(request_redirect=pb.RequestRedirect(hostname="a.example\r\nx: y")),
            "filters[0].hostname",
            id="redirect-hostname-not-a-name",
        ),
        pytest.param(
            pb.Filter(request_redirect=pb.RequestRedirect(port=70000)),
            "filters[0].port",
            id="redirect-port-out-of-range",
        ),
        pytest.param(
            pb.Filter(url_rewrite=pb.UrlRewrite(path=full_path("/a HTTP/1.1\r\nx: y"))),
            "filters[0].path.replaceFullPath",
            id="rewrite-path-with-space-and-crlf",
        ),
        pytest.param(
            pb.Filter(cors=pb.Cors(expose_headers=["x-id\r\nx-injected"])),
            "filters[0].exposeHeaders[0]",
            id="cors-expose-header-not-a-token",
        ),
        pytest.param(
            pb.Filter(
                request_mirror=pb.RequestMirror(
                    backend=pb.Backend(
                        filters=[pb.Filter(request_header_modifier=header_set("x", "\x00"))]
                    ),
                    numerator=1,
                    denominator=1,
                )
            ),
            "filters[0].backendRef.filters[0].set[0].value",
            id="nul-in-a-mirror-backends-filter",
        ),
    ],
)
def test_a_hand_made_message_with_an_unsafe_value_is_refused(
    filter_: pb.Filter, field: str
) -> None:
    with pytest.raises(UnsafeValue) as refused:
        from_wire(hand_made(filter_))
    assert f"resource {KEY!r}" in str(refused.value)
    assert "HTTPRoute team/web rule 0" in str(refused.value)
    assert f"{field}: " in str(refused.value)


@given(st.text(max_size=4), st.sampled_from("\r\n\x00\x7f\x1b"), st.text(max_size=4))
def test_no_control_character_in_a_header_value_gets_through(
    before: str, control: str, after: str
) -> None:
    message = hand_made(
        pb.Filter(request_header_modifier=header_set("x-a", before + control + after))
    )
    with pytest.raises(UnsafeValue, match=r"RFC 9110 §5\.5"):
        from_wire(message)


def test_an_unsafe_value_is_a_wire_error() -> None:
    assert issubclass(UnsafeValue, WireError)
