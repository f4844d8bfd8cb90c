"""SVID renewal at half-life, on a clock that moves only when the test advances it.

Covers: the renewal waits for half the SVID's lifetime, obtains a new SVID, closes the stream
gracefully and resubscribes with the new certificate, while the held routing stays the same
object throughout. Leaves out renewal failures being retried (the same backoff as dialling).
"""

from __future__ import annotations

import time

import pytest
from cryptography.hazmat.primitives import serialization

from coxswain_proxy import testkit
from coxswain_proxy.conftest import StartController, StartProxy
from coxswain_proxy.testkit import FakeClock, full, routes, within


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(time.time())


async def test_renews_at_half_life_and_reconnects_with_the_new_svid_keeping_routing(
    start_controller: StartController,
    start_proxy: StartProxy,
    clock: FakeClock,
    identity: testkit.Identity,
) -> None:
    controller = await start_controller()
    proxy = start_proxy(controller.port)
    stream = await controller.next_stream()
    await stream.expect("subscribe")
    stream.send(full([routes("a.example.com")]))
    await stream.expect("node_status")
    await stream.expect("ack")
    held = proxy.holder.state
    first = proxy.client.svid
    assert first is not None

    await within(clock.sleeping.wait())  # the renewal is waiting for half-life
    clock.advance(first.renew_at - clock.now() - 1)
    assert len(identity.issued) == 1, "renewed before half-life"
    clock.advance(2)
    resumed = await controller.next_stream()
    await resumed.expect("subscribe")
    await within(stream.client_done.wait())

    pem = [c.public_bytes(serialization.Encoding.PEM) for c in identity.issued]
    assert len(pem) == 2
    assert stream.peer_cert_pem == pem[0]
    assert resumed.peer_cert_pem == pem[1]
    assert proxy.holder.state is held
