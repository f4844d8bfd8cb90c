"""Evening out the workers' shares of client connections: the kernel's hash, then a handover.

Where it sits: with `--workers N > 1` every worker binds each HTTP/HTTPS port with SO_REUSEPORT
and the kernel picks a worker for each new connection by a hash of its addresses. That costs
nothing but is a draw: with 50 connections one of 4 workers holds more than 1.3x its share in
about a third of the draws (`bench/worker_balance.py`). So each worker's `Balancer` wraps its
listeners' protocol factories (`listeners.Listeners(accepting=)`): a worker that accepts a
connection while over its share of all the workers' open connections (`RATIO`, `SLACK`) hands
the socket, before a byte of it is read, to the worker with the fewest (SCM_RIGHTS over a Unix
datagram socket), which serves it as if it had accepted it, TLS handshake included. A connection
kept where it landed costs two set sizes, one store and one comparison with a limit worked out
again only when reached (`_crowded`) and each `REFRESH` seconds.

What is shared, made before fork (`Board`): an anonymous shared mapping of N x (N + 1) 64-bit
cells and a datagram socketpair per worker, its inbox. Cell i holds worker i's open connections
(`Runtime.connections` and `.handshakes`, and those handed to it still being set up); cell
N + j*N + i counts the connections worker j has taken from worker i. Each cell has one writer,
its worker; the others read it without a lock, since an aligned 8-byte store is not torn and a
count a moment stale only makes a decision less exact. A worker publishes its count at each
accept and each `REFRESH` (closes are not announced: the count lags behind them, which only
makes others send it less). Stream ports (TCP, TLS passthrough, UDP) are left to the hash.

Why not the alternatives (docs/performance.md, "Worker balance"): an eBPF SK_REUSEPORT program
could pick the least-loaded worker in the kernel, but loading one takes CAP_BPF or
CAP_SYS_ADMIN, which a proxy pod does not have; a classic BPF one (SO_ATTACH_REUSEPORT_CBPF)
needs neither but keeps no state, and a random pick is the same draw as the hash; one socket
accepting for everyone pays a handover on every connection, where this pays it on the few the
hash got wrong.
"""

from __future__ import annotations

import asyncio
import logging
import mmap
import socket
import struct
from collections.abc import Callable
from typing import cast

from coxswain_proxy.dataplane.runtime import Runtime
from coxswain_service import tasks

log = logging.getLogger(__name__)

Factory = Callable[[], asyncio.Protocol]

# A worker keeps a new connection while it would hold no more than an even share times RATIO,
# or an even share plus SLACK, whichever is more: the ratio bounds the share under load, the
# slack keeps the first few connections, whose shares swing widely, where they landed.
RATIO = 1.15
SLACK = 2
REFRESH = 0.1  # seconds between republishing a worker's count (closes are not announced)
CLOSED = -1  # the count of a worker shutting down: none is handed to it
_MESSAGE = struct.Struct("=HH")  # (sender's index, routing port), with the socket's descriptor


class Board:
    """What the workers share, made in the parent before it forks them (`workers.Workers`)."""

    def __init__(self, count: int) -> None:
        self.count = count
        self._memory = mmap.mmap(-1, 8 * count * (count + 1))  # MAP_SHARED: fork keeps it
        self.cells = memoryview(self._memory).cast("q")
        # Worker i reads inboxes[i][0]; every other worker sends on inboxes[i][1].
        self.inboxes = [socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM) for _ in range(count)]
        for _, send in self.inboxes:
            send.setblocking(False)  # a full inbox: the connection is served where it was

    def seat(self, index: int) -> Seat:
        """Worker `index`'s part, in the worker after fork: the others' inboxes are closed, so
        a worker that ends refuses what is sent to it."""
        for other, (receive, send) in enumerate(self.inboxes):
            (send if other == index else receive).close()
        return Seat(self, index)

    def close(self) -> None:
        """The parent's copies, once every worker is forked: it takes no part."""
        for receive, send in self.inboxes:
            receive.close()
            send.close()


