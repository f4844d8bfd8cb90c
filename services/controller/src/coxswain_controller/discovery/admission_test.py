"""Scope parsing and authorisation as pure functions.

Covers `parse_scope` (absent scope, empty scope, half-filled Gateway), `parse_identity` (SPIFFE
IDs in and out of the trust domain) and `authorize`. Over real gRPC: server_test.py.
"""

from __future__ import annotations

import pytest

from coxswain_controller.discovery.admission import (
    MalformedScope,
    authorize,
    parse_identity,
    parse_scope,
)
from coxswain_controller.translate.scopes import SHARED_POOL, GatewayScope, Identity, Scope
from coxswain_proto import discovery as pb

SHARED = Identity("coxswain-system", "coxswain-proxy")


def test_parse_scope() -> None:
    assert parse_scope(None) == SHARED_POOL
    assert parse_scope(pb.Scope(shared_pool=pb.ScopeSharedPool())) == SHARED_POOL
    gateway = pb.Scope(gateway=pb.ScopeGateway(namespace="shop", name="gw"))
    assert parse_scope(gateway) == GatewayScope("shop", "gw")


@pytest.mark.parametrize(
    "scope",
    [
        pytest.param(pb.Scope(), id="no-kind"),
        pytest.param(
            pb.Scope(gateway=pb.ScopeGateway(namespace="shop")), id="gateway-without-name"
        ),
    ],
)
def test_malformed_scopes(scope: pb.Scope) -> None:
    with pytest.raises(MalformedScope):
        parse_scope(scope)


@pytest.mark.parametrize(
    ("spiffe", "identity"),
    [
        pytest.param("spiffe://cluster.local/ns/a/sa/b", Identity("a", "b"), id="ours"),
        pytest.param("spiffe://other/ns/a/sa/b", None, id="other-trust-domain"),
        pytest.param("spiffe://cluster.local/ns/a/sa/b/extra", None, id="extra-segments"),
        pytest.param("spiffe://cluster.local/ns//sa/b", None, id="empty-namespace"),
        pytest.param("https://cluster.local/ns/a/sa/b", None, id="not-spiffe"),
    ],
)
def test_parse_identity(spiffe: str, identity: Identity | None) -> None:
    assert parse_identity(spiffe, "cluster.local") == identity


def test_authorize() -> None:
    gateways = {GatewayScope("shop", "gw"): Identity("shop", "gw-coxswain")}

    def decide(identity: Identity, scope: Scope) -> str | None:
        return authorize(
            identity, scope, shared_proxy=SHARED, expected_gateway_identity=gateways.get
        )

    assert decide(SHARED, SHARED_POOL) is None
    assert decide(Identity("shop", "gw-coxswain"), GatewayScope("shop", "gw")) is None
    assert decide(Identity("shop", "gw-coxswain"), SHARED_POOL) is not None
    assert decide(SHARED, GatewayScope("shop", "gw")) is not None
    assert "not a dedicated Gateway" in (decide(SHARED, GatewayScope("shop", "none")) or "")
