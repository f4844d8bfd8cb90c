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
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from typing import Protocol

from coxswain_controller.translate.conditions import ConditionType, Reason
from coxswain_controller.translate.result import Condition, GatewayVerdict

__all__ = ["ProgrammedGate"]

Bind = tuple[int, str]  # (port, protocol)


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
    def __init__(self) -> None:
        self._latched: dict[tuple[str, str], int] = {}  # Gateway -> generation latched True

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
        translated = next(c for c in verdict.conditions if c.type is ConditionType.PROGRAMMED)
        if not translated.status:
            self._latched.pop(key, None)
            return verdict
        if self._latched.get(key) == verdict.generation:
            return verdict
        waiting = _waiting(set(binds), stamp_seq, nodes, str(verdict.scope))
        if not waiting:
            self._latched[key] = verdict.generation
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
