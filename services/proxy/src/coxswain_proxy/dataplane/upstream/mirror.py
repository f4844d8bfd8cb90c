"""RequestMirror: a copy of the request sent to another backend, its response discarded.

Where it sits: `http.dispatch` picks the mirrors' origins when it routes a request, and the
request cycle calls `send_copies()` once the mirrored request's body is complete.
Fire-and-forget (issue 7, item 5: "never delaying or failing the main response"): the copy runs
as its own task on its own connection, with a deadline, and every failure is only counted.
"""

from __future__ import annotations

import asyncio
import logging
from typing import cast

from coxswain_proxy.dataplane.http import heads
from coxswain_proxy.dataplane.upstream.picker import Origin, tls_arguments

log = logging.getLogger(__name__)

DEADLINE = 10.0  # seconds a mirrored exchange may take before it is dropped
# The copy carries the whole body with its own length: the client's framing does not apply.
_DROPPED = frozenset({b"content-length", b"transfer-encoding"})
_running: set[asyncio.Task[None]] = set()


class _Discard(asyncio.Protocol):
    """Reads the mirror's response and throws it away; done when the backend closes."""

    def __init__(self) -> None:
        self.done = asyncio.get_running_loop().create_future()

    def data_received(self, data: bytes) -> None:
        pass

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.done.done():
            self.done.set_result(None)


async def _send(origin: Origin, data: bytes) -> None:
    loop = asyncio.get_running_loop()
    protocol = _Discard()
    transport: asyncio.BaseTransport | None = None
    try:
        async with asyncio.timeout(DEADLINE):
            transport, _ = await loop.create_connection(
                lambda: protocol, origin[0], origin[1], **tls_arguments(origin)
            )
            cast(asyncio.WriteTransport, transport).write(data)
            await protocol.done
    except (OSError, TimeoutError) as exc:
        log.debug("mirror failed", extra={"fields": {"origin": origin, "error": str(exc)}})
    finally:
        if transport is not None:
            transport.close()


def send(origin: Origin, head: bytes, body: bytes) -> None:
    """Send `head` (which must ask for `connection: close`) and `body` to `origin`, later."""
    task = asyncio.get_running_loop().create_task(_send(origin, head + body))
    _running.add(task)
    task.add_done_callback(_running.discard)


def send_copies(
    copies: list[tuple[Origin, bytes]],
    method: bytes,
    url: bytes,
    headers: list[tuple[bytes, bytes]],
    *,
    forwarded: bytes,
    http10: bool,
    body: bytes,
) -> None:
    """A copy of the request (`body` whole) to each (origin, Host) of `copies`."""
    kept = [(n, v) for n, v in headers if n.lower() not in _DROPPED]
    for origin, host in copies:
        head, _ = heads.upstream_request(
            method,
            url,
            kept,
            host=host,
            forwarded=forwarded,
            plan=(),
            close=True,
            http10=http10,
        )
        length = b"content-length: %d\r\n\r\n" % len(body)
        send(origin, head[:-2] + length, body)


async def close() -> None:
    for task in list(_running):
        task.cancel()
    await asyncio.gather(*_running, return_exceptions=True)
