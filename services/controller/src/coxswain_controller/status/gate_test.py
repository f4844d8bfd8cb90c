"""Programmed gated on bind + ack, named waits, and the latch.

Covers: no proxy connected → Pending; a proxy that has not bound → Pending naming the node and
ports; a proxy that has not acked the stamp → Pending naming the publish; both → True and
latched for the generation (node churn afterwards does not lower it); a new generation re-arms
the gate; a translated Programmed False passes through untouched.
"""

from __future__ import annotations

import dataclasses

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
