"""What the proxy reports as bound, for the NodeStatus the discovery client sends.

Where it sits: after each snapshot is applied, the data plane's relay (`dataplane.wiring.Relay`)
reports the ports its listeners then hold with `PortBinder.set_bound()`; the discovery client
reads `current()` when a stream opens and `watch()`es for changes to send a fresh NodeStatus
each time. docs/discovery.md: NodeStatus is sent "on open and on every bind change" and
"replaces the previous report wholesale". Before the first snapshot no listener is bound and
the proxy reports no ports, which is true.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Protocol

from coxswain_proto import discovery as pb

log = logging.getLogger(__name__)

Unwatch = Callable[[], None]


@dataclass(frozen=True, slots=True, order=True)
class ReportedPort:
    """One port the proxy has actually bound."""

    port: int
    protocol: pb.ListenerProtocol  # the wire enum: this value exists to be sent


class BoundPorts(Protocol):
    """The collaborator the discovery client reads bound ports from."""

    def current(self) -> tuple[ReportedPort, ...]: ...

    def watch(self, callback: Callable[[], None]) -> Unwatch: ...


class PortBinder:
    """The record of bound ports; `set_bound()` notifies every watcher when it changes."""

    def __init__(self) -> None:
        self._bound: tuple[ReportedPort, ...] = ()
        self._watchers: list[Callable[[], None]] = []

    def current(self) -> tuple[ReportedPort, ...]:
        return self._bound

    def set_bound(self, ports: Iterable[ReportedPort]) -> None:
        # "ordered by (port, protocol)" (discovery.proto, NodeStatus.bound).
        bound = tuple(sorted(set(ports)))
        if bound == self._bound:
            return
        self._bound = bound
        for callback in list(self._watchers):
            try:
                callback()
            except Exception:
                log.exception("bound-port watcher failed")

    def watch(self, callback: Callable[[], None]) -> Unwatch:
        self._watchers.append(callback)
        return lambda: self._watchers.remove(callback)


def node_status(ports: BoundPorts) -> pb.ProxyMessage:
    bound = [pb.BoundPort(port=b.port, protocol=b.protocol) for b in ports.current()]
    return pb.ProxyMessage(node_status=pb.NodeStatus(bound=bound))
