"""Subscription scopes and the identities that may hold them: plain values.

A scope is what a proxy subscribes to (spec 002 "Scope-aware dispatch"): the shared pool, or one
dedicated Gateway. Translation produces one snapshot per scope and names each dedicated
Gateway's expected identity; the discovery server (`discovery.admission`) parses a Subscribe's
scope and the caller's SVID into these values and checks one against the other.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["GatewayScope", "SHARED_POOL", "Identity", "Scope", "SharedPool"]


@dataclass(frozen=True, slots=True)
class SharedPool:
    key = "shared"

    def __str__(self) -> str:
        return "SharedPool"


@dataclass(frozen=True, slots=True)
class GatewayScope:
    namespace: str
    name: str

    @property
    def key(self) -> str:
        return f"gateway/{self.namespace}/{self.name}"

    def __str__(self) -> str:
        return f"Gateway {self.namespace}/{self.name}"


Scope = SharedPool | GatewayScope
SHARED_POOL = SharedPool()


@dataclass(frozen=True, slots=True)
class Identity:
    """A proxy's ServiceAccount, as its SVID names it."""

    namespace: str
    service_account: str

    def __str__(self) -> str:
        return f"ns/{self.namespace}/sa/{self.service_account}"
