"""The discovery server over real gRPC and real mTLS: every refusal, and the snapshot flow.

Covers the admission checks in order (leader, SPIFFE identity, Subscribe first, wire version,
scope shape, scope authorisation, node_id ownership), the TLS handshake refusing another CA,
demotion closing live streams, full-then-delta with one snapshot in flight, coalescing, Nack
followed by a full, deltas reaching the same version as a full, and Ack / NodeStatus reaching
the node registry. Leaves out the pure bookkeeping rules (session_test.py, scopes_test.py).
"""

from __future__ import annotations

import asyncio
from typing import Any

import grpc
import grpc.aio
import pytest

from coxswain_controller.conftest import TRUST_DOMAIN, Controller, subscribe
from coxswain_controller.translate.scopes import SHARED_POOL, GatewayScope, Identity
from coxswain_devkit.pki import CertificateAuthority, spiffe_id
from coxswain_proto import discovery as pb
from coxswain_routing import (
    Endpoint,
    EndpointSet,
    ListenerProtocol,
    from_wire,
    resource_hash,
    snapshot_version,
)

WAIT = 10.0


def endpoints(service: str, *addresses: str) -> EndpointSet:
    return EndpointSet("shop", service, 80, tuple(Endpoint(a, 8080) for a in addresses))


async def refused(call: Any) -> grpc.aio.AioRpcError:
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await asyncio.wait_for(call.read(), WAIT)
    return caught.value


async def snapshot(call: Any) -> pb.Snapshot:
    message = await asyncio.wait_for(call.read(), WAIT)
    assert message is not grpc.aio.EOF and message.snapshot is not None
    return message.snapshot


async def ack(call: Any, snap: pb.Snapshot) -> None:
    await call.write(pb.ProxyMessage(ack=pb.Ack(version=snap.version, nonce=snap.nonce)))


async def wait_until(predicate: Any) -> None:
    """Poll state the server owns (it offers no event to wait on), within a generous bound."""
    async with asyncio.timeout(WAIT):
        while not predicate():  # noqa: ASYNC110
            await asyncio.sleep(0.01)


# ------------------------------------------------------------------------ refusals


async def test_a_standby_refuses_with_not_the_leader_then_the_leader_serves(
    controller: Controller,
) -> None:
    controller.registry.publish({SHARED_POOL: [endpoints("a", "10.0.0.1")]})
    controller.leadership.set(False)
    call = controller.open()
    await call.write(subscribe())
    err = await refused(call)
    assert (err.code(), err.details()) == (grpc.StatusCode.FAILED_PRECONDITION, "not the leader")

    controller.leadership.set(True)
    call = controller.open()
    await call.write(subscribe())
    assert (await snapshot(call)).full


async def test_the_first_message_must_be_subscribe(controller: Controller) -> None:
    call = controller.open()
    await call.write(pb.ProxyMessage(ack=pb.Ack(version="v", nonce="n")))
    err = await refused(call)
    assert err.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert "Subscribe" in err.details()


async def test_a_wire_version_mismatch_names_both_versions(controller: Controller) -> None:
    call = controller.open()
    await call.write(subscribe(wire_version=99))
    err = await refused(call)
    assert err.code() is grpc.StatusCode.FAILED_PRECONDITION
    assert "99" in err.details() and "speaks 1" in err.details()


async def test_a_scope_without_a_kind_is_malformed_never_shared_pool(
    controller: Controller,
) -> None:
    controller.registry.publish({SHARED_POOL: [endpoints("a", "10.0.0.1")]})
    call = controller.open()
    await call.write(subscribe(scope=pb.Scope()))
    err = await refused(call)
    assert err.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert "no kind" in err.details()


async def test_no_scope_means_shared_pool(controller: Controller) -> None:
    controller.registry.publish({SHARED_POOL: [endpoints("a", "10.0.0.1")]})
    call = controller.open()
    await call.write(subscribe(scope=None))
    assert (await snapshot(call)).version == controller.registry.current(SHARED_POOL).version  # type: ignore[union-attr]


async def test_shared_pool_only_for_the_shared_proxy_identity(controller: Controller) -> None:
    call = controller.open(controller.svid("shop", "gw-coxswain"))
    await call.write(subscribe())
    err = await refused(call)
    assert err.code() is grpc.StatusCode.PERMISSION_DENIED
    assert "ns/shop/sa/gw-coxswain may not subscribe to SharedPool" in err.details()


