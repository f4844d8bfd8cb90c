"""A bug inside the controller stays where it is: one stream, never the others or the registries.

Over real gRPC and mTLS: code told of node changes (the Programmed gate) failing on every change
ends no stream and is counted; a failure while serving one stream ends that stream alone,
INTERNAL with fixed text (never the exception's), counted, its node released, while another
stream carries on. Forged input is hostile_test.py's.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import grpc
import grpc.aio
import pytest
from prometheus_client import REGISTRY

from coxswain_controller.conftest import Controller, subscribe
from coxswain_controller.translate.scopes import SHARED_POOL, GatewayScope, Identity
from coxswain_proto import discovery as pb
from coxswain_proto import rpc
from coxswain_routing import Endpoint, EndpointSet

WAIT = 15.0


def endpoints(address: str = "10.0.0.1") -> EndpointSet:
    return EndpointSet("shop", "web", 80, (Endpoint(address, 8080),))


async def wait_until(predicate: Callable[[], object]) -> None:
    """Poll state the server owns (it offers no event to wait on), within a generous bound."""
    async with asyncio.timeout(WAIT):
        while not predicate():  # noqa: ASYNC110
            await asyncio.sleep(0.01)


def counted(name: str) -> float:
    return REGISTRY.get_sample_value(name) or 0.0


async def acked_subscription(call: Any, node: str) -> pb.Snapshot:
    await call.write(subscribe(node))
    snapshot: pb.Snapshot = (await asyncio.wait_for(call.read(), WAIT)).snapshot
    await call.write(pb.ProxyMessage(ack=pb.Ack(version=snapshot.version, nonce=snapshot.nonce)))
    return snapshot


async def test_a_failing_node_change_listener_ends_no_stream(controller: Controller) -> None:
    def broken() -> None:
        raise RuntimeError("the gate has a bug")

    controller.nodes.subscribe(broken)
    before = counted("coxswain_discovery_node_listener_errors_total")
    controller.registry.publish({SHARED_POOL: [endpoints()]})
    call = controller.open()
    snapshot = await acked_subscription(call, "node-1")
    await wait_until(
        lambda: (
            (n := controller.nodes.get("node-1")) is not None
            and n.acked_version == snapshot.version
        )
    )
    controller.registry.publish({SHARED_POOL: [endpoints("10.0.0.2")]})
    assert not (await asyncio.wait_for(call.read(), WAIT)).snapshot.full
    # Told of the register and of the ack, failing each time; the stream never noticed.
    assert counted("coxswain_discovery_node_listener_errors_total") == before + 2


async def test_a_bug_serving_one_stream_ends_it_alone_with_internal(
    controller: Controller, monkeypatch: pytest.MonkeyPatch
) -> None:
    gateway = GatewayScope("shop", "gw")
    controller.registry.set_gateway_identities({gateway: Identity("shop", "gw-coxswain")})
    controller.registry.publish({SHARED_POOL: [endpoints()], gateway: [endpoints()]})
    shared = controller.open()
    await acked_subscription(shared, "shared-1")

    current = controller.registry.current

    def broken(scope: Any) -> Any:
        if scope == gateway:
            raise RuntimeError("secret internals")
        return current(scope)

    monkeypatch.setattr(controller.registry, "current", broken)
    before = counted("coxswain_discovery_stream_errors_total")
    dedicated = controller.open(controller.svid("shop", "gw-coxswain"))
    await dedicated.write(
        subscribe("gw-1", scope=pb.Scope(gateway=pb.ScopeGateway(namespace="shop", name="gw")))
    )
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await asyncio.wait_for(dedicated.read(), WAIT)
    assert (caught.value.code(), caught.value.details()) == (
        grpc.StatusCode.INTERNAL,
        rpc.INTERNAL_DETAIL,
    )
    assert counted("coxswain_discovery_stream_errors_total") == before + 1
    await wait_until(lambda: controller.nodes.get("gw-1") is None)

    # The other stream is served on: the next publish reaches it as a delta.
    controller.registry.publish({SHARED_POOL: [endpoints("10.0.0.2")], gateway: []})
    assert (await asyncio.wait_for(shared.read(), WAIT)).snapshot.full is False
