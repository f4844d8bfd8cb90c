"""The discovery client against an in-test controller and identity service, over real mTLS gRPC.

Covers: subscribe and NodeStatus on open, full snapshots applied and acked with their nonce,
deltas reaching the same version as a full snapshot, Nack with the last good routing kept (wrong
version, undecodable resource), NodeStatus after a bind change, reconnecting after the
controller goes away without dropping routing, "not the leader" retried at once on the next
endpoint, a wire-version mismatch stopping discovery, SVID renewal at half-life on a
fast-forwarded clock. Leaves out the staging rules themselves (snapshot_test.py) and SVID
verification details (svid_test.py).
"""

from __future__ import annotations

import grpc
import pytest

from coxswain_proto import discovery as pb
from coxswain_proto import rpc
from coxswain_proxy import testkit
from coxswain_proxy.backoff import BackoffPolicy
from coxswain_proxy.conftest import StartController, StartProxy
from coxswain_proxy.lifecycle import Phase
from coxswain_proxy.ports import Bound
from coxswain_proxy.testkit import ServerStream, answers, delta, full, routes, within

A, B = routes("a.example.com", "a"), routes("b.example.com", "b")


async def opened(stream: ServerStream) -> pb.Subscribe:
    """The proxy's opening: Subscribe, and nothing else until a snapshot arrives."""
    subscribe: pb.Subscribe = await stream.expect("subscribe")
    return subscribe


async def serve_first(stream: ServerStream, snapshot: pb.Snapshot) -> pb.Ack:
    """The first snapshot on a stream: answered by the opening NodeStatus, then the Ack."""
    stream.send(snapshot)
    await stream.expect("node_status")
    ack: pb.Ack = await stream.expect("ack")
    return ack


async def test_subscribes_with_its_identity_applies_a_full_snapshot_and_acks_its_nonce(
    start_controller: StartController, start_proxy: StartProxy
) -> None:
    controller = await start_controller()
    proxy = start_proxy(controller.port)
    stream = await controller.next_stream()
    subscribe = await opened(stream)
    assert subscribe.node_id == "proxy-1"
    assert subscribe.wire_version == rpc.WIRE_VERSION
    assert subscribe.scope == pb.Scope(shared_pool=pb.ScopeSharedPool())
    assert stream.peer_spiffe_id == testkit.PROXY_ID

    snapshot = full([A], nonce="first", seq=7)
    ack = await serve_first(stream, snapshot)

    assert (ack.version, ack.nonce) == (snapshot.version, "first")
    state = proxy.holder.state
    assert state is not None
    assert (state.version, state.publish_seq) == (snapshot.version, 7)
    assert answers(state, "a.example.com")
    assert proxy.client.phase is Phase.STREAMING


async def test_dedicated_scope_is_sent_as_a_gateway(
    start_controller: StartController, start_proxy: StartProxy
) -> None:
    controller = await start_controller()
    scope = pb.Scope(gateway=pb.ScopeGateway(namespace="team", name="gw"))
    start_proxy(controller.port, scope=scope)
    subscribe = await opened(await controller.next_stream())
    assert subscribe.scope == scope


async def test_a_delta_reaches_the_version_a_full_snapshot_of_the_same_content_has(
    start_controller: StartController, start_proxy: StartProxy
) -> None:
    controller = await start_controller()
    proxy = start_proxy(controller.port)
    stream = await controller.next_stream()
    await opened(stream)
    await serve_first(stream, full([A]))

    step = delta([B], changed=[B], removed=[A.key], nonce="second", seq=2)
    stream.send(step)
    ack = await stream.expect("ack")

    assert ack.nonce == "second"
    assert ack.version == full([B]).version
    state = proxy.holder.state
    assert state is not None
    assert answers(state, "b.example.com")
    assert not answers(state, "a.example.com")


async def test_a_version_mismatch_is_nacked_and_the_last_good_routing_kept(
    start_controller: StartController, start_proxy: StartProxy
) -> None:
    controller = await start_controller()
    proxy = start_proxy(controller.port)
    stream = await controller.next_stream()
    await opened(stream)
    await serve_first(stream, full([A]))
    good = proxy.holder.state

    lying = delta([A], changed=[B], nonce="bad")  # adds B, claims the version of {A}
    stream.send(lying)
    nack = await stream.expect("nack")

    assert nack.nonce == "bad"
    assert "hash to" in nack.detail
    assert proxy.holder.state is good