@pytest.mark.parametrize(
    ("namespace", "sa", "allowed"),
    [
        pytest.param("shop", "gw-coxswain", True, id="expected-gateway-sa"),
        pytest.param("shop", "other", False, id="other-sa-same-namespace"),
        pytest.param("other", "gw-coxswain", False, id="same-name-other-namespace"),
        pytest.param(
            "coxswain-system", "coxswain-proxy", False, id="shared-proxy-cannot-take-a-gateway"
        ),
    ],
)
async def test_gateway_scope_only_for_that_gateways_service_account(
    controller: Controller, namespace: str, sa: str, allowed: bool
) -> None:
    gateway = GatewayScope("shop", "gw")
    controller.registry.set_gateway_identities({gateway: Identity("shop", "gw-coxswain")})
    controller.registry.publish({gateway: [endpoints("a", "10.0.0.1")]})
    call = controller.open(controller.svid(namespace, sa))
    await call.write(
        subscribe(scope=pb.Scope(gateway=pb.ScopeGateway(namespace="shop", name="gw")))
    )
    if allowed:
        assert (await snapshot(call)).full
    else:
        err = await refused(call)
        assert err.code() is grpc.StatusCode.PERMISSION_DENIED


async def test_an_unknown_gateway_scope_is_denied(controller: Controller) -> None:
    call = controller.open(controller.svid("shop", "gw-coxswain"))
    await call.write(
        subscribe(scope=pb.Scope(gateway=pb.ScopeGateway(namespace="shop", name="gw")))
    )
    err = await refused(call)
    assert err.code() is grpc.StatusCode.PERMISSION_DENIED
    assert "not a dedicated Gateway" in err.details()


async def test_a_certificate_from_another_trust_domain_is_unauthenticated(
    controller: Controller,
) -> None:
    cert = controller.ca.issue(
        uris=[spiffe_id("evil.example", "coxswain-system", "coxswain-proxy")]
    )
    call = controller.open(cert)
    await call.write(subscribe())
    err = await refused(call)
    assert err.code() is grpc.StatusCode.UNAUTHENTICATED


async def test_a_certificate_from_another_ca_fails_the_handshake(controller: Controller) -> None:
    other = CertificateAuthority.create("another CA")
    cert = other.issue(uris=[spiffe_id(TRUST_DOMAIN, "coxswain-system", "coxswain-proxy")])
    call = controller.open(cert)
    err = await refused(call)
    assert err.code() is grpc.StatusCode.UNAVAILABLE
    assert controller.nodes.all() == []


async def test_a_node_id_held_by_another_identity_is_refused(controller: Controller) -> None:
    gateway = GatewayScope("shop", "gw")
    controller.registry.set_gateway_identities({gateway: Identity("shop", "gw-coxswain")})
    controller.registry.publish({SHARED_POOL: [endpoints("a", "10.0.0.1")], gateway: []})
    first = controller.open()
    await first.write(subscribe("node-1"))
    await snapshot(first)
    second = controller.open(controller.svid("shop", "gw-coxswain"))
    await second.write(
        subscribe("node-1", scope=pb.Scope(gateway=pb.ScopeGateway(namespace="shop", name="gw")))
    )
    err = await refused(second)
    assert err.code() is grpc.StatusCode.ALREADY_EXISTS


async def test_the_same_node_reconnecting_replaces_its_old_stream(controller: Controller) -> None:
    controller.registry.publish({SHARED_POOL: [endpoints("a", "10.0.0.1")]})
    old = controller.open()
    await old.write(subscribe("node-1"))
    await snapshot(old)
    new = controller.open()
    await new.write(subscribe("node-1"))
    assert (await snapshot(new)).full
    err = await refused(old)
    assert err.code() is grpc.StatusCode.ABORTED


async def test_demotion_closes_live_streams(controller: Controller) -> None:
    controller.registry.publish({SHARED_POOL: [endpoints("a", "10.0.0.1")]})
    call = controller.open()
    await call.write(subscribe())
    await snapshot(call)
    controller.leadership.set(False)
    err = await refused(call)
    assert (err.code(), err.details()) == (grpc.StatusCode.FAILED_PRECONDITION, "not the leader")


# ------------------------------------------------------------------------ snapshots


async def test_full_first_then_deltas_one_in_flight_changes_coalesced(
    controller: Controller,
) -> None:
    registry = controller.registry
    registry.publish({SHARED_POOL: [endpoints("a", "10.0.0.1"), endpoints("b", "10.0.0.2")]})
    call = controller.open()
    await call.write(subscribe())
    full = await snapshot(call)
    assert full.full and [r.key for r in full.resources] == [
        "endpoints/shop/a/80",
        "endpoints/shop/b/80",
    ]

    # Two publishes before the Ack: nothing is sent until the Ack, then one coalesced delta.
    registry.publish({SHARED_POOL: [endpoints("a", "10.0.0.9"), endpoints("b", "10.0.0.2")]})
    registry.publish({SHARED_POOL: [endpoints("a", "10.0.0.9")]})
    await ack(call, full)
    delta = await snapshot(call)
    assert not delta.full
    assert [r.key for r in delta.resources] == ["endpoints/shop/a/80"]
    assert delta.removed == ["endpoints/shop/b/80"]
    assert delta.version == registry.current(SHARED_POOL).version  # type: ignore[union-attr]
    assert delta.publish_seq == registry.seq


