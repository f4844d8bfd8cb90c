"""The discovery side's record of the routing state it last committed, and who to tell.

Where it sits: the stream (`stream.StreamSession`) commits each freshly staged
`snapshot.RoutingState` with `commit()`, which swaps it in and awaits every applier: the data
plane's relay (`dataplane.wiring.Relay.apply`: every worker swapped, every port bound) before
the Ack goes out. Readiness hears of each swap (`on_swap`), and staging reads `holder.state` as
the base a delta applies to. The request path never reads it: it reads the tables the data
plane compiled from it (`dataplane.runtime.Runtime.tables`). Why no lock: the swap is a
single attribute assignment on one event loop, and states are immutable, so a reader sees
either the old state or the new one, never a mix (spec 001, "Request path": "each request
reads it with a single atomic load").

Nothing here ever sets the state back to None: routing is never cleared across reconnects.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from coxswain_proxy.discovery.snapshot import RoutingState

log = logging.getLogger(__name__)

SwapListener = Callable[[RoutingState], None]
Applier = Callable[[RoutingState], Awaitable[object]]


class RoutingHolder:
    """Holds the served `RoutingState` and tells listeners (readiness, metrics) of each swap."""

    __slots__ = ("state", "_listeners", "_appliers")

    def __init__(self) -> None:
        self.state: RoutingState | None = None  # None until the first snapshot is applied
        self._listeners: list[SwapListener] = []
        self._appliers: list[Applier] = []

    def on_swap(self, listener: SwapListener) -> None:
        self._listeners.append(listener)

    def on_apply(self, applier: Applier) -> None:
        """`await applier(state)` after each swap, before the snapshot is acknowledged (the
        data plane: every worker swapped and every port bound)."""
        self._appliers.append(applier)

    async def commit(self, state: RoutingState) -> None:
        """Swap, then wait for every applier: what an Ack promises is then true."""
        self.swap(state)
        for applier in self._appliers:
            try:
                await applier(state)
            except Exception:
                # The routing is swapped; a port that failed to bind is reported by NodeStatus
                # (it is missing there), which keeps its Gateway from turning Programmed.
                log.exception("the data plane could not apply a snapshot")

    def swap(self, state: RoutingState) -> None:
        self.state = state
        for listener in self._listeners:
            # A listener's bug must not undo or interrupt a swap already made.
            try:
                listener(state)
            except Exception:
                log.exception("routing swap listener failed")
