"""Per-worker state every connection shares: the served tables, the upstream pool, the limits.

Where it sits: one `Runtime` per worker process, created by `core.Dataplane`. Client
connections and their request cycles keep a reference to it and read `runtime.tables` once per
request: the snapshot swap is the single assignment `runtime.tables = new`, which needs no lock
on one event loop. The pool is held as what the request path needs of it
(`contracts.Connector`); `core` keeps the `upstream.connector.PooledConnector` itself, to sweep
and close it.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Protocol

from coxswain_proxy.dataplane import stats
from coxswain_proxy.dataplane.contracts import Connector
from coxswain_proxy.dataplane.http.outbox import Outbox
from coxswain_proxy.dataplane.http2.limits import H2Limits
from coxswain_proxy.dataplane.stream.relay_limits import StreamLimits
from coxswain_proxy.dataplane.tables import Tables
from coxswain_proxy.dataplane.upstream.pool import Limits


@dataclass(frozen=True, slots=True)
class Config:
    max_header_bytes: int = 32 * 1024  # request line and headers: beyond, 431
    max_target_bytes: int = 8 * 1024  # the request-target: beyond, 414 (RFC 9112 §3)
    max_upstream_header_bytes: int = 64 * 1024  # an upstream response's headers: beyond, 502
    # Slow and idle clients (seconds; each no laxer than nginx's 60 s; `http11.sweep`):
    header_timeout: float = 15.0  # a request's head must arrive within this (slowloris): 408
    body_timeout: float = 60.0  # a request body may pause this long between reads: 408
    keepalive_timeout: float = 60.0  # no request this long between requests: closed
    handshake_timeout: float = 10.0  # an HTTPS client's TLS handshake: closed
    connect_timeout: float = 5.0  # opening an upstream connection (HTTP; streams: `stream`)
    grace_seconds: float = 10.0  # SIGTERM: in-flight requests get this long
    replay_limit: int = 64 * 1024  # request bodies up to this are kept for retries and mirrors
    pool: Limits = field(default_factory=Limits)
    h2: H2Limits = field(default_factory=H2Limits)  # HTTP/2 clients' bounds (`http2.limits`)
    stream: StreamLimits = field(default_factory=StreamLimits)  # TCP, TLS and UDP relays


class Sweepable(Protocol):
    """A client connection (`http.http11.HttpConnection`), as the sweep and a shutdown see it."""

    def sweep(self, now: float) -> None: ...

    def shutdown(self) -> None: ...

    def close(self) -> None: ...


class Handshaking(Protocol):
    """An HTTPS connection whose TLS handshake is under way (`handshake.Handshake`)."""

    def sweep(self, now: float) -> None: ...

    def abort(self) -> None: ...


class Runtime:
    __slots__ = (
        "config",
        "tables",
        "connector",
        "stats",
        "connections",
        "handshakes",
        "loop",
        "draining",
        "idle",
        "outbox",
    )

    def __init__(self, config: Config, connector: Connector, outbox: Outbox) -> None:
        self.config = config
        self.tables: Tables | None = None  # None until the first snapshot
        self.connector = connector
        self.stats = stats.Stats()
        self.connections: set[Sweepable] = set()  # open client connections, for sweeps/drain
        self.handshakes: set[Handshaking] = set()  # HTTPS clients not through TLS yet, for sweeps
        self.loop = asyncio.get_running_loop()
        self.draining = False  # shutting down: finish in-flight requests, keep no connection
        self.idle = asyncio.Event()  # set when draining and the last connection has closed
        self.outbox = outbox  # every client and upstream write goes here
