"""Programmed, gated on bind + ack (spec 000).

"The leader uses these reports to decide when a Gateway's Programmed condition should flip to
True — and it requires two independent signals to both hold": every relevant proxy has bound
the Gateway's ports (bind), and has acknowledged a snapshot containing the Gateway's current
generation (ack: its acked publish sequence has reached the sequence at which that generation
first appeared). "Until both bind and ack hold, Programmed stays False/Pending,
observedGeneration stays one behind the current generation, and the condition's message names
specifically what's still being waited on. Once a generation reaches Programmed=True, ordinary
pool churn — rollouts, leader failover — never flips it back to False; only an actual spec
change re-arms the gate."

The gate also measures convergence: from the moment it first sees a Gateway's generation (the
pass that translated it) to the moment that generation is Programmed: True, observed once per
generation into `coxswain_controller_gateway_convergence_seconds` and kept per Gateway for the
operator API. A controller that starts or takes over measures from when it first saw the
generation, not from when it was written.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol

from prometheus_client import Histogram

from coxswain_controller.translate.conditions import ConditionType, Reason
from coxswain_controller.translate.result import Condition, GatewayVerdict

__all__ = ["Convergence", "ProgrammedGate"]

Bind = tuple[int, str]  # (port, protocol)

CONVERGENCE = Histogram(
    "coxswain_controller_gateway_convergence_seconds",
    "Time from a Gateway generation first seen by the controller to Programmed: True for it.",
    buckets=(0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0),
)


@dataclass(frozen=True, slots=True)
class Convergence:
    """One Gateway generation on its way to Programmed: True."""

    generation: int  # the generation measured
    seen_at: float  # wall-clock time the gate first saw it
    started: float  # the same moment on the monotonic clock
    seconds: float | None = None  # seen → Programmed: True; None while not yet


class ProxyReport(Protocol):
    """What the gate reads of one connected proxy (the discovery server's `Node` is one): the
    status side depends on these facts, not on the discovery server's types."""

    @property
    def node_id(self) -> str: ...

    @property
    def acked_seq(self) -> int: ...

    @property
    def bound(self) -> tuple[Bind, ...]: ...


class ProgrammedGate:
    def __init__(
        self,
        *,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
    ) -> None:
        self._latched: dict[tuple[str, str], int] = {}  # Gateway -> generation latched True
        self._convergence: dict[tuple[str, str], Convergence] = {}  # Gateway -> its latest
        self._clock = clock
        self._wall = wall

    def gate(
        self,
        verdict: GatewayVerdict,
        *,
        binds: Iterable[Bind],
        stamp_seq: int,
        nodes: Sequence[ProxyReport],
    ) -> GatewayVerdict:
        """`verdict` with its Programmed condition gated on the proxies' reports."""
        key = (verdict.ref.namespace, verdict.ref.name)
        self._seen(key, verdict.generation)
        translated = next(c for c in verdict.conditions if c.type is ConditionType.PROGRAMMED)
        if not translated.status:
            self._latched.pop(key, None)
            return verdict
        if self._latched.get(key) == verdict.generation:
            return verdict
        waiting = _waiting(set(binds), stamp_seq, nodes, str(verdict.scope))
        if not waiting:
            self._latched[key] = verdict.generation
            self._converged(key)
            return verdict
        pending = Condition(
            ConditionType.PROGRAMMED,
            False,
            Reason.PENDING,
            waiting,
            observed_generation=max(verdict.generation - 1, 0),
        )
        conditions = tuple(pending if c is translated else c for c in verdict.conditions)
        return dataclasses.replace(verdict, conditions=conditions)

    def forget(self, namespace: str, name: str) -> None:
        self._latched.pop((namespace, name), None)
        self._convergence.pop((namespace, name), None)

    def convergence(self, namespace: str, name: str) -> Convergence | None:
        """The latest generation of that Gateway the gate has seen, and how long it took to be
        Programmed (None before the gate has seen the Gateway)."""
        return self._convergence.get((namespace, name))

    def _seen(self, key: tuple[str, str], generation: int) -> None:
        held = self._convergence.get(key)
        if held is None or held.generation != generation:
            self._convergence[key] = Convergence(generation, self._wall(), self._clock())

    def _converged(self, key: tuple[str, str]) -> None:
        held = self._convergence[key]
        if held.seconds is None:  # once per generation, however often it re-latches
            seconds = max(self._clock() - held.started, 0.0)
            self._convergence[key] = dataclasses.replace(held, seconds=seconds)
            CONVERGENCE.observe(seconds)


def _waiting(binds: set[Bind], stamp_seq: int, nodes: Sequence[ProxyReport], scope: str) -> str:
    if not nodes:
        return f"waiting for a proxy serving {scope} to connect"
    unbound = sorted(n.node_id for n in nodes if not binds <= set(n.bound))
    unacked = sorted(n.node_id for n in nodes if n.acked_seq < stamp_seq)
    parts = []
    if unbound:
        ports = ", ".join(f"{port}/{protocol}" for port, protocol in sorted(binds))
        parts.append(f"waiting for {', '.join(unbound)} to bind {ports}")
    if unacked:
        parts.append(f"waiting for {', '.join(unacked)} to acknowledge publish {stamp_seq}")
    return "; ".join(parts)