class Seat:
    """One worker's view of the board: its inbox, the others' send ends, its cells."""

    def __init__(self, board: Board, index: int) -> None:
        count = board.count
        self.index = index
        self.count = count
        self.opens = board.cells[:count]  # every worker's open connections
        # What each worker j has taken from this one (cell count + j*count + index), and what
        # this one has taken from each (its row).
        self.taken_from_me = board.cells[count + index :: count]
        self.taken = board.cells[count + index * count : count + (index + 1) * count]
        self.inbox = board.inboxes[index][0]
        self.outboxes = [None if j == index else send for j, (_, send) in enumerate(board.inboxes)]


class Balancer:
    """One worker's share keeping: decides at each accept, sends and takes connections."""

    def __init__(self, seat: Seat, rt: Runtime) -> None:
        self.seat = seat
        self.rt = rt
        self.factories: dict[int, Factory] = {}  # by routing port: what a handed one gets
        self.arriving = 0  # handed here, not yet set up
        self.sent = [0] * seat.count  # connections sent to each worker, ever
        self.limit = 0.0  # held below this, a connection is kept without a look at the others
        self.closing = False
        self._arrivals: set[asyncio.Task[None]] = set()
        self._refresh: asyncio.Task[None] | None = None

    def start(self) -> Balancer:
        self.seat.inbox.setblocking(False)
        self.rt.loop.add_reader(self.seat.inbox.fileno(), self._receive)
        self._refresh = tasks.spawn(self._republish(), name="balance-refresh")
        return self

    # ------------------------------------------------------------------ accepting

    def wrap(self, port: int, factory: Factory) -> Factory:
        """The factory a port's server calls at each accept, in place of `factory`."""
        self.factories[port] = factory
        connections, handshakes = self.rt.connections, self.rt.handshakes
        opens, me = self.seat.opens, self.seat.index

        def accept() -> asyncio.Protocol:
            held = len(connections) + len(handshakes) + self.arriving
            opens[me] = held + 1
            if held < self.limit:
                return factory()
            return self._crowded(port, factory, held)

        return accept

    def _crowded(self, port: int, factory: Factory, held: int) -> asyncio.Protocol:
        """At its limit as last worked out: work it out again, and hand the connection over
        if this worker is over it and another has fewer."""
        self._limit()
        target = None if held < self.limit or self.closing else self._lightest(held)
        if target is None:
            return factory()
        self.seat.opens[self.seat.index] = held
        return HandOver(self, port, target, factory)

    def _limit(self) -> None:
        """What this worker may hold before it looks for a lighter one: RATIO times an even
        share of all the workers' connections, or an even share plus SLACK."""
        total, count = sum(self.seat.opens), self.seat.count
        self.limit = max(RATIO * total, total + SLACK * count) / count

    def _lightest(self, held: int) -> int | None:
        """The worker with the fewest connections, counting those sent it and not yet taken,
        if it has fewer than this one holds; none is sent more than half the gap between its
        count and this one's before it has taken them.

        Why the bound: a worker's count leaves out the connections waiting in its accept queue,
        which only it can see, and one that has not run for a while (busy, or not scheduled)
        has a long queue behind a stale count. Until it takes what it was sent it is not known
        to keep up: what it is sent meanwhile is bounded by what its count, if true, could
        take, not a burst it would have to hand back when it runs again (which a first version
        without the bound did: 20 of 50 connections moved, some twice). Sending one at a time
        instead left a worker that accepted a burst while the others were not running keeping
        it (bench/worker_balance.py: 6 of 100 trials over 1.3x with 4 workers on 2 CPUs)."""
        seat, sent = self.seat, self.sent
        best, fewest = None, held
        for j, count in enumerate(seat.opens):
            if j == seat.index or count == CLOSED:
                continue
            flying = sent[j] - seat.taken_from_me[j]
            if flying and 2 * flying > held - count:
                continue
            if count + flying < fewest:
                best, fewest = j, count + flying
        return best

    def send(self, target: int, port: int, fd: int) -> bool:
        """Hand the accepted socket `fd` to worker `target`; False if it cannot take it."""
        outbox = self.seat.outboxes[target]
        assert outbox is not None
        try:
            socket.send_fds(outbox, [_MESSAGE.pack(self.seat.index, port)], [fd])
        except OSError:  # its inbox is full, or it has ended
            return False
        self.sent[target] += 1
        self.rt.stats.handed_over += 1
        return True

    def kept_after_all(self) -> None:
        """A connection meant for another worker is served here (see `HandOver`)."""
        self.seat.opens[self.seat.index] = self.held()

    def held(self) -> int:
        rt = self.rt
        return len(rt.connections) + len(rt.handshakes) + self.arriving

    # ------------------------------------------------------------------ taking

    def _receive(self) -> None:
        seat = self.seat
        while True:
            try:
                data, fds, _, _ = socket.recv_fds(seat.inbox, _MESSAGE.size, 1)
            except (BlockingIOError, InterruptedError):
                return
            if not fds:
                continue  # not a handover (none is sent without its socket)
            sender, port = _MESSAGE.unpack(data)
            conn = socket.socket(fileno=fds[0])
            seat.taken[sender] += 1
            factory = self.factories.get(port)
            if factory is None:
                conn.close()  # the port is no longer served here: as a closed listener's
                continue
            self.arriving += 1
            seat.opens[seat.index] = self.held()
            task = self.rt.loop.create_task(self._take(conn, Arrival(self, factory)))
            self._arrivals.add(task)
            task.add_done_callback(self._arrivals.discard)

    async def _take(self, conn: socket.socket, arrival: Arrival) -> None:
        try:
            await self.rt.loop.connect_accepted_socket(lambda: arrival, conn)
        except OSError as exc:
            conn.close()
            log.debug("handed connection lost", extra={"fields": {"error": str(exc)}})
        finally:
            if not arrival.made:
                self.arriving -= 1

    # ------------------------------------------------------------------ lifetime

    async def _republish(self) -> None:
        seat = self.seat
        while True:
            await asyncio.sleep(REFRESH)
            if not self.closing:
                seat.opens[seat.index] = self.held()
                self._limit()  # the others' connections may have closed meanwhile

    def stop_taking(self) -> None:
        """Shutting down: no more connections are handed here or from here."""
        self.closing = True
        self.seat.opens[self.seat.index] = CLOSED

    async def close(self) -> None:
        self.stop_taking()
        if self._refresh is not None:
            await tasks.cancel(self._refresh)
        self.rt.loop.remove_reader(self.seat.inbox.fileno())
        self._receive()  # what was already handed here is served, within the drain
        self.seat.inbox.close()
        if self._arrivals:
            await asyncio.wait(self._arrivals)  # set up, so the drain sees them


