"""Publishing: cache changes → one debounced translation → snapshots, status and Events.

Where it sits: the sources call `changed()` for every event that matters; `run()` waits for a
quiet moment (a trailing DEBOUNCE with at most MAX_DELAY since the first change, so a burst
becomes one publish), translates the cache's current view in a worker thread (it is pure and
CPU-bound, and the event loop must keep serving streams), publishes every scope, and stamps each
Gateway with the publish sequence at which its current generation first appeared (spec 000).
The leader then hands the verdicts, Programmed gated on bind + ack, to the status writer, and
the desired objects to the provisioner; a standby publishes too, so it serves at once when it
takes over.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from prometheus_client import Counter, Gauge, Histogram

from coxswain_controller.discovery.nodes import NodeRegistry
from coxswain_controller.discovery.registry import SnapshotRegistry
from coxswain_controller.leader.leadership import Leadership
from coxswain_controller.provisioner.provisioner import Provisioner
from coxswain_controller.status.events import EventRecorder
from coxswain_controller.status.gate import ProgrammedGate
from coxswain_controller.status.writer import StatusWriter
from coxswain_controller.translate import Inputs, Options, TranslateResult
from coxswain_controller.translate.incremental import Translator
from coxswain_controller.translate.result import GatewayVerdict, Verdict

log = logging.getLogger(__name__)

__all__ = ["Freezer", "Pass", "Publisher", "gc_paused", "translate_pass"]

DEBOUNCE = 0.02
MAX_DELAY = 0.5

TRANSLATIONS = Histogram("coxswain_controller_translate_seconds", "Time to translate the cache.")
PUBLISHES = Counter("coxswain_controller_publishes_total", "Translation passes published.")
FAILED_PASSES = Counter(
    "coxswain_controller_translate_failures_total",
    "Translation passes that failed (a bug); the last published snapshots kept serving.",
)
SEQ = Gauge("coxswain_controller_publish_seq", "The latest publish sequence number.")


@dataclass(frozen=True, slots=True)
class Pass:
    """The last translation pass, for `/api/v1/health`: when, how long, at which seq."""

    at: float  # time.time() when it finished
    seq: int  # the publish seq after it (unchanged when nothing changed)
    translate_ms: float
    publish_ms: float
    failed: bool = False


class Publisher:
    def __init__(
        self,
        *,
        inputs: Callable[[], Inputs],
        registry: SnapshotRegistry,
        nodes: NodeRegistry,
        leadership: Leadership,
        options: Options,
        writer: StatusWriter | None = None,
        events: EventRecorder | None = None,
        provisioner: Provisioner | None = None,
        debounce: float = DEBOUNCE,
        max_delay: float = MAX_DELAY,
    ) -> None:
        self._inputs = inputs
        self._registry = registry
        self._nodes = nodes
        self._leadership = leadership
        self._writer = writer
        self._events = events
        self._provisioner = provisioner
        self._debounce = debounce
        self._max_delay = max_delay
        self._gate = ProgrammedGate()
        self._translator = Translator(options)  # keeps the last pass to patch it
        self._freezer = Freezer()
        self._stamps: dict[tuple[str, str], tuple[int, int]] = {}  # Gateway -> (generation, seq)
        self._changed = asyncio.Event()
        self._first_change: float | None = None  # loop time the pending pass's first change came
        self.result: TranslateResult | None = None
        self.last_pass: Pass | None = None
        self.published = asyncio.Event()  # set after the first publish
        nodes.subscribe(self.regate)
        leadership.subscribe(self._on_leadership)

    def changed(self) -> None:
        self._changed.set()

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            await self._changed.wait()
            first = self._first_change = loop.time()
            while True:  # wait for a quiet DEBOUNCE, but no longer than MAX_DELAY in all
                self._changed.clear()
                remaining = self._max_delay - (loop.time() - first)
                if remaining <= 0:
                    break
                # asyncio.timeout, not wait_for: on 3.11 wait_for can swallow a cancel that
                # arrives as the wait ends, and `stop` then waits for this task forever.
                try:
                    async with asyncio.timeout(min(self._debounce, remaining)):
                        await self._changed.wait()
                except TimeoutError:
                    break
            await self.rebuild()

    async def rebuild(self) -> None:
        inputs = self._inputs()
        loop = asyncio.get_running_loop()
        started = loop.time()
        patched_before = self._translator.patched
        try:
            with TRANSLATIONS.time():
                result = await asyncio.to_thread(translate_pass, self._translator, inputs)
        except Exception:
            # A bug, not bad input (objects that cannot be read are refused one by one inside
            # translation): proxies keep the last published snapshots, the next change tries
            # again from scratch, and the failure is loud.
            FAILED_PASSES.inc()
            elapsed = round((loop.time() - started) * 1000, 1)
            self.last_pass = Pass(time.time(), self._registry.seq, elapsed, 0.0, failed=True)
            log.exception("translation failed; the last published snapshots keep serving")
            self._translator.reset()
            return
        translated = loop.time()
        waited, self._first_change = started - (self._first_change or started), None
        self._registry.set_gateway_identities(result.gateway_identities)
        before = self._registry.seq
        full_pass = self._translator.patched == patched_before
        with gc_paused():  # encoding changed resources allocates as much as translating
            seq = self._registry.publish(result.snapshots)
        SEQ.set(seq)
        PUBLISHES.inc()
        self.last_pass = Pass(
            time.time(),
            seq,
            round((translated - started) * 1000, 1),
            round((loop.time() - translated) * 1000, 1),
        )
        if seq != before:
            # One line per publish (not per event): what an operator correlates with proxies'
            # "snapshot applied" lines, which carry the same publish_seq.
            log.info(
                "published",
                extra={
                    "fields": {
                        "publish_seq": seq,
                        # From the first change of the burst to the pass starting: the debounce.
                        "debounce_ms": round(waited * 1000, 1),
                        "translate_ms": round((translated - started) * 1000, 1),
                        "publish_ms": round((loop.time() - translated) * 1000, 1),
                        "patched": self._translator.patched,
                    }
                },
            )
        for verdict in result.verdicts:
            if isinstance(verdict, GatewayVerdict):
                key = (verdict.ref.namespace, verdict.ref.name)
                if self._stamps.get(key, (None, 0))[0] != verdict.generation:
                    self._stamps[key] = (verdict.generation, seq)
        self.result = result
        self.published.set()
        self._freezer.passed(inputs, full=full_pass)
        # Let the streams woken by the publish send their deltas before the status work below
        # (gating and merging every verdict) holds the loop: traffic first, status after.
        await asyncio.sleep(0)
        await self._write(result)

    def regate(self) -> None:
        """A proxy acked, bound or left: Gateways waiting on it may now be Programmed."""
        if self.result is not None and self._writer is not None and self._leadership.is_leader:
            self._writer.submit(self._gated(self.result))

    async def _write(self, result: TranslateResult) -> None:
        if not self._leadership.is_leader:
            return
        if self._writer is not None:
            self._writer.submit(self._gated(result))
        if self._provisioner is not None:
            self._provisioner.submit(result.provision)
        if self._events is not None:
            await self._events.record(result.events)

    def _gated(self, result: TranslateResult) -> list[Verdict]:
        gated: list[Verdict] = []
        for verdict in result.verdicts:
            if isinstance(verdict, GatewayVerdict):
                verdict = self._gate.gate(
                    verdict,
                    binds=_binds(result, verdict),
                    stamp_seq=self._stamps.get((verdict.ref.namespace, verdict.ref.name), (0, 0))[
                        1
                    ],
                    nodes=self._nodes.in_scope(verdict.scope),
                )
            gated.append(verdict)
        return gated

    @property
    def gate(self) -> ProgrammedGate:
        """The Programmed gate: the operator API reads each Gateway's convergence from it."""
        return self._gate

    def gated(self) -> list[Verdict]:
        """The last pass's verdicts as the status writer gets them (Programmed gated on bind +
        ack): what the operator API reports as each object's conditions."""
        return self._gated(self.result) if self.result is not None else []

    def _on_leadership(self, leader: bool) -> None:
        if leader and self._events is not None:
            self._events.new_term()
        if leader and self._writer is not None:
            self._writer.forget()
        if leader and self._provisioner is not None:
            self._provisioner.forget()
        if leader:
            self.changed()


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """The cyclic garbage collector paused for one pass.

    A pass allocates hundreds of thousands of short-lived, acyclic objects at scale, and each
    collection they trigger walks the whole heap, the watch cache included: measured at 10k
    routes, collections were over half of a translation (0.9 s, against 0.38 s paused).
    Reference counting still frees everything; the collector runs again once the pass is done.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


class Freezer:
    """When to exempt what is alive from future collections: after a full pass, or once the
    cache grew by a quarter since the last freeze (the collector's own growth rule).

    The watch cache and the kept pass are most of the heap and live for a long time, yet every
    full collection walked them: measured at 3k routes, 56 to 212 ms pauses on the event loop,
    the tail of change-to-traffic time. `gc.freeze()` moves them to the permanent generation
    (O(1)), so later collections walk only what was allocated since. Frozen objects are still
    freed by reference counting when the cache drops them (parsed JSON and compiled routing hold
    no cycles); what is lost is collection of cyclic garbage alive at those instants, which the
    growth rule keeps few: a full pass follows a Gateway, Service or grant change, not an edit.
    """

    def __init__(self) -> None:
        self._size = 0

    def passed(self, inputs: Inputs, *, full: bool) -> None:
        size = inputs.size()
        if full or size > self._size * 5 // 4:
            self._size = size
            gc.freeze()


def translate_pass(translator: Translator, inputs: Inputs) -> TranslateResult:
    """`translator.translate`, with the collector paused (see `gc_paused`)."""
    with gc_paused():
        return translator.translate(inputs)


def _binds(result: TranslateResult, verdict: GatewayVerdict) -> set[tuple[int, str]]:
    key = f"listeners/{verdict.ref.namespace}/{verdict.ref.name}"
    for resource in result.snapshots.get(verdict.scope, ()):
        if resource.key == key:
            return {(x.bind_port, x.protocol.value) for x in getattr(resource, "listeners", ())}
    return set()
