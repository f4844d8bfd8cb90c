"""One stream's bookkeeping: what the proxy holds, what is in flight, what to send next.

Pure (no I/O): the server feeds it the published snapshot and the proxy's Acks and Nacks.

- The first snapshot is full; after that, deltas against what the proxy acked.
- At most one snapshot in flight: nothing more is sent until the Ack or Nack echoing its nonce;
  changes published meanwhile are coalesced into the next one.
- After a Nack the proxy's state is unknown, so the next snapshot is full. It goes at once,
  unless what was refused was already a full snapshot of the current content: sending that
  again would be refused again, so it waits for the content to change.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from coxswain_controller.discovery.registry import Published
from coxswain_proto import discovery as pb

__all__ = ["StreamSession"]


@dataclass(frozen=True, slots=True)
class _InFlight:
    nonce: str
    version: str
    seq: int
    full: bool
    hashes: Mapping[str, str]


class StreamSession:
    def __init__(self, nonce: Callable[[], str] = lambda: secrets.token_hex(8)) -> None:
        self._nonce = nonce
        self.acked_hashes: Mapping[str, str] | None = None  # None: the proxy needs a full
        self.acked_version = ""
        self.acked_seq = 0
        self.in_flight: _InFlight | None = None
        self._refused_full: str | None = None  # a version refused as a full snapshot

    def next_snapshot(self, published: Published | None) -> pb.Snapshot | None:
        """The snapshot to send now, or None (one in flight, nothing new, or nothing yet)."""
        if self.in_flight is not None or published is None:
            return None
        if self.acked_hashes is not None and published.version == self.acked_version:
            return None
        if self.acked_hashes is None and published.version == self._refused_full:
            return None
        full = self.acked_hashes is None
        snapshot = self._full(published) if full else self._delta(published)
        self.in_flight = _InFlight(
            snapshot.nonce, published.version, published.seq, full, published.hashes
        )
        return snapshot

    def on_ack(self, ack: pb.Ack) -> bool:
        """Record an Ack; False when it does not answer the snapshot in flight."""
        sent = self.in_flight
        if sent is None or ack.nonce != sent.nonce or ack.version != sent.version:
            return False
        self.acked_hashes, self.acked_version, self.acked_seq = sent.hashes, sent.version, sent.seq
        self.in_flight = None
        self._refused_full = None
        return True

    def on_nack(self, nack: pb.Nack) -> bool:
        """Record a Nack; False when it does not answer the snapshot in flight."""
        sent = self.in_flight
        if sent is None or nack.nonce != sent.nonce:
            return False
        self.acked_hashes = None
        self._refused_full = sent.version if sent.full else None
        self.in_flight = None
        return True

    def _full(self, published: Published) -> pb.Snapshot:
        return pb.Snapshot(
            version=published.version,
            nonce=self._nonce(),
            full=True,
            resources=[published.messages[k] for k in sorted(published.messages)],
            publish_seq=published.seq,
        )

    def _delta(self, published: Published) -> pb.Snapshot:
        held = self.acked_hashes or {}
        # Only what changed is sorted: at 10k routes the scope has 20k keys and a delta one.
        changed = sorted(k for k, digest in published.hashes.items() if held.get(k) != digest)
        removed = sorted(k for k in held if k not in published.hashes)
        return pb.Snapshot(
            version=published.version,
            nonce=self._nonce(),
            full=False,
            resources=[published.messages[k] for k in changed],
            removed=removed,
            publish_seq=published.seq,
        )
