"""The cyclic garbage collector kept off the snapshot: paused while one is staged or compiled,
and told to leave a full one alone once it is served.

Decoding and compiling a snapshot allocate many short-lived, acyclic objects, and the
collections they trigger walk the whole heap: measured at 3k routes, collections were about
three quarters of a full table compile (200 ms, against 55 ms paused). Reference counting still
frees everything; the collector runs again once the last pause ends.

Staging runs on the event loop while the data plane compiles in a thread, and the collector's
switch is process-wide: pauses nest through a count, so the first to end does not re-enable it
under the other.

Why `served` freezes: a served snapshot lives until the next one, yet every full collection walks it
again. Measured at 3k routes, full collections paused the proxy for 23 to 77 ms in the middle of
serving (the tail of both request latency and convergence). After a full snapshot, and after
deltas that grew the snapshot by a quarter since the last freeze, everything alive is moved to
the collector's permanent generation (O(1)): later collections walk only what was allocated
since. Frozen objects are still freed by reference counting when dropped (snapshot objects hold
no cycles); what is lost is collection of cyclic garbage alive at those instants, and the
quarter-growth rule (the collector's own) bounds how many there are.
"""

from __future__ import annotations

import contextlib
import gc
import threading
from collections.abc import Iterator

_lock = threading.Lock()
_depth = 0  # pauses in progress
_resume = False  # whether the collector was enabled when the first of them began


@contextlib.contextmanager
def paused() -> Iterator[None]:
    global _depth, _resume
    with _lock:
        if _depth == 0:
            _resume = gc.isenabled()
            gc.disable()
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0 and _resume:
                gc.enable()


_frozen_size = 0  # resources served at the last freeze: the collector is process-wide, so is this


def served(resources: int, *, full: bool) -> None:
    """A snapshot of `resources` is served: freeze if it is full or grew by a quarter."""
    global _frozen_size
    with _lock:
        if full or resources > _frozen_size * 5 // 4:
            _frozen_size = resources
            gc.freeze()
