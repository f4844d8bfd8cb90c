"""A route's namespace labels decide its attachment, and a Namespace change re-translates.

Spec 003 allowedRoutes: `namespaces.from: Selector` admits the routes of the namespaces whose
labels the selector matches. Covers the selector's semantics (matchLabels, the four operators,
an empty selector, selectors the API would refuse) on a translation of the
namespace-selector-metadata-name-and-labels golden case, and a Namespace whose labels change
after its route attached: the route detaches (NotAllowedByListeners, attachedRoutes drops) and
attaches again when the label returns, through the `Translator` that keeps passes, whose every
answer must equal a fresh translation. Leaves out how Namespaces reach the cache (sources).
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from coxswain_controller.translate import Inputs, Options, TranslateResult, translate
from coxswain_controller.translate.conditions import Reason
from coxswain_controller.translate.goldens import TESTDATA
from coxswain_controller.translate.incremental import Translator
from coxswain_controller.translate.incremental_test import Tables, _same, _tables
from coxswain_controller.translate.result import GatewayVerdict, RouteVerdict

CASE = TESTDATA / "namespace-selector-metadata-name-and-labels"
SHOP = ("", "shop")


def _route(result: TranslateResult, name: str) -> tuple[bool, str]:
    """The route's Accepted condition on its one parent: (status, reason)."""
    verdict = next(v for v in result.verdicts if isinstance(v, RouteVerdict) and v.ref.name == name)
    (parent,) = verdict.parents
    accepted = next(c for c in parent.conditions if c.type == "Accepted")
    return accepted.status, accepted.reason


def _attached(result: TranslateResult) -> dict[str, int]:
    gateway = next(v for v in result.verdicts if isinstance(v, GatewayVerdict))
    return {listener.name: listener.attached_routes for listener in gateway.listeners}


def _relabelled(tables: Tables, labels: dict[str, str]) -> Tables:
    namespaces = dict(tables["Namespace"])
    shop = copy.deepcopy(namespaces[SHOP])
    shop["metadata"]["labels"] = labels
    namespaces[SHOP] = shop
    return {**tables, "Namespace": namespaces}


def _by_team(tables: Tables, selector: dict[str, Any]) -> Tables:
    """The case with listener by-team selecting namespaces by `selector`."""
    gateways = dict(tables["Gateway"])
    key = ("infra", "gw")
    gateway = copy.deepcopy(gateways[key])
    gateway["spec"]["listeners"][1]["allowedRoutes"]["namespaces"]["selector"] = selector
    gateways[key] = gateway
    return {**tables, "Gateway": gateways}


ACCEPTED = (True, Reason.ACCEPTED)
REFUSED = (False, Reason.NOT_ALLOWED_BY_LISTENERS)
NAME = "kubernetes.io/metadata.name"


@pytest.mark.parametrize(
    ("selector", "shop", "blog"),
    [
        pytest.param({"matchLabels": {NAME: "shop"}}, ACCEPTED, REFUSED, id="metadata-name-label"),
        pytest.param({"matchLabels": {NAME: "blog"}}, REFUSED, ACCEPTED, id="another-name"),
        pytest.param(
            {"matchLabels": {NAME: "shop", "team": "ops"}}, REFUSED, REFUSED, id="all-labels"
        ),
        pytest.param({}, ACCEPTED, ACCEPTED, id="empty-selector-selects-every-namespace"),
        pytest.param(
            {"matchExpressions": [{"key": "team", "operator": "NotIn", "values": ["web"]}]},
            REFUSED,
            ACCEPTED,
            id="not-in",
        ),
        pytest.param(
            {"matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["x"]}]},
            ACCEPTED,
            ACCEPTED,
            id="not-in-admits-an-absent-label",
        ),
        pytest.param(
            {"matchExpressions": [{"key": "team", "operator": "In", "values": ["writers"]}]},
            REFUSED,
            ACCEPTED,
            id="in",
        ),
        pytest.param(
            {"matchExpressions": [{"key": "team", "operator": "Exists"}]},
            ACCEPTED,
            ACCEPTED,
            id="exists",
        ),
        pytest.param(
            {"matchExpressions": [{"key": "team", "operator": "DoesNotExist"}]},
            REFUSED,
            REFUSED,
            id="does-not-exist",
        ),
        pytest.param(
            {"matchExpressions": [{"key": "team", "operator": "In", "values": []}]},
            REFUSED,
            REFUSED,
            id="in-without-values-is-invalid",
        ),
        pytest.param(
            {"matchExpressions": [{"key": "team", "operator": "Exists", "values": ["web"]}]},
            REFUSED,
            REFUSED,
            id="exists-with-values-is-invalid",
        ),
        pytest.param(
            {"matchExpressions": [{"key": "team", "operator": "Equals", "values": ["web"]}]},
            REFUSED,
            REFUSED,
            id="unknown-operator-is-invalid",
        ),
    ],
)
def test_the_selector_decides_which_namespaces_routes_attach(
    selector: dict[str, Any], shop: tuple[bool, str], blog: tuple[bool, str]
) -> None:
    # store (shop) names listener by-team; posts (blog) names the Gateway, so by-team alone
    # can admit it (by-name selects shop only).
    result = translate(Inputs(_by_team(_tables(CASE), selector)), Options())
    assert (_route(result, "store"), _route(result, "posts")) == (shop, blog)
    assert _attached(result)["by-team"] == [shop, blog].count(ACCEPTED)
    assert _route(result, "front") == ACCEPTED  # by-name, untouched


def test_a_namespace_losing_its_label_detaches_its_route_and_regaining_it_reattaches() -> None:
    tables = _tables(CASE)
    translator = Translator(Options())

    def step(tables: Tables) -> TranslateResult:
        inputs = Inputs(tables)
        result = translator.translate(inputs)
        _same(result, translate(inputs, Options()))
        return result

    first = step(tables)
    assert (_route(first, "store"), _attached(first)) == (ACCEPTED, {"by-name": 1, "by-team": 1})

    moved = step(_relabelled(tables, {NAME: "shop", "team": "ops"}))
    assert _route(moved, "store") == REFUSED
    assert _attached(moved) == {"by-name": 1, "by-team": 0}
    assert _route(moved, "posts") == REFUSED

    # A cluster whose API server sets no name label (before Kubernetes 1.22): by-name lets go.
    unnamed = step(_relabelled(tables, {"team": "web"}))
    assert (_route(unnamed, "front"), _route(unnamed, "store")) == (REFUSED, ACCEPTED)
    assert _attached(unnamed) == {"by-name": 0, "by-team": 1}

    back = step(_relabelled(tables, {NAME: "shop", "team": "web"}))
    assert (_route(back, "store"), _route(back, "front")) == (ACCEPTED, ACCEPTED)
    assert _attached(back) == {"by-name": 1, "by-team": 1}
    assert translator.patched == 0, "a Namespace change runs every stage"
