"""The access log: one line of JSON per request of a rule that keeps one, once it is over.

Where it sits: `guard.Guard.done` calls `record` when a request of such a rule ends (the
policy's `access_log`, from an IngressClass's `accessLog` or a CoxswainPolicy). Lines are
collected and written to standard output together once per `FLUSH_SECONDS`, or when
`FLUSH_BYTES` are waiting, so a request costs a `json.dumps` and an append, never a write of
its own; the proxy's own logs go to standard error, so the two never interleave, and each
write holds whole lines and at most `PIPE_BUF` bytes (a longest line's 1,024-character path
and 256-character fields keep one line under it), so the workers' lines never mix.

Bounded fields: every string is cut to `MAX_FIELD` characters (the path to `MAX_PATH`), and the
line holds a fixed set of keys: time, client, method, host, path, status, duration_ms, route,
upstream, http (the client's version) and outcome ("answered", or "abandoned" when the client
left first).
"""

from __future__ import annotations

import asyncio
import sys
import time
from json.encoder import encode_basestring_ascii as _q
from typing import TYPE_CHECKING, ClassVar

from coxswain_proxy.dataplane.http.phases import CLOSED

if TYPE_CHECKING:
    from coxswain_proxy.dataplane.http.policies.policed import PolicedCycle

__all__ = ["FLUSH_BYTES", "FLUSH_SECONDS", "flush", "record"]

MAX_FIELD = 256
MAX_PATH = 1024
FLUSH_SECONDS = 0.25
FLUSH_BYTES = 64 * 1024
PIPE_BUF = 4096  # POSIX: writes of at most this many bytes to a pipe are not interleaved


class _Pending:
    lines: ClassVar[list[str]] = []
    size = 0
    timer: asyncio.TimerHandle | None = None


def _cut(raw: bytes | str | None, limit: int = MAX_FIELD) -> str:
    if raw is None:
        return ""
    text = raw.decode("latin-1") if isinstance(raw, bytes) else raw
    return text if len(text) <= limit else text[:limit] + "..."


def _client(forwarded: bytes) -> str:
    end = forwarded.find(b"\r\n")
    return _cut(forwarded if end < 0 else forwarded[:end])


def _now() -> str:
    """The current second as RFC 3339 UTC, made once a second."""
    now = int(time.time())
    if now != _Clock.second:
        _Clock.second = now
        _Clock.text = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now))
    return _Clock.text


class _Clock:
    second = 0
    text = ""


def record(cycle: PolicedCycle, started: float) -> None:
    loop = cycle.rt.loop
    origin = cycle.origin
    upstream = f"{origin[0]}:{origin[1]}" if origin is not None else ""
    outcome = "abandoned" if cycle.phase == CLOSED else "answered"
    # The keys are fixed and the values' JSON made by the C encoder: a third of json.dumps's cost.
    line = (
        f'{{"time":"{_now()}","client":{_q(_client(cycle.conn.forwarded))},'
        f'"method":{_q(_cut(cycle.method, 32))},"host":{_q(_cut(cycle.host))},'
        f'"path":{_q(_cut(cycle.url, MAX_PATH))},"status":{cycle.status:d},'
        f'"duration_ms":{(loop.time() - started) * 1000:.3f},'
        f'"route":{_q(_cut(cycle.route))},"upstream":{_q(upstream)},'
        f'"http":{_q(cycle.version)},"outcome":"{outcome}"}}'
    )
    _Pending.lines.append(line)
    _Pending.size += len(line) + 1
    if _Pending.size >= FLUSH_BYTES:
        flush()
    elif _Pending.timer is None:
        _Pending.timer = loop.call_later(FLUSH_SECONDS, flush)


def flush() -> None:
    """Write what is waiting (also called at shutdown by whoever wants the last lines)."""
    if _Pending.timer is not None:
        _Pending.timer.cancel()
        _Pending.timer = None
    lines, _Pending.lines, _Pending.size = _Pending.lines, [], 0
    chunk: list[str] = []
    size = 0
    for line in lines:
        if chunk and size + len(line) + 1 > PIPE_BUF:
            _write(chunk)
            chunk, size = [], 0
        chunk.append(line)
        size += len(line) + 1
    if chunk:
        _write(chunk)


def _write(lines: list[str]) -> None:
    # One write of whole lines, at most PIPE_BUF bytes where it can be: POSIX keeps a write
    # that small to a pipe in one piece, so the lines of several workers never mix.
    sys.stdout.write("\n".join(lines) + "\n")
    sys.stdout.flush()
