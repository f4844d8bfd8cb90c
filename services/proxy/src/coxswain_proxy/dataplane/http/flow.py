"""Flow control between a client connection and its upstream: reading pauses while any reason holds.

Where it sits: `http11.HttpConnection` and every upstream connection (`upstream.shell`) own a
`ReadGate` for their transport; the request cycle between them pauses and resumes each through
`contracts.Downstream` and `contracts.Upstream`. The other side pauses it when its own write buffer
passes the high-water mark (asyncio's `pause_writing`) and resumes it on `resume_writing`, so a fast
sender never fills the proxy's memory with what a slow receiver has not taken. Several independent
reasons can hold a connection's reading (a pipelined request waiting its turn, a full upstream
buffer, a request body waiting for its upstream connection), so each is a bit and reading resumes
when none is left.
"""

from __future__ import annotations

import asyncio

PIPELINE = 1  # a pipelined request waits for the one before it
PEER_FULL = 2  # the other side's write buffer is above its high-water mark
BODY_WAIT = 4  # a request body is buffered while its upstream connection is being opened
UPGRADE = 8  # an Upgrade request waits for the upstream's answer

# Write buffer limits for every transport of the data plane: big enough for a typical response
# in one piece, small enough that ten thousand slow clients do not hold gigabytes.
HIGH_WATER = 256 * 1024
LOW_WATER = 64 * 1024


class ReadGate:
    __slots__ = ("transport", "held")

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.held = 0  # a bit per reason currently pausing reading

    def pause(self, reason: int) -> None:
        if not self.held and self.transport is not None and not self.transport.is_closing():
            self.transport.pause_reading()
        self.held |= reason

    def resume(self, reason: int) -> None:
        if not self.held & reason:
            return
        self.held &= ~reason
        if not self.held and self.transport is not None and not self.transport.is_closing():
            self.transport.resume_reading()


def limit_writes(transport: asyncio.Transport) -> None:
    transport.set_write_buffer_limits(high=HIGH_WATER, low=LOW_WATER)
