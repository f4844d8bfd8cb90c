"""One discovery stream, from Subscribe to its final status.

Where it sits: `client.DiscoveryClient` dials, then hands the open call to a `StreamSession`,
which runs until the stream ends or the renewal it was given yields a new SVID, and reports how
it ended in a `StreamEnd`; the client decides what happens next. Everything here lives exactly
as long as one stream (conventions: state grouped by lifetime): the outbox, the delivered flag,
the reader, writer and renewal tasks.

Why the shape: a grpc.aio call takes one write at a time, yet three things produce messages
(the reader's Ack/Nack, bind changes' NodeStatus, Subscribe at open), so they all go through
one queue drained by one writer. The reader applies snapshots in order, one at a time, which is
also what the protocol's flow control promises ("at most one snapshot is in flight").

Only Subscribe is written until the first snapshot arrives; the opening NodeStatus goes out just
before the first Ack. The controller refuses a stream (not the leader, wire version, scope)
right after Subscribe, and grpc.aio replaces the refusal's status with INTERNAL "Internal error
from Core" when a write of ours races it; writing nothing more until the controller has
accepted us keeps the refusal's real status, which decides what the client does next.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any

import grpc
import grpc.aio

from coxswain_proto import discovery as pb
from coxswain_proxy import gcpause
from coxswain_proxy.discovery import failures, metrics, ports, snapshot
from coxswain_proxy.discovery.holder import RoutingHolder
from coxswain_proxy.discovery.svid import Svid
from coxswain_service import tasks

# The controller refuses a Nack whose detail is longer than 16 KiB (and ends the stream, which
# a reconnect would repeat): a long reason, many resources' problems, is cut below that.
NACK_DETAIL_LIMIT = 8 * 1024

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class StreamEnd:
    code: grpc.StatusCode  # the call's final status (OK when we closed it to renew)
    details: str
    delivered: bool  # at least one snapshot arrived on this stream
    renewed: Svid | None = None  # set when the stream was closed to switch to this SVID


class StreamSession:
    """Drives one open call: subscribe, report ports, apply snapshots, answer each."""

    def __init__(
        self,
        call: Any,  # grpc.aio.StreamStreamCall (untyped)
        subscribe: pb.Subscribe,
        *,
        holder: RoutingHolder,
        bound: ports.BoundPorts,
        on_delivery: Callable[[], None],
    ) -> None:
        self._call = call
        self._holder = holder
        self._bound = bound
        self._on_delivery = on_delivery  # called once, when the first snapshot arrives
        self._outbox: asyncio.Queue[pb.ProxyMessage] = asyncio.Queue()
        self._outbox.put_nowait(pb.ProxyMessage(subscribe=subscribe))
        self._delivered = False

    async def run(self, renewal: Coroutine[Any, Any, Svid]) -> StreamEnd:
        """Until the stream ends, or `renewal` returns a new SVID and the stream is closed."""
        unwatch = self._bound.watch(self._bind_changed)
        reader = tasks.spawn(self._read(), name="discovery-reader", may_end=True)
        writer = tasks.spawn(self._write(), name="discovery-writer", may_end=True)
        renewer = tasks.spawn(renewal, name="svid-renewal", may_end=True)
        try:
            done, _ = await asyncio.wait(
                {reader, writer, renewer}, return_when=asyncio.FIRST_COMPLETED
            )
            if renewer in done and not renewer.cancelled() and renewer.exception() is None:
                return await self._close_for(renewer.result())
            return await self._final_status()
        finally:
            unwatch()
            for task in (reader, writer, renewer):
                task.cancel()
            await asyncio.gather(reader, writer, renewer, return_exceptions=True)

    def _bind_changed(self) -> None:
        # Before the first snapshot the opening NodeStatus, still to come, will carry it.
        if self._delivered:
            self._outbox.put_nowait(ports.node_status(self._bound))

    async def _read(self) -> None:
        try:
            while (message := await self._call.read()) is not grpc.aio.EOF:
                if (pushed := message.snapshot) is not None:
                    self._outbox.put_nowait(await self._apply(pushed))
        except grpc.RpcError:
            return  # the call has ended; _final_status reads why

    async def _write(self) -> None:
        try:
            while True:
                await self._call.write(await self._outbox.get())
        except (grpc.RpcError, asyncio.InvalidStateError):
            return  # the call has ended; _final_status reads why

    async def _apply(self, pushed: pb.Snapshot) -> pb.ProxyMessage:
        if not self._delivered:
            # The controller accepted the stream. docs/discovery.md: NodeStatus "on open and
            # on every bind change".
            self._delivered = True
            self._outbox.put_nowait(ports.node_status(self._bound))
            self._on_delivery()
        loop = asyncio.get_running_loop()
        started = loop.time()
        try:
            # Decoding and compiling a large snapshot takes a while: off the event loop.
            state = await asyncio.to_thread(_stage, self._holder.state, pushed)
        except failures.SnapshotRejected as exc:
            return _rejected(pushed, exc)
        staged = loop.time()
        # The swap: one assignment, after which new requests see the new routing; the Ack
        # waits until the data plane (every worker) has it too.
        await self._holder.commit(state)
        gcpause.served(len(state.resources), full=pushed.full)
        metrics.applied(state.version, state.publish_seq)
        timings = {
            "stage_ms": round((staged - started) * 1000, 1),
            "apply_ms": round((loop.time() - staged) * 1000, 1),
        }
        log.info(
            "snapshot applied",
            extra={"fields": _fields(pushed) | {"resources": len(state.resources)} | timings},
        )
        return pb.ProxyMessage(ack=pb.Ack(version=state.version, nonce=pushed.nonce))

    async def _close_for(self, renewed: Svid) -> StreamEnd:
        # Half-close first so the controller sees a clean end rather than a reset.
        with contextlib.suppress(grpc.RpcError, asyncio.InvalidStateError):
            await self._call.done_writing()
        self._call.cancel()
        return StreamEnd(grpc.StatusCode.OK, "closed to renew the SVID", self._delivered, renewed)

    async def _final_status(self) -> StreamEnd:
        if not self._call.done():
            # The writer gave up on a call still open: end it so its status is final.
            self._call.cancel()
        code = await self._call.code()
        details = await self._call.details()
        return StreamEnd(code, details or "", self._delivered)


def _rejected(pushed: pb.Snapshot, exc: failures.SnapshotRejected) -> pb.ProxyMessage:
    metrics.SNAPSHOTS.labels(result="rejected").inc()
    log.warning(
        "snapshot rejected, keeping the last good one",
        extra={"fields": _fields(pushed) | {"reason": str(exc)}},
    )
    nack = pb.Nack(version=pushed.version, nonce=pushed.nonce, detail=nack_detail(str(exc)))
    return pb.ProxyMessage(nack=nack)


def nack_detail(reason: str) -> str:
    """`reason` as a Nack carries it: whole when short, else cut, saying how much was left out."""
    if len(reason) <= NACK_DETAIL_LIMIT:
        return reason
    kept = reason[: NACK_DETAIL_LIMIT - 64]
    return f"{kept} ... ({len(reason) - len(kept)} more characters)"


def _fields(pushed: pb.Snapshot) -> dict[str, object]:
    return {"version": pushed.version, "publish_seq": pushed.publish_seq, "full": pushed.full}


def _stage(held: snapshot.RoutingState | None, pushed: pb.Snapshot) -> snapshot.RoutingState:
    """`snapshot.stage` with the cyclic garbage collector paused (see `gcpause`)."""
    with gcpause.paused():
        return snapshot.stage(held, pushed)
