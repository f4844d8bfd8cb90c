"""The outbox's promises, on fake transports: held until the loop runs, then each transport's
bytes in the order they were sent; `flush` sends at once; a transport that closed gets nothing.

Leaves out what the connections do with it (flushing before a close or a tunnel): the
end-to-end tests cover those through the order and completeness of what clients receive.
"""

from __future__ import annotations

import asyncio

from coxswain_proxy.dataplane.http.outbox import Outbox


class _Transport:
    def __init__(self) -> None:
        self.sent: list[bytes] = []
        self.closing = False

    def write(self, data: bytes) -> None:
        self.sent.append(data)

    def is_closing(self) -> bool:
        return self.closing


async def test_writes_wait_for_the_loop_then_go_out_in_order() -> None:
    outbox = Outbox(asyncio.get_running_loop())
    a, b = _Transport(), _Transport()
    for transport, data in ((a, b"a1"), (b, b"b1"), (a, b"a2")):
        outbox.write(transport, data)
    assert a.sent == [] and b.sent == []
    await asyncio.sleep(0)
    assert a.sent == [b"a1", b"a2"] and b.sent == [b"b1"]
    outbox.write(a, b"a3")
    await asyncio.sleep(0)
    assert a.sent == [b"a1", b"a2", b"a3"]


async def test_flush_sends_at_once_and_nothing_twice() -> None:
    outbox = Outbox(asyncio.get_running_loop())
    a = _Transport()
    outbox.write(a, b"head")
    outbox.flush()
    assert a.sent == [b"head"]
    await asyncio.sleep(0)
    assert a.sent == [b"head"]


async def test_a_transport_closed_meanwhile_gets_nothing() -> None:
    outbox = Outbox(asyncio.get_running_loop())
    gone, kept = _Transport(), _Transport()
    outbox.write(gone, b"late")
    outbox.write(kept, b"on time")
    gone.closing = True
    await asyncio.sleep(0)
    assert gone.sent == [] and kept.sent == [b"on time"]
