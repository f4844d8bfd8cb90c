"""The discovery client against an in-test controller and identity service, over real mTLS gRPC.

Covers: subscribe and NodeStatus on open, full snapshots applied and acked with their nonce,
deltas reaching the same version as a full snapshot, Nack with the last good routing kept (wrong
version, undecodable resource, a hand-made route carrying a header value with CR LF, with real
requests through a real data plane still served by the last good routing and nothing injected
upstream), NodeStatus after a bind change, reconnecting after the
controller goes away without dropping routing, "not the leader" retried at once on the next
endpoint, a wire-version mismatch stopping discovery, SVID renewal at half-life on a
fast-forwarded clock. Leaves out the staging rules themselves (snapshot_test.py) and SVID
verification details (svid_test.py).
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import grpc
import pytest

from coxswain_devkit.echo import EchoServer
from coxswain_proto import discovery as pb
from coxswain_proto import rpc
from coxswain_proxy import testkit
from coxswain_proxy.conftest import StartController, StartProxy
from coxswain_proxy.dataplane import testing as t
from coxswain_proxy.discovery.backoff import BackoffPolicy
from coxswain_proxy.discovery.lifecycle import Phase
from coxswain_proxy.discovery.ports import ReportedPort
from coxswain_proxy.discovery.stream import nack_detail
from coxswain_proxy.testkit import ServerStream, answers, delta, full, routes, within
from coxswain_routing import RequestHeaderModifier, snapshot_version

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


async def test_a_full_snapshot_larger_than_grpcs_default_receive_limit_is_applied(
    start_controller: StartController, start_proxy: StartProxy
) -> None:
    # A proxy that reconnects to a large cluster is sent everything at once; gRPC's default
    # 4 MiB receive limit would refuse that on every dial.
    controller = await start_controller()
    proxy = start_proxy(controller.port)
    stream = await controller.next_stream()
    await opened(stream)
    hosts = [routes(f"h{i}.example.com", f"r{i}") for i in range(30_000)]
    snapshot = full(hosts, nonce="big")
    assert len(bytes(pb.ControllerMessage(snapshot=snapshot))) > 4 * 1024 * 1024

    ack = await serve_first(stream, snapshot)

    assert (ack.version, ack.nonce) == (snapshot.version, "big")
    state = proxy.holder.state
    assert state is not None
    assert answers(state, "h29999.example.com")


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


def injected_route(key: str) -> pb.Resource:
    """`key`'s route as a hand-made wire message (no controller, no model): its one rule sets
    a request header whose value would add a field of its own to the head sent upstream."""
    injected = pb.Header(name="x-env", value="prod\r\nX-Injected: yes")
    rule = pb.Rule(
        id=pb.RouteId(kind="HTTPRoute", namespace="default", name="web"),
        matches=[pb.Match(path=pb.PathMatch(type=pb.PathType.PATH_PREFIX, value="/"))],
        filters=[pb.Filter(request_header_modifier=pb.HeaderModifier(set=[injected]))],
        backends=[pb.Backend(weight=1, endpoints="endpoints/default/echo/80")],
    )
    routes = pb.HostRoutes(
        table="gateway/default/gw", bind_port=t.PORT, host="example.com", rules=[rule]
    )
    return pb.Resource(key=key, host_routes=routes)


async def echoed_headers(client: t.Client) -> dict[str, Any]:
    response = await client.request()
    assert response.status == 200
    return {k.lower(): v for k, v in json.loads(response.body)["headers"].items()}


async def test_a_hand_made_route_injecting_a_header_is_nacked_and_the_last_good_one_serves(
    start_controller: StartController, start_proxy: StartProxy
) -> None:
    controller = await start_controller()
    proxy = start_proxy(controller.port)
    async with EchoServer() as echo, t.running([]) as plane:
        proxy.holder.on_apply(lambda state: plane.apply(state.resources, state.version))
        stream = await controller.next_stream()
        await opened(stream)
        setting = RequestHeaderModifier(set=(("x-env", "prod"),))
        route = t.routes("example.com", t.rule("web", t.backend("echo"), filters=(setting,)))
        await serve_first(stream, full([t.HTTP_LISTENER, t.endpoints("echo", echo.port), route]))
        good = proxy.holder.state
        assert good is not None

        bad = injected_route(route.key)
        hashes = {**good.hashes, route.key: hashlib.sha256(bytes(bad)).hexdigest()}
        stream.send(pb.Snapshot(version=snapshot_version(hashes), nonce="bad", resources=[bad]))
        nack = await stream.expect("nack")

        assert nack.nonce == "bad"
        assert f"resource {route.key!r}" in nack.detail
        assert "HTTPRoute default/web rule 0" in nack.detail
        assert "filters[0].set[0].value" in nack.detail
        assert proxy.holder.state is good
        async with t.client(t.actual(plane)) as client:
            for _ in range(2):  # the second on the pooled upstream connection
                headers = await echoed_headers(client)
                assert headers["x-env"] == ["prod"] and "x-injected" not in headers


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
    proxy.binder.set_bound(
        [ReportedPort(8443, pb.ListenerProtocol.HTTPS), ReportedPort(8080, http)]
    )
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


def test_a_nack_reason_is_cut_below_what_the_controller_accepts() -> None:
    # The controller ends a stream whose Nack detail is over 16 KiB; a reconnect would repeat it.
    reason = "resource 'routes/x' rule 0: bad value; " * 5000
    detail = nack_detail(reason)
    assert len(detail.encode()) < 16 * 1024
    assert detail.startswith("resource 'routes/x' rule 0")
    assert detail.endswith("more characters)")
    assert nack_detail("short reason") == "short reason"
