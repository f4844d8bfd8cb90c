"""How `cli.serve` starts the data plane and feeds it each swapped snapshot.

Where it sits: between the discovery client's `discovery.holder.RoutingHolder` and the data
plane. The cli calls `add_arguments(serve_parser)` when building its parser and `await
start(args, holder, binder)` in `serve` (before the discovery client starts, since workers are
forked), then `await running.close()` on SIGTERM. Every swap the holder announces is applied
to the data plane (in-process, or relayed to each worker); the ports then bound are reported
through `discovery.ports.PortBinder.set_bound`, which makes the discovery client send a
NodeStatus.

The stream commits each snapshot through `RoutingHolder.commit`, which awaits `Relay.apply`:
the Ack goes out only after every worker has swapped and the ports are bound (spec 000).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import math
import os
from collections.abc import Callable
from dataclasses import dataclass

from prometheus_client import REGISTRY

from coxswain_proto import discovery as pb
from coxswain_proxy.dataplane import collector
from coxswain_proxy.dataplane.core import BoundPort, Dataplane, Options
from coxswain_proxy.dataplane.runtime import Config
from coxswain_proxy.dataplane.stats import Stats
from coxswain_proxy.dataplane.stream import relay_limits
from coxswain_proxy.dataplane.workers import Workers
from coxswain_proxy.discovery import ports
from coxswain_proxy.discovery.holder import RoutingHolder
from coxswain_proxy.discovery.snapshot import RoutingState
from coxswain_service import tasks

log = logging.getLogger(__name__)

STATS_REFRESH_SECONDS = 5.0
DEFAULTS = Config()


def add_arguments(serve: argparse.ArgumentParser) -> None:
    group = serve.add_argument_group("data plane")
    group.add_argument("--workers", type=int, default=os.cpu_count() or 1, help="worker processes")
    group.add_argument("--listen-address", default="0.0.0.0", help="address listeners bind")
    group.add_argument("--ingress-http-port", type=int, default=80, help="shared: Ingress HTTP")
    group.add_argument("--ingress-https-port", type=int, default=443, help="shared: Ingress HTTPS")
    group.add_argument("--grace-seconds", type=float, default=10.0, help="SIGTERM drain bound")
    _client_timeouts(serve)
    relay_limits.add_arguments(serve)


def _client_timeouts(serve: argparse.ArgumentParser) -> None:
    group = serve.add_argument_group("slow and idle clients (seconds, each > 0)")
    flag = "(default: %(default)s)"
    group.add_argument(
        "--client-header-timeout",
        type=_seconds,
        metavar="SECONDS",
        default=DEFAULTS.header_timeout,
        help=f"a request's head must arrive within this from its first byte, else 408 {flag}",
    )
    group.add_argument(
        "--client-body-timeout",
        type=_seconds,
        metavar="SECONDS",
        default=DEFAULTS.body_timeout,
        help=f"a request body may pause this long between two reads, else 408 {flag}",
    )
    group.add_argument(
        "--keepalive-timeout",
        type=_seconds,
        metavar="SECONDS",
        default=DEFAULTS.keepalive_timeout,
        help="a connection with no request under way for this long is closed, "
        f"before its first request too {flag}",
    )
    group.add_argument(
        "--tls-handshake-timeout",
        type=_seconds,
        metavar="SECONDS",
        default=DEFAULTS.handshake_timeout,
        help=f"an HTTPS client's TLS handshake must finish within this, else closed {flag}",
    )


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not 0 < value < math.inf:
        raise argparse.ArgumentTypeError(f"must be more than 0 seconds: {text!r}")
    return value


def config(args: argparse.Namespace) -> Config:
    """The data plane's limits from `serve`'s flags."""
    return Config(
        grace_seconds=args.grace_seconds,
        header_timeout=args.client_header_timeout,
        body_timeout=args.client_body_timeout,
        keepalive_timeout=args.keepalive_timeout,
        handshake_timeout=args.tls_handshake_timeout,
        stream=relay_limits.from_args(args),
    )


@dataclass
class Relay:
    """Applies each committed state to the data plane and reports the ports then bound."""

    plane: Dataplane | None
    workers: Workers | None
    binder: ports.PortBinder
    grace: float
    stats: Stats
    applied_at: float = 0.0

    def __post_init__(self) -> None:
        # Forked workers' counters are collected here; in process the plane's own are read.
        self._refresh = (
            tasks.spawn(self._stats(self.workers), name="dataplane-stats")
            if self.workers is not None
            else None
        )

    async def apply(self, state: RoutingState) -> list[BoundPort]:
        # By key, as staged: the resources a delta did not carry are the objects applied
        # before, which is how the data plane tells what to recompile (or send to workers).
        if self.workers is not None:
            bound = await self.workers.apply(state.resources, state.version)
        else:
            assert self.plane is not None
            bound = await self.plane.apply(state.resources, state.version)
        self.applied_at = self.plane.applied_at if self.plane else asyncio.get_running_loop().time()
        self.binder.set_bound(ports.ReportedPort(b.port, _protocol(b)) for b in bound)
        return bound

    async def _stats(self, workers: Workers) -> None:
        while True:
            await asyncio.sleep(STATS_REFRESH_SECONDS)
            self.stats = await workers.stats()

    async def close(self) -> None:
        if self._refresh is not None:
            await tasks.cancel(self._refresh)
        if self.workers is not None:
            await self.workers.close(self.grace)
        if self.plane is not None:
            await self.plane.close(self.grace)


def _protocol(bound: BoundPort) -> pb.ListenerProtocol:
    return pb.ListenerProtocol[bound.protocol.value]


async def start(
    args: argparse.Namespace,
    holder: RoutingHolder,
    binder: ports.PortBinder,
    worker_died: Callable[[str, int | None], None] = lambda *_: None,
) -> Relay:
    """`worker_died(name, exit code)`: a worker process ended unasked (see `Workers.watch`)."""
    options = Options(
        shared=bool(args.shared),
        address=args.listen_address,
        ingress_http_port=args.ingress_http_port,
        ingress_https_port=args.ingress_https_port,
        config=config(args),
        reuse_port=args.workers > 1,
    )
    plane = workers = None
    if args.workers > 1:
        workers = await Workers(options).start(args.workers)
        workers.watch(worker_died)
    else:
        plane = await Dataplane(options).start()
    relay = Relay(plane, workers, binder, args.grace_seconds, Stats())
    if plane is not None:
        rt = plane.rt
        assert rt is not None
        relay.stats = rt.stats
    REGISTRY.register(collector.Collector(lambda: relay.stats, lambda: relay.applied_at))
    holder.on_apply(relay.apply)
    if holder.state is not None:
        await relay.apply(holder.state)
    return relay