async def test_deltas_reach_the_same_version_as_a_full(controller: Controller) -> None:
    registry = controller.registry
    registry.publish({SHARED_POOL: [endpoints("a", "10.0.0.1")]})
    call = controller.open()
    await call.write(subscribe())
    held: dict[str, str] = {}
    snap = await snapshot(call)
    for step in (["a", "b"], ["b"], ["b", "c"]):
        held = {} if snap.full else held
        for key in snap.removed:
            held.pop(key, None)
        for message in snap.resources:
            held[message.key] = resource_hash(from_wire(message))
        assert snapshot_version(held) == snap.version
        await ack(call, snap)
        registry.publish({SHARED_POOL: [endpoints(s, "10.0.1.1") for s in step]})
        snap = await snapshot(call)
    late = controller.open()
    await late.write(subscribe("proxy-2"))
    assert (await snapshot(late)).version == snap.version


async def test_a_nack_is_followed_by_a_full_snapshot(controller: Controller) -> None:
    registry = controller.registry
    registry.publish({SHARED_POOL: [endpoints("a", "10.0.0.1")]})
    call = controller.open()
    await call.write(subscribe())
    full = await snapshot(call)
    await ack(call, full)
    registry.publish({SHARED_POOL: [endpoints("a", "10.0.0.2")]})
    delta = await snapshot(call)
    assert not delta.full
    await call.write(
        pb.ProxyMessage(nack=pb.Nack(version=delta.version, nonce=delta.nonce, detail="bad"))
    )
    again = await snapshot(call)
    assert again.full and again.version == delta.version


async def test_acks_and_node_status_reach_the_node_registry(controller: Controller) -> None:
    controller.registry.publish({SHARED_POOL: [endpoints("a", "10.0.0.1")]})
    call = controller.open()
    await call.write(subscribe("node-7"))
    snap = await snapshot(call)
    bound = [
        pb.BoundPort(port=8443, protocol=pb.ListenerProtocol.HTTPS),
        pb.BoundPort(port=80, protocol=pb.ListenerProtocol.HTTP),
    ]
    await call.write(pb.ProxyMessage(node_status=pb.NodeStatus(bound=bound)))
    await ack(call, snap)
    await wait_until(
        lambda: (
            (n := controller.nodes.get("node-7")) is not None and n.acked_version == snap.version
        )
    )
    node = controller.nodes.get("node-7")
    assert node is not None
    assert node.acked_seq == snap.publish_seq
    assert node.bound == ((80, ListenerProtocol.HTTP.name), (8443, ListenerProtocol.HTTPS.name))
    assert node.identity == Identity("coxswain-system", "coxswain-proxy")


async def test_an_ack_for_another_nonce_is_ignored(controller: Controller) -> None:
    controller.registry.publish({SHARED_POOL: [endpoints("a", "10.0.0.1")]})
    call = controller.open()
    await call.write(subscribe("node-8"))
    snap = await snapshot(call)
    await call.write(pb.ProxyMessage(ack=pb.Ack(version=snap.version, nonce="forged")))
    # Messages are handled in order: once this NodeStatus lands, the forged Ack has been seen.
    marker = [pb.BoundPort(port=1, protocol=pb.ListenerProtocol.TCP)]
    await call.write(pb.ProxyMessage(node_status=pb.NodeStatus(bound=marker)))
    await wait_until(lambda: (n := controller.nodes.get("node-8")) is not None and n.bound != ())
    node = controller.nodes.get("node-8")
    assert node is not None and node.acked_version == ""
    await ack(call, snap)
    await wait_until(lambda: node.acked_version == snap.version)


async def test_malformed_bytes_end_only_that_stream(controller: Controller) -> None:
    controller.registry.publish({SHARED_POOL: [endpoints("a", "10.0.0.1")]})
    channel = controller.channel(controller.svid())
    raw = channel.stream_stream(
        "/coxswain.discovery.v1.Discovery/Stream",
        request_serializer=lambda data: data,
        response_deserializer=pb.ControllerMessage.parse,
    )()
    await raw.write(b"\xff\xff\xff\xff not a protobuf")
    err = await refused(raw)
    assert err.code() in (grpc.StatusCode.INTERNAL, grpc.StatusCode.INVALID_ARGUMENT)
    # The server is unharmed: a well-formed stream is served next.
    call = controller.open()
    await call.write(subscribe("after-garbage"))
    assert (await snapshot(call)).full
