"""Translation with a memo is translation without one, only faster.

Covers every golden case translated fresh, then twice through one memo (the second pass served
from it), and an edit: one route replaced, or one Service removed, recompiles exactly what
depends on it and gives the result a fresh translation gives.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from coxswain_controller.translate import Inputs, Options, translate
from coxswain_controller.translate.goldens import TESTDATA
from coxswain_controller.translate.render import render
from coxswain_controller.translate.routes.memo import RouteMemo

CASES = sorted(p for p in TESTDATA.iterdir() if (p / "input.yaml").exists())
CONTROLLER = Options().gateway_controller


def _objects(case: Path) -> list[dict[str, Any]]:
    with (case / "input.yaml").open() as handle:
        return [d for d in yaml.safe_load_all(handle) if isinstance(d, dict)]


def _render(inputs: Inputs, memo: RouteMemo | None = None) -> dict[str, Any]:
    return render(translate(inputs, memo=memo), CONTROLLER)


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_a_memo_changes_nothing_but_the_work(case: Path) -> None:
    inputs = Inputs.from_objects(_objects(case))
    memo = RouteMemo()
    fresh = _render(inputs)
    assert _render(inputs, memo) == fresh
    compiled = len(memo)  # the routes naming a Gateway of ours
    assert _render(inputs, memo) == fresh
    assert memo.hits == compiled


def _by_kind(objects: list[dict[str, Any]]) -> dict[str, dict[tuple[str, str], Any]]:
    tables: dict[str, dict[tuple[str, str], Any]] = {}
    for obj in objects:
        meta = obj["metadata"]
        tables.setdefault(obj["kind"], {})[(meta.get("namespace", ""), meta["name"])] = obj
    return tables


def test_an_edited_route_is_recompiled_alone() -> None:
    tables = _by_kind(_objects(TESTDATA / "backend-references"))
    memo = RouteMemo()
    _render(Inputs(tables), memo)
    routes = dict(tables["HTTPRoute"])
    edited = dict(routes[("shop", "h2c")])
    edited["spec"] = {**edited["spec"], "rules": [{"backendRefs": [{"name": "web", "port": 80}]}]}
    routes[("shop", "h2c")] = edited
    changed = {**tables, "HTTPRoute": routes}
    hits = memo.hits
    assert _render(Inputs(changed), memo) == _render(Inputs(changed))
    assert memo.hits - hits == len(routes) - 1


def test_a_changed_service_recompiles_only_the_routes_naming_it() -> None:
    tables = _by_kind(_objects(TESTDATA / "backend-references"))
    memo = RouteMemo()
    _render(Inputs(tables), memo)
    services = dict(tables["Service"])
    del services[("shop", "named")]
    changed = {**tables, "Service": services}
    naming = [r for r in tables["HTTPRoute"].values() if "named" in str(r["spec"].get("rules"))]
    hits = memo.hits
    assert _render(Inputs(changed), memo) == _render(Inputs(changed))
    assert naming and memo.hits - hits == len(memo) - len(naming)