async def test_an_undecodable_resource_is_nacked_and_the_last_good_routing_kept(
    start_controller: StartController, start_proxy: StartProxy
) -> None:
    controller = await start_controller()
    proxy = start_proxy(controller.port)
    stream = await controller.next_stream()
    await opened(stream)
    await serve_first(stream, full([A]))
    good = proxy.holder.state

    broken = full([B], nonce="broken")
    broken.resources.append(pb.Resource(key="routes/from/the/future"))  # no body we know
    stream.send(broken)
    nack = await stream.expect("nack")

    assert nack.nonce == "broken"
    assert "routes/from/the/future" in nack.detail
    assert proxy.holder.state is good


async def test_node_status_is_sent_on_open_and_after_every_bind_change(
    start_controller: StartController, start_proxy: StartProxy
) -> None:
    controller = await start_controller()
    proxy = start_proxy(controller.port)
    stream = await controller.next_stream()
    await opened(stream)
    stream.send(full([A]))
    assert (await stream.expect("node_status")).bound == []
    await stream.expect("ack")

    http = pb.ListenerProtocol.HTTP
    proxy.binder.set_bound([Bound(8443, pb.ListenerProtocol.HTTPS), Bound(8080, http)])
    status = await stream.expect("node_status")

    assert [(b.port, b.protocol) for b in status.bound] == [
        (8080, http),
        (8443, pb.ListenerProtocol.HTTPS),
    ]


async def test_reconnects_after_the_controller_goes_away_and_keeps_routing(
    start_controller: StartController, start_proxy: StartProxy
) -> None:
    first, second = await start_controller(), await start_controller()
    proxy = start_proxy(first.port, second.port)
    stream = await first.next_stream()
    await opened(stream)
    await serve_first(stream, full([A]))
    held = proxy.holder.state

    assert first.server is not None
    await first.server.stop(grace=None)
    resumed = await second.next_stream()
    await opened(resumed)

    # Resubscribed, nothing received yet on the new stream: the old routing still answers.
    assert proxy.holder.state is held
    assert held is not None and answers(held, "a.example.com")
    ack = await serve_first(resumed, full([A, B], nonce="again", seq=2))
    assert ack.nonce == "again"


async def test_not_the_leader_is_retried_at_once_on_the_next_endpoint(
    start_controller: StartController, start_proxy: StartProxy
) -> None:
    standby, leader = await start_controller(), await start_controller()
    standby.refuse(grpc.StatusCode.FAILED_PRECONDITION, "not the leader", before_reading=True)
    # An hour's backoff: had the client waited at all, next_stream() would time out.
    start_proxy(standby.port, leader.port, backoff=BackoffPolicy(3600.0, 3600.0, 3600.0))

    stream = await leader.next_stream()
    await opened(stream)

    assert standby.refused == 1


async def test_a_wire_version_mismatch_stops_retrying(
    start_controller: StartController, start_proxy: StartProxy
) -> None:
    controller = await start_controller()
    details = (
        f"wire version mismatch: the proxy speaks {rpc.WIRE_VERSION}, this controller speaks 9"
    )
    controller.refuse(grpc.StatusCode.FAILED_PRECONDITION, details)
    proxy = start_proxy(controller.port)

    await within(proxy.task)

    assert proxy.client.phase is Phase.STOPPED
    assert controller.refused == 1
    assert controller.streams.empty()
    [reason] = proxy.stopped
    assert f"speaks wire version {rpc.WIRE_VERSION}" in reason
    assert "this controller speaks 9" in reason


@pytest.mark.parametrize(
    ("code", "details"),
    [
        pytest.param(grpc.StatusCode.PERMISSION_DENIED, "scope refused", id="permission-denied"),
        pytest.param(grpc.StatusCode.ALREADY_EXISTS, "node id taken", id="already-exists"),
        pytest.param(grpc.StatusCode.INVALID_ARGUMENT, "malformed scope", id="invalid-argument"),
    ],
)
async def test_refusals_that_may_be_fixed_later_are_retried(
    start_controller: StartController,
    start_proxy: StartProxy,
    code: grpc.StatusCode,
    details: str,
) -> None:
    controller = await start_controller()
    controller.refuse(code, details)
    start_proxy(controller.port)

    await opened(await controller.next_stream())
    assert controller.refused == 1
