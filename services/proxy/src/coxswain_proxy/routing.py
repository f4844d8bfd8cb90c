"""The one reference the request path reads: the routing state currently served.

Where it sits: the discovery client swaps a freshly staged `snapshot.RoutingState` in with
`swap()`; request handlers read `holder.state` once per request and keep that object for the
whole request. Why no lock: the swap is a single attribute assignment, atomic under the GIL, and
states are immutable, so a reader sees either the old state or the new one, never a mix
(spec 001, "Request path": "each request reads it with a single atomic load").

Nothing here ever sets the state back to None: routing is never cleared across reconnects.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from coxswain_proxy.snapshot import RoutingState

log = logging.getLogger(__name__)

SwapListener = Callable[[RoutingState], None]


class RoutingHolder:
    """Holds the served `RoutingState` and tells listeners (readiness, metrics) of each swap."""

    __slots__ = ("state", "_listeners")

    def __init__(self) -> None:
        self.state: RoutingState | None = None  # None until the first snapshot is applied
        self._listeners: list[SwapListener] = []

    def on_swap(self, listener: SwapListener) -> None:
        self._listeners.append(listener)

    def swap(self, state: RoutingState) -> None:
        self.state = state
        for listener in self._listeners:
            # A listener's bug must not undo or interrupt a swap already made.
            try:
                listener(state)
            except Exception:
                log.exception("routing swap listener failed")
