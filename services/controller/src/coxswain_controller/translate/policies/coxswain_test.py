"""CoxswainPolicy reading and attachment, table by table.

Covers the merge of a Gateway's, a route's and a rule's policies (the most specific part
winning, the older policy on one target winning a part both set), targets that cannot be
honoured (each named by its field, wrong shapes too), durations, and that a rule of another
kind or table is left alone. The whole pass (snapshots, status ancestors, patches) is the
golden case coxswainpolicy-attachment.
"""

from __future__ import annotations

from typing import Any

import pytest

from coxswain_controller.translate.backends.grants import Grants
from coxswain_controller.translate.backends.resolver import BackendResolver
from coxswain_controller.translate.inputs import Inputs
from coxswain_controller.translate.policies import coxswain
from coxswain_routing import RouteId, Rule

GW = {"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": "gw"}
ROUTE = {"group": "gateway.networking.k8s.io", "kind": "HTTPRoute", "name": "app"}


def _policy(name: str, second: int, targets: list[dict[str, Any]], **body: Any) -> dict[str, Any]:
    return {
        "apiVersion": "coxswain-labs.dev/v1alpha1",
        "kind": "CoxswainPolicy",
        "metadata": {"name": name, "namespace": "shop", "uid": name, "generation": 1,
                     "creationTimestamp": f"2026-01-01T00:00:{second:02d}Z"},
        "spec": {"targetRefs": targets, **body},
    }  # fmt: skip


def _read(*objects: dict[str, Any]) -> coxswain.Policies:
    inputs = Inputs.from_objects(list(objects))
    return coxswain.read_policies(inputs, BackendResolver(inputs, Grants(inputs)))


def _rule(name: str = "app", rule_name: str = "", kind: str = "HTTPRoute") -> Rule:
    return Rule(RouteId(0, "shop", name, kind, 0, rule_name))


def test_the_most_specific_part_wins_and_the_older_policy_on_one_target() -> None:
    policies = _read(
        _policy("gateway", 1, [GW], maxBodyBytes=10, connectionsPerClient=3),
        _policy("route", 2, [ROUTE], maxBodyBytes=20),
        _policy("newer-route", 3, [ROUTE], maxBodyBytes=30, sourceRanges={"deny": ["10.0.0.1"]}),
        _policy("rule", 4, [{**ROUTE, "sectionName": "admin"}], connectionsPerClient=1),
    )
    public = policies.attach("gateway/shop/gw", _rule()).policy
    admin = policies.attach("gateway/shop/gw", _rule(rule_name="admin")).policy
    assert public is not None and admin is not None
    assert (public.max_body_bytes, public.connections_per_client) == (20, 3)
    assert public.source_ranges is not None  # the newer one's part nobody else set
    assert (admin.max_body_bytes, admin.connections_per_client) == (20, 1)


@pytest.mark.parametrize(
    ("table", "rule"),
    [
        pytest.param("gateway/shop/other", _rule("elsewhere"), id="another Gateway and route"),
        pytest.param("ingress", _rule(), id="the Ingress table"),
        pytest.param("gateway/shop/gw", _rule(kind="GRPCRoute"), id="a GRPCRoute"),
    ],
)
def test_rules_no_policy_targets_are_left_alone(table: str, rule: Rule) -> None:
    policies = _read(_policy("route", 1, [ROUTE], maxBodyBytes=20))
    assert policies.attach(table, rule) is rule


@pytest.mark.parametrize(
    ("targets", "body", "said"),
    [
        pytest.param(
            [{**GW, "sectionName": "http"}], {}, "sectionName on a Gateway", id="listener"
        ),
        pytest.param([{**GW, "kind": "Service"}], {}, "not a Gateway or an HTTPRoute", id="kind"),
        pytest.param([GW], {"sourceRanges": {"allow": ["x"]}}, "not a CIDR", id="cidr"),
        pytest.param([GW], {"basicAuth": {"secretRef": {"name": "s"}}}, "not found", id="secret"),
        pytest.param(
            [GW],
            {"externalAuth": {"backendRef": {"name": "a", "port": 80, "namespace": "x"}}},
            "another namespace",
            id="auth elsewhere",
        ),
        # Shapes the CRD schema refuses but a cache can still hold: each is named, none raises.
        pytest.param(
            [GW],
            {"externalAuth": {}},
            "externalAuth.backendRef is required",
            id="no auth backendRef",
        ),
        pytest.param(
            [GW],
            {"externalAuth": {"backendRef": {"name": "a"}}},
            "externalAuth.backendRef.port is required",
            id="no auth port",
        ),
        pytest.param([GW], {"basicAuth": {}}, "basicAuth.secretRef is required", id="no secretRef"),
        pytest.param(
            [GW], {"rateLimits": [{}]}, "rateLimits[0].requests is required", id="no requests"
        ),
        pytest.param(
            [GW],
            {"rateLimits": [{"requests": 5, "per": "Hour"}]},
            "rateLimits[0].per 'Hour' is not one of Second, Minute",
            id="period",
        ),
        pytest.param(
            [GW],
            {"sessionAffinity": {"sameSite": "x"}},
            "sessionAffinity.sameSite 'x' is not one of Strict, Lax, None",
            id="sameSite",
        ),
        pytest.param(
            [GW],
            {"sourceRanges": {"deny": [7]}},
            "sourceRanges.deny must be a list of strings",
            id="cidr not a string",
        ),
        pytest.param(
            [GW],
            {"sourceRanges": "10.0.0.0/8"},
            "sourceRanges must be an object",
            id="ranges not an object",
        ),
    ],
)
def test_a_policy_that_cannot_be_honoured_attaches_nothing(
    targets: list[dict[str, Any]], body: dict[str, Any], said: str
) -> None:
    policies = _read(_policy("bad", 1, targets, **body))
    [read] = policies.reads
    assert read.policy is None and said in read.problem
    assert policies.attach("gateway/shop/gw", _rule()).policy is None


@pytest.mark.parametrize(
    ("text", "ms"), [("5s", 5000), ("1m30s", 90_000), ("250ms", 250), ("1h", 3_600_000)]
)
def test_durations(text: str, ms: int) -> None:
    assert coxswain._duration_ms(text) == ms
