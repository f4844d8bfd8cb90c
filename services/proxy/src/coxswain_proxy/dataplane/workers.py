"""Several worker processes serving the same ports, each with its own event loop and tables.

Where it sits: with `--workers N > 1` the parent process (discovery, admin) starts N workers;
each binds every listener with SO_REUSEPORT, so the kernel spreads connections across them,
and a worker over its share hands new ones to the least-loaded (`balance`, its `Board` made here
before fork).
A snapshot is applied once in the parent (decoded, validated, versioned) and sent to each worker
as its encoded wire resources (a `Snapshot` message) over a socketpair; each worker decodes,
compiles, swaps its one reference and answers "swapped" with the ports it bound. `apply()`
returns only when every worker has answered, so an Ack sent after it means every worker serves
the snapshot (issue 7, item 6).

Only what changed crosses the pipe: the parent remembers the resources it last sent (the staged
objects, by key) and sends a delta of the ones that are no longer the same object plus the keys
that went away; each worker keeps its own key -> resource map, decodes only the delta and
compiles incrementally against the tables it serves. The first apply, and the first after a
failure (which may have left the workers apart), is a full snapshot.

Why fork: the workers run this same code with no re-import or pickling, and fork happens before
any request is served. Frames are a kind byte, a 4-byte big-endian length and the payload.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import json
import logging
import multiprocessing
import os
import signal
import socket
import struct
from collections.abc import Callable
from multiprocessing.process import BaseProcess
from typing import Any

from coxswain_proto import discovery as pb
from coxswain_proxy import gcpause
from coxswain_proxy.dataplane import balance, tables
from coxswain_proxy.dataplane.core import BoundPort, Dataplane, Options
from coxswain_proxy.dataplane.stats import Stats
from coxswain_routing import ListenerProtocol, Resource, from_wire, to_wire
from coxswain_service import tasks

log = logging.getLogger(__name__)

SNAPSHOT, STATS, QUIT = b"S", b"T", b"Q"
_HEADER = struct.Struct(">cI")


async def _send(writer: asyncio.StreamWriter, kind: bytes, payload: bytes) -> None:
    writer.write(_HEADER.pack(kind, len(payload)) + payload)
    await writer.drain()


async def _receive(reader: asyncio.StreamReader) -> tuple[bytes, bytes]:
    kind, length = _HEADER.unpack(await reader.readexactly(_HEADER.size))
    return kind, await reader.readexactly(length)


def delta(
    sent: dict[str, Resource] | None, resources: dict[str, Resource], version: str
) -> pb.Snapshot:
    """What takes workers holding `sent` (None: unknown) to `resources`."""
    if sent is None:
        wire = [to_wire(r) for r in resources.values()]
        return pb.Snapshot(full=True, version=version, resources=wire)
    changed = [to_wire(r) for key, r in resources.items() if sent.get(key) is not r]
    removed = [key for key in sent if key not in resources]
    return pb.Snapshot(full=False, version=version, resources=changed, removed=removed)


def staged(held: dict[str, Resource], snapshot: pb.Snapshot) -> dict[str, Resource]:
    """A worker's resources after `snapshot`: unchanged ones stay the objects it compiled."""
    resources = {} if snapshot.full else dict(held)
    for key in snapshot.removed:
        resources.pop(key, None)
    for message in snapshot.resources:
        resources[message.key] = from_wire(message)
    return resources


