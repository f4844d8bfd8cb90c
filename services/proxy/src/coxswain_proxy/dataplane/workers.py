"""Several worker processes serving the same ports, each with its own event loop and tables.

Where it sits: with `--workers N > 1` the parent process (discovery, admin) starts N workers;
each binds every listener with SO_REUSEPORT, so the kernel spreads connections across them.
A snapshot is applied once in the parent (decoded, validated, versioned) and sent to each worker
as its encoded wire resources (a `Snapshot` message) over a socketpair; each worker decodes,
compiles, swaps its one reference and answers "swapped" with the ports it bound. `apply()`
returns only when every worker has answered, so an Ack sent after it means every worker serves
the snapshot (issue 7, item 6).

Why fork: the workers run this same code with no re-import or pickling, and fork happens before
any request is served. Frames are a kind byte, a 4-byte big-endian length and the payload.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import multiprocessing
import os
import signal
import socket
import struct
from collections.abc import Iterable
from multiprocessing.process import BaseProcess
from typing import Any

from coxswain_proto import discovery as pb
from coxswain_proxy.dataplane.core import BoundPort, Dataplane, Options
from coxswain_proxy.dataplane.stats import Stats
from coxswain_routing import Resource, from_wire, to_wire

log = logging.getLogger(__name__)

SNAPSHOT, STATS, QUIT = b"S", b"T", b"Q"
_HEADER = struct.Struct(">cI")


async def _send(writer: asyncio.StreamWriter, kind: bytes, payload: bytes) -> None:
    writer.write(_HEADER.pack(kind, len(payload)) + payload)
    await writer.drain()


async def _receive(reader: asyncio.StreamReader) -> tuple[bytes, bytes]:
    kind, length = _HEADER.unpack(await reader.readexactly(_HEADER.size))
    return kind, await reader.readexactly(length)


def encode(resources: Iterable[Resource], version: str) -> bytes:
    snapshot = pb.Snapshot(full=True, version=version, resources=[to_wire(r) for r in resources])
    return bytes(snapshot)


def decode(payload: bytes) -> tuple[list[Resource], str]:
    snapshot = pb.Snapshot().parse(payload)
    return [from_wire(r) for r in snapshot.resources], snapshot.version


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

    async def start(self, count: int) -> Workers:
        context = multiprocessing.get_context("fork")
        for index in range(count):
            parent_end, child_end = socket.socketpair()
            # The child must hold no other worker's pipe, or a parent's death goes unseen.
            others = [w.writer.get_extra_info("socket").fileno() for w in self.workers]
            process = context.Process(
                target=_child,
                args=(child_end, self.options, others),
                name=f"coxswain-worker-{index}",
            )
            process.start()
            child_end.close()
            reader, writer = await asyncio.open_connection(sock=parent_end)
            self.workers.append(Worker(process, reader, writer))
        return self

    async def apply(self, resources: Iterable[Resource], version: str = "") -> list[BoundPort]:
        payload = encode(resources, version)
        answers = await asyncio.gather(*(w.call(SNAPSHOT, payload) for w in self.workers))
        # Report a port bound only when every worker bound it: what a client can rely on.
        common = set.intersection(*({tuple(b) for b in a["bound"]} for a in answers))
        return sorted(BoundPort(*b) for b in common)

    async def stats(self) -> Stats:
        answers = await asyncio.gather(*(w.call(STATS) for w in self.workers))
        return Stats.merged(answers)

    async def close(self, grace: float) -> None:
        for worker in self.workers:
            with contextlib.suppress(ConnectionError, asyncio.IncompleteReadError):
                await worker.call(QUIT, json.dumps({"grace": grace}).encode())
            worker.writer.close()
        for worker in self.workers:
            await asyncio.to_thread(worker.process.join, grace + 5)
            if worker.process.is_alive():
                worker.process.kill()
                await asyncio.to_thread(worker.process.join)
        self.workers.clear()


def _child(sock: socket.socket, options: Options, others: list[int]) -> None:
    import uvloop

    for fd in others:
        os.close(fd)
    # The parent's loop is copied by fork but must not be used here.
    asyncio.events._set_running_loop(None)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides when workers stop
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    uvloop.run(_serve(sock, options))
    os._exit(0)


async def _serve(sock: socket.socket, options: Options) -> None:
    plane = await Dataplane(options).start()
    reader, writer = await asyncio.open_connection(sock=sock)
    try:
        while True:
            try:
                kind, payload = await _receive(reader)
            except (asyncio.IncompleteReadError, ConnectionError):
                await plane.close(options.config.grace_seconds)
                return  # the parent is gone
            if kind == SNAPSHOT:
                resources, version = decode(payload)
                bound = await plane.apply(resources, version)
                answer: Any = {
                    "swapped": version,
                    "bound": [[b.port, b.actual, b.tls] for b in bound],
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