class Arrival(asyncio.Protocol):
    """A connection handed to this worker, until its protocol has it: then it is in `rt`'s
    sets and no longer `arriving` (only handed connections pay for this step)."""

    __slots__ = ("balancer", "factory", "made")

    def __init__(self, balancer: Balancer, factory: Factory) -> None:
        self.balancer = balancer
        self.factory = factory
        self.made = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        protocol = self.factory()
        cast(asyncio.Transport, transport).set_protocol(protocol)
        protocol.connection_made(transport)
        self.made = True
        self.balancer.arriving -= 1


class HandOver(asyncio.Protocol):
    """An accepted connection on its way to another worker, before a byte of it is read: the
    loop starts reading only after `connection_made`, which sends its socket and closes this
    worker's copy (the connection lives on in the other's)."""

    __slots__ = ("balancer", "port", "target", "factory")

    def __init__(self, balancer: Balancer, port: int, target: int, factory: Factory) -> None:
        self.balancer = balancer
        self.port = port
        self.target = target
        self.factory = factory

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        sock = transport.get_extra_info("socket")
        if self.balancer.send(self.target, self.port, sock.fileno()):
            cast(asyncio.Transport, transport).abort()
            return
        protocol = self.factory()  # served here after all, as if never meant to go
        transport.set_protocol(protocol)
        protocol.connection_made(transport)
        self.balancer.kept_after_all()


__all__ = ["Arrival", "Balancer", "Board", "HandOver", "Seat"]