class Worker:
    def __init__(
        self, process: BaseProcess, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        self.process = process
        self.reader = reader
        self.writer = writer
        self.lock = asyncio.Lock()  # one request/answer at a time on the pipe

    async def call(self, kind: bytes, payload: bytes = b"") -> Any:
        async with self.lock:
            await _send(self.writer, kind, payload)
            _, answer = await _receive(self.reader)
            return json.loads(answer)


class Workers:
    """The parent's handle on its worker processes."""

    def __init__(self, options: Options) -> None:
        self.options = options
        self.workers: list[Worker] = []
        # What every worker holds: the resources of the last apply all of them swapped to.
        self._sent: dict[str, Resource] | None = None
        self._applying = asyncio.Lock()  # deltas are relative: one apply at a time
        self._closing = False
        self._reaping: set[asyncio.Task[None]] = set()

    def watch(self, died: Callable[[str, int | None], None]) -> None:
        """Call `died(name, exit code)` if a worker ends before `close()` asks it to.

        Why not fork a replacement: by then the parent runs gRPC threads, and forking a
        threaded process can leave the child holding a lock no thread will release. The
        caller stops the proxy instead (the live workers drain), and the orchestrator restarts
        it whole: a crash is loud, and capacity never silently shrinks.
        """
        loop = asyncio.get_running_loop()
        for worker in self.workers:
            process = worker.process

            async def reap(process: BaseProcess) -> None:
                # The sentinel reads as closed a moment before the exit status can be collected.
                await asyncio.to_thread(process.join, 5.0)
                if not self._closing:
                    died(process.name, process.exitcode)

            def ended(process: BaseProcess = process) -> None:
                loop.remove_reader(process.sentinel)
                if not self._closing:
                    task = tasks.spawn(reap(process), name=f"reap-{process.name}", may_end=True)
                    self._reaping.add(task)
                    task.add_done_callback(self._reaping.discard)

            loop.add_reader(process.sentinel, ended)

    async def start(self, count: int) -> Workers:
        context = multiprocessing.get_context("fork")
        # Garbage the parent holds is finalized here, not in a worker: a finalizer of a library
        # with threads of its own (grpc's) waits forever in a child, where those threads are
        # gone. (`serve` forks before its gRPC client starts; a test process may hold a dead
        # channel from an earlier test, and a worker collecting it at fork hung the suite.)
        gc.collect()
        board = balance.Board(count) if self.options.balance else None
        for index in range(count):
            parent_end, child_end = socket.socketpair()
            # The child must hold no other worker's pipe, or a parent's death goes unseen.
            others = [w.writer.get_extra_info("socket").fileno() for w in self.workers]
            process = context.Process(
                target=_child,
                args=(child_end, self.options, others, board, index),
                name=f"coxswain-worker-{index}",
            )
            process.start()
            child_end.close()
            reader, writer = await asyncio.open_connection(sock=parent_end)
            self.workers.append(Worker(process, reader, writer))
        if board is not None:
            board.close()  # the workers hold what they need of it
        self._sent = None  # a new worker holds nothing yet
        return self

    async def apply(self, resources: tables.Resources, version: str = "") -> list[BoundPort]:
        keyed = tables.by_key(resources)
        async with self._applying:
            payload = bytes(delta(self._sent, keyed, version))
            # Until every worker has answered, what each holds is unknown.
            self._sent = None
            answers = await asyncio.gather(*(w.call(SNAPSHOT, payload) for w in self.workers))
            self._sent = keyed
        # Report a port bound only when every worker bound it: what a client can rely on.
        common = set.intersection(*({tuple(b) for b in a["bound"]} for a in answers))
        return sorted(BoundPort(p, a, ListenerProtocol(proto)) for p, a, proto in common)

    async def stats(self) -> Stats:
        answers = await asyncio.gather(*(w.call(STATS) for w in self.workers))
        return Stats.merged(answers)

    async def close(self, grace: float) -> None:
        self._closing = True
        for worker in self.workers:
            with contextlib.suppress(ConnectionError, asyncio.IncompleteReadError):
                await worker.call(QUIT, json.dumps({"grace": grace}).encode())
            worker.writer.close()
        for worker in self.workers:
            with contextlib.suppress(ValueError):  # its sentinel is closed once joined
                asyncio.get_running_loop().remove_reader(worker.process.sentinel)
            await asyncio.to_thread(worker.process.join, grace + 5)
            if worker.process.is_alive():
                worker.process.kill()
                await asyncio.to_thread(worker.process.join)
        self.workers.clear()


def _child(
    sock: socket.socket,
    options: Options,
    others: list[int],
    board: balance.Board | None,
    index: int,
) -> None:
    import uvloop

    for fd in others:
        os.close(fd)
    seat = board.seat(index) if board is not None else None
    # The parent's loop is copied by fork but must not be used here.
    asyncio.events._set_running_loop(None)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides when workers stop
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    uvloop.run(_serve(sock, options, seat))
    os._exit(0)


async def _serve(sock: socket.socket, options: Options, seat: balance.Seat | None) -> None:
    plane = await Dataplane(options, seat=seat).start()
    held: dict[str, Resource] = {}  # what the parent last sent, as compiled
    reader, writer = await asyncio.open_connection(sock=sock)
    try:
        while True:
            try:
                kind, payload = await _receive(reader)
            except (asyncio.IncompleteReadError, ConnectionError):
                await plane.close(options.config.grace_seconds)
                return  # the parent is gone
            if kind == SNAPSHOT:
                snapshot = pb.Snapshot().parse(payload)
                resources = staged(held, snapshot)
                bound = await plane.apply(resources, snapshot.version)
                held = resources
                gcpause.served(len(resources), full=snapshot.full)
                answer: Any = {
                    "swapped": snapshot.version,
                    "bound": [[b.port, b.actual, b.protocol.value] for b in bound],
                }
            elif kind == STATS:
                assert plane.rt is not None
                answer = plane.rt.stats.snapshot()
            else:
                await plane.close(json.loads(payload)["grace"])
                await _send(writer, QUIT, b"{}")
                return
            await _send(writer, kind, json.dumps(answer).encode())
    finally:
        writer.close()
