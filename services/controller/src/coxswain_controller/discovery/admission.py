"""Admission of a discovery stream: which scope it asks for, who is asking, and may they.

Spec 002 "Scope-aware dispatch": "A Subscribe message with no scope field is treated as
SharedPool. A scope message with no kind discriminator is rejected as malformed to prevent a
zero-value proto from silently escalating to SharedPool."

Spec 001: "the discovery server verifies that the peer's mTLS SVID matches that expected SA
before sending any snapshot — a mismatch yields PERMISSION_DENIED."
"""

from __future__ import annotations

from collections.abc import Callable

from coxswain_controller.translate.scopes import (
    SHARED_POOL,
    GatewayScope,
    Identity,
    Scope,
    SharedPool,
)
from coxswain_proto import discovery as pb

__all__ = ["MalformedScope", "authorize", "parse_identity", "parse_scope"]


class MalformedScope(ValueError):
    """A Subscribe whose scope cannot be read."""


def parse_scope(scope: pb.Scope | None) -> Scope:
    if scope is None:
        return SHARED_POOL
    if scope.shared_pool is not None:
        return SHARED_POOL
    if scope.gateway is not None:
        if not scope.gateway.namespace or not scope.gateway.name:
            raise MalformedScope("a Gateway scope needs both namespace and name")
        return GatewayScope(scope.gateway.namespace, scope.gateway.name)
    raise MalformedScope("scope has no kind: send shared_pool or gateway, never an empty scope")


def parse_identity(spiffe_id: str, trust_domain: str) -> Identity | None:
    """The identity in `spiffe://<trust_domain>/ns/<ns>/sa/<sa>`, or None for anything else."""
    prefix = f"spiffe://{trust_domain}/"
    if not spiffe_id.startswith(prefix):
        return None
    parts = spiffe_id[len(prefix) :].split("/")
    if len(parts) != 4 or parts[0] != "ns" or parts[2] != "sa" or not parts[1] or not parts[3]:
        return None
    return Identity(parts[1], parts[3])


def authorize(
    identity: Identity,
    scope: Scope,
    *,
    shared_proxy: Identity,
    expected_gateway_identity: Callable[[GatewayScope], Identity | None],
) -> str | None:
    """None when `identity` may subscribe to `scope`; otherwise why not."""
    if isinstance(scope, SharedPool):
        if identity == shared_proxy:
            return None
        return f"{identity} may not subscribe to SharedPool (only {shared_proxy} may)"
    expected = expected_gateway_identity(scope)
    if expected is None:
        return f"{scope} is not a dedicated Gateway this controller serves"
    if identity != expected:
        return f"{identity} may not subscribe to {scope} (only {expected} may)"
    return None
