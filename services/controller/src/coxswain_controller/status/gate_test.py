"""Programmed gated on bind + ack, named waits, and the latch.

Covers: no proxy connected → Pending; a proxy that has not bound → Pending naming the node and
ports; a proxy that has not acked the stamp → Pending naming the publish; both → True and
latched for the generation (node churn afterwards does not lower it); a new generation re-arms
the gate; a translated Programmed False passes through untouched; convergence measured from
the generation first seen to Programmed True, once per generation, on an injected clock.
"""

from __future__ import annotations

import dataclasses

from prometheus_client import REGISTRY

from coxswain_controller.discovery.nodes import Node
from coxswain_controller.status.gate import ProgrammedGate
from coxswain_controller.translate.conditions import ConditionType, Reason
from coxswain_controller.translate.result import Condition, GatewayVerdict, ObjectRef
from coxswain_controller.translate.scopes import SHARED_POOL, Identity

BINDS = {(25552, "HTTP")}


def verdict(generation: int = 3, programmed: bool = True) -> GatewayVerdict:
    return GatewayVerdict(
        ObjectRef("Gateway", "shop", "gw"),
        generation,
        "uid",
        (
            Condition(ConditionType.ACCEPTED, True, Reason.ACCEPTED),
            Condition(
                ConditionType.PROGRAMMED,
                programmed,
                Reason.PROGRAMMED if programmed else Reason.INVALID,
            ),
        ),
        (),
        SHARED_POOL,
    )


def node(
    name: str, *, bound: tuple[tuple[int, str], ...] = ((25552, "HTTP"),), acked: int = 7
) -> Node:
    return Node(
        name,
        Identity("coxswain-system", "coxswain-proxy"),
        SHARED_POOL,
        close=lambda _: None,
        acked_seq=acked,
        bound=bound,
    )


def programmed(v: GatewayVerdict) -> Condition:
    return next(c for c in v.conditions if c.type is ConditionType.PROGRAMMED)


def test_pending_until_a_proxy_connects() -> None:
    result = programmed(ProgrammedGate().gate(verdict(), binds=BINDS, stamp_seq=7, nodes=[]))
    assert (result.status, result.reason) == (False, Reason.PENDING)
    assert "to connect" in result.message
    assert result.to_api(3)["observedGeneration"] == 2


def test_pending_names_who_has_not_bound_and_who_has_not_acked() -> None:
    nodes = [node("p1", bound=()), node("p2", acked=6), node("p3")]
    result = programmed(ProgrammedGate().gate(verdict(), binds=BINDS, stamp_seq=7, nodes=nodes))
    assert result.reason is Reason.PENDING
    assert (
        result.message
        == "waiting for p1 to bind 25552/HTTP; waiting for p2 to acknowledge publish 7"
    )


def test_true_once_bound_and_acked_then_latched_until_the_generation_changes() -> None:
    gate = ProgrammedGate()
    assert programmed(gate.gate(verdict(), binds=BINDS, stamp_seq=7, nodes=[node("p1")])).status
    # Pool churn (every proxy gone) does not lower it for this generation.
    assert programmed(gate.gate(verdict(), binds=BINDS, stamp_seq=7, nodes=[])).status
    # A spec change re-arms the gate.
    assert not programmed(
        gate.gate(verdict(generation=4), binds=BINDS, stamp_seq=9, nodes=[node("p1")])
    ).status


def test_a_translated_false_passes_through() -> None:
    v = verdict(programmed=False)
    assert ProgrammedGate().gate(v, binds=BINDS, stamp_seq=7, nodes=[node("p1")]) is v
    assert dataclasses.replace(v) == v


def _observed() -> float:
    name = "coxswain_controller_gateway_convergence_seconds"
    return REGISTRY.get_sample_value(f"{name}_count") or 0.0


def test_convergence_is_seen_to_programmed_once_per_generation() -> None:
    now = [100.0]
    gate = ProgrammedGate(clock=lambda: now[0], wall=lambda: 5000.0 + now[0])
    before = _observed()
    assert gate.convergence("shop", "gw") is None
    gate.gate(verdict(), binds=BINDS, stamp_seq=7, nodes=[])  # first seen, waiting
    held = gate.convergence("shop", "gw")
    assert held is not None and (held.generation, held.seen_at, held.seconds) == (3, 5100.0, None)
    now[0] = 100.75
    assert programmed(gate.gate(verdict(), binds=BINDS, stamp_seq=7, nodes=[node("p1")])).status
    held = gate.convergence("shop", "gw")
    assert held is not None and held.seconds == 0.75
    assert _observed() == before + 1
    # Re-gating the latched generation (and a translated False and back) measures nothing new.
    now[0] = 200.0
    gate.gate(verdict(), binds=BINDS, stamp_seq=7, nodes=[node("p1")])
    gate.gate(verdict(programmed=False), binds=BINDS, stamp_seq=7, nodes=[node("p1")])
    gate.gate(verdict(), binds=BINDS, stamp_seq=7, nodes=[node("p1")])
    assert _observed() == before + 1
    assert gate.convergence("shop", "gw") == held
    # A new generation starts a new measurement.
    gate.gate(verdict(generation=4), binds=BINDS, stamp_seq=9, nodes=[node("p1")])
    fresh = gate.convergence("shop", "gw")
    assert fresh is not None and (fresh.generation, fresh.seconds) == (4, None)
    now[0] = 202.0
    gate.gate(verdict(generation=4), binds=BINDS, stamp_seq=9, nodes=[node("p1", acked=9)])
    fresh = gate.convergence("shop", "gw")
    assert fresh is not None and fresh.seconds == 2.0
    assert _observed() == before + 2
