"""Writes held until the event loop has handled its batch of events, then made back to back.

Where it sits: one `Outbox` per worker (`Runtime.outbox`). `http11` sends what goes to a client
through it (its request cycles write through the connection), `upstream.connection` what goes
to a backend;
`flush` runs once per loop iteration that queued something (`call_soon`), or at once when a
transport is about to close or become a tunnel. An HTTP/2 connection (`Deferred`) is not handed
bytes but asks to be flushed (`later`): what all its streams sent in the batch goes in one write.

Why: on loopback a write runs the receiver's TCP path and wakes the receiver when it sleeps.
Spread across a batch's Python work, most writes found their receiver (wrk, the backend)
asleep again; made back to back after it, more find it still awake. Measured on the bench
(one worker, keep-alive): the proxy's kernel time per request fell from 13.2 to 10.7 µs and
throughput rose 15% over HTTP and HTTPS alike. The Python cost is one append per write and one
callback per batch (about 0.35 µs per request with ten connections per batch).

Order: one FIFO for every transport, so each transport gets its bytes in the order they were
sent; whoever closes a transport or writes to it directly (tunnels) calls `flush` first.
"""

from __future__ import annotations

import asyncio
from typing import Protocol


class Sink(Protocol):
    """What the outbox writes to: a transport (client or upstream, plain or TLS)."""

    def write(self, data: bytes) -> None: ...

    def is_closing(self) -> bool: ...


class Deferred(Protocol):
    """A connection that gathers its own bytes (HTTP/2 frames) and writes them in `flush`."""

    def flush(self) -> None: ...


class Outbox:
    __slots__ = ("loop", "held", "due", "scheduled")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.held: list[tuple[Sink, bytes]] = []
        self.due: list[Deferred] = []
        self.scheduled = False

    def write(self, transport: Sink, data: bytes) -> None:
        if not self.scheduled:
            self.scheduled = True
            self.loop.call_soon(self.flush)
        self.held.append((transport, data))

    def later(self, conn: Deferred) -> None:
        """`conn.flush()` at the batch's end: an HTTP/2 connection whose streams all answered in
        this batch writes their frames in one write, not one per stream. The caller asks once
        per batch (it keeps its own flag)."""
        if not self.scheduled:
            self.scheduled = True
            self.loop.call_soon(self.flush)
        self.due.append(conn)

    def flush(self) -> None:
        self.scheduled = False
        due = self.due
        if due:
            self.due = []
            for conn in due:
                conn.flush()
        held = self.held
        if held:
            self.held = []
            for transport, data in held:
                # A transport may have closed since (its peer left): what it held is moot.
                if not transport.is_closing():
                    transport.write(data)
