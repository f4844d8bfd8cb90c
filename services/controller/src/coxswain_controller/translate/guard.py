"""Objects translation cannot read: one malformed object costs itself, never the pass.

The API server validates Gateway API objects against their CRD schemas, but not everything that
reaches the cache is checked (an emulator, an older CRD, a Secret's or ConfigMap's free-form
data, a hand-edited object in a cluster with validation off). Translation reads raw JSON, so a
field of the wrong type surfaces as a TypeError or ValueError deep in a stage. Each stage runs
each object under `guarded`: such an object is left out of this pass — as if absent, so nothing
half-translated is served — and gets a Warning Event naming it and what could not be read.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TypeVar

from coxswain_controller.translate.inputs import Obj, name, namespace, uid
from coxswain_controller.translate.result import Event, ObjectRef

__all__ = ["MALFORMED", "guarded", "malformed_event"]

T = TypeVar("T")

# What reading a field of the wrong JSON type raises; anything else is a bug and propagates.
MALFORMED = (TypeError, ValueError, AttributeError, KeyError, IndexError)


def malformed_event(kind: str, obj: Obj, exc: Exception) -> Event:
    ref = ObjectRef(kind, namespace(obj), name(obj))
    message = f"{ref} could not be read and is not served: {type(exc).__name__}: {exc}"
    return Event(ref, uid(obj), "Warning", "Rejected", message)


def guarded(
    kind: str, objects: Iterable[Obj], read: Callable[[Obj], T], events: list[Event]
) -> list[tuple[Obj, T]]:
    """`read(obj)` for each object; a malformed one is dropped with an Event in `events`."""
    out = []
    for obj in objects:
        try:
            out.append((obj, read(obj)))
        except MALFORMED as exc:
            events.append(malformed_event(kind, obj, exc))
    return out
