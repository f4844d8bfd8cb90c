"""The stream relays' bounds, and the `serve` flags that set them.

Where it sits: `runtime.Config.stream` holds one `StreamLimits` for the worker; `binds` hands it
to every TCP, TLS and UDP listener it opens, and each relay and UDP session reads its bounds
from there. `wiring.add_arguments` calls `add_arguments` on the `serve` parser and
`wiring.config` calls `from_args`, so the flags, their defaults and their validation sit beside
the values they set, and each default is written once.

Why no imports from the data plane: `runtime` imports this module, and everything in `stream/`
imports `runtime`.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable
from dataclasses import dataclass

MAX_HELLO_BYTES = 16 * 1024  # a ClientHello with post-quantum key shares is under 2 KiB


@dataclass(frozen=True, slots=True)
class StreamLimits:
    connect_timeout: float = 5.0  # dialling a backend endpoint: past it, the connection is refused
    idle_timeout: float = 600.0  # no byte either way this long: closed (nginx proxy_timeout 10m)
    # A TLS client's ClientHello must arrive within this from the accept; on a Terminate
    # listener, its whole handshake.
    hello_timeout: float = 10.0
    hello_bytes: int = MAX_HELLO_BYTES  # read for a ClientHello at most, then refused
    udp_idle_timeout: float = 60.0  # a UDP session with no datagram either way this long: ended
    udp_sessions: int = 16384  # UDP sessions per bound port: a new client past it is dropped
    udp_queue: int = 64  # datagrams held per UDP session while its backend socket opens


DEFAULT_LIMITS = StreamLimits()

# Below a real ClientHello every client would be refused; above 1 MiB each unrouted connection
# could make the proxy hold that much.
HELLO_BYTES_RANGE = (1024, 1024 * 1024)
# Sessions and queued datagrams: at least one, and no more than a worker's memory holds.
COUNT_RANGE = (1, 1 << 24)

_DEFAULT = "(default: %(default)s)"


def add_arguments(serve: argparse.ArgumentParser) -> None:
    group = serve.add_argument_group("TCP, TLS and UDP relays (TCPRoute, TLSRoute, UDPRoute)")
    d = DEFAULT_LIMITS
    _seconds_flag(
        group,
        "--stream-connect-timeout",
        d.connect_timeout,
        "a backend endpoint must accept the connection within this, else it is refused",
    )
    _seconds_flag(
        group,
        "--stream-idle-timeout",
        d.idle_timeout,
        "a TCP or TLS relay with no byte either way for this long is closed",
    )
    _seconds_flag(
        group,
        "--tls-hello-timeout",
        d.hello_timeout,
        "a TLS listener's client must send its ClientHello within this from the accept (and, "
        "on a Terminate listener, finish its handshake), else closed",
    )
    group.add_argument(
        "--tls-hello-max-bytes",
        type=_count(*HELLO_BYTES_RANGE),
        metavar="BYTES",
        default=d.hello_bytes,
        help="a TLS listener reads at most this much for a ClientHello, then closes the "
        f"connection; {HELLO_BYTES_RANGE[0]} to {HELLO_BYTES_RANGE[1]} {_DEFAULT}",
    )
    _seconds_flag(
        group,
        "--udp-idle-timeout",
        d.udp_idle_timeout,
        "a UDP session with no datagram either way for this long is ended",
    )
    group.add_argument(
        "--udp-max-sessions",
        type=_count(*COUNT_RANGE),
        metavar="N",
        default=d.udp_sessions,
        help=f"UDP sessions per listener: a new client's datagram past it is dropped {_DEFAULT}",
    )
    group.add_argument(
        "--udp-session-queue",
        type=_count(*COUNT_RANGE),
        metavar="N",
        default=d.udp_queue,
        help="datagrams a new UDP session holds while its backend socket opens; more are "
        f"dropped {_DEFAULT}",
    )


def from_args(args: argparse.Namespace) -> StreamLimits:
    return StreamLimits(
        connect_timeout=args.stream_connect_timeout,
        idle_timeout=args.stream_idle_timeout,
        hello_timeout=args.tls_hello_timeout,
        hello_bytes=args.tls_hello_max_bytes,
        udp_idle_timeout=args.udp_idle_timeout,
        udp_sessions=args.udp_max_sessions,
        udp_queue=args.udp_session_queue,
    )


def _seconds_flag(group: argparse._ArgumentGroup, name: str, default: float, text: str) -> None:
    group.add_argument(
        name, type=_seconds, metavar="SECONDS", default=default, help=f"{text} {_DEFAULT}"
    )


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not 0 < value < math.inf:
        raise argparse.ArgumentTypeError(f"must be more than 0 seconds: {text!r}")
    return value


def _count(low: int, high: int) -> Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"must be {low} to {high}: {text!r}")
        return value

    return parse
