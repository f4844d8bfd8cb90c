"""The discovery client's phases and how a stream's end decides the next one: pure.

Where it sits: `client.DiscoveryClient` enters each phase through `Lifecycle.enter()`, which
refuses a transition the table does not list (a bug, not a runtime condition), and asks
`classify()` what a stream's final gRPC status means.

Why a table: the client has six phases and the legal moves between them are the design; written
as a table they can be read and reviewed at a glance (conventions: a lifecycle with more than
three states is a transition table).
"""

from __future__ import annotations

import logging
from enum import StrEnum

import grpc

log = logging.getLogger(__name__)


class Phase(StrEnum):
    STARTING = "starting"  # nothing tried yet
    OBTAINING = "obtaining-svid"  # calling IssueSvid: no SVID yet, or the last one expired
    DIALING = "dialing"  # stream opened and subscribed, no snapshot on it yet
    STREAMING = "streaming"  # the stream has delivered a snapshot
    WAITING = "backing-off"  # sleeping before the next attempt
    STOPPED = "stopped"  # a wire-version mismatch: retrying cannot help


TRANSITIONS: dict[Phase, frozenset[Phase]] = {
    Phase.STARTING: frozenset({Phase.OBTAINING}),
    Phase.OBTAINING: frozenset({Phase.DIALING, Phase.WAITING}),
    # DIALING -> DIALING: "not the leader", retried at once on the next endpoint.
    Phase.DIALING: frozenset(
        {Phase.STREAMING, Phase.DIALING, Phase.OBTAINING, Phase.WAITING, Phase.STOPPED}
    ),
    # STREAMING -> DIALING: the SVID was renewed, or the controller stepped down.
    Phase.STREAMING: frozenset({Phase.DIALING, Phase.OBTAINING, Phase.WAITING, Phase.STOPPED}),
    Phase.WAITING: frozenset({Phase.OBTAINING, Phase.DIALING}),
    Phase.STOPPED: frozenset(),
}


class Lifecycle:
    def __init__(self) -> None:
        self.phase = Phase.STARTING

    def enter(self, phase: Phase) -> None:
        if phase not in TRANSITIONS[self.phase]:
            raise RuntimeError(f"discovery client: no transition {self.phase} -> {phase}")
        log.debug("discovery phase", extra={"fields": {"from": self.phase, "to": phase}})
        self.phase = phase


class Verdict(StrEnum):
    RETRY = "retry"  # back off, then the next endpoint
    NOT_LEADER = "not-leader"  # the next endpoint at once
    STOP = "stop"  # never again: the protocol versions differ


def classify(code: grpc.StatusCode, details: str) -> Verdict:
    """What the stream's final status says to do next (docs/discovery.md, "One stream")."""
    if code != grpc.StatusCode.FAILED_PRECONDITION:
        # PERMISSION_DENIED, INVALID_ARGUMENT, ALREADY_EXISTS included: the identity or the
        # configuration may be fixed while we wait, so they are retried, just not quickly.
        return Verdict.RETRY
    text = details.lower()
    # "a standby replica that gets dialled anyway ... rejects the stream with
    # FAILED_PRECONDITION, and the proxy fast-retries until it lands on the real leader"
    # (spec 001, "Roles").
    if "not the leader" in text:
        return Verdict.NOT_LEADER
    # "wire_version differs: FAILED_PRECONDITION naming both versions".
    if "wire" in text and "version" in text:
        return Verdict.STOP
    return Verdict.RETRY
