"""Whether this replica leads, and who needs to know when that changes.

Spec 001: "Only the lease holder serves streams ... a standby replica that gets dialled anyway
... rejects the stream with FAILED_PRECONDITION". Leader election (a Lease, `election`) sets
the flag; the discovery server reads it on every new stream and closes live streams on
demotion; the publisher writes status and Events only while it is set.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

log = logging.getLogger(__name__)

__all__ = ["Leadership"]


class Leadership:
    def __init__(self, *, leader: bool = False) -> None:
        self._leader = leader
        self._listeners: list[Callable[[bool], None]] = []

    @property
    def is_leader(self) -> bool:
        return self._leader

    def set(self, leader: bool) -> None:
        if leader == self._leader:
            return
        self._leader = leader
        log.info("leadership changed", extra={"fields": {"leader": leader}})
        for listener in list(self._listeners):
            listener(leader)

    def subscribe(self, listener: Callable[[bool], None]) -> Callable[[], None]:
        """Call `listener(is_leader)` on every change; returns the unsubscribe function."""
        self._listeners.append(listener)
        return lambda: self._listeners.remove(listener)
