"""Objects translation cannot read cost only themselves: the pass goes on without them.

Covers a route whose rules are not a list (refused with a Warning Event naming it; its
neighbours served as before), Gateways, grants, slices and IngressClasses of the wrong shape
(everything else served exactly as before), and a generated fuzz over every golden case: random
fields set to values of the wrong type or shape; translation never raises, and the incremental
path still equals a fresh translation.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from coxswain_controller.translate import Inputs, translate
from coxswain_controller.translate.goldens import TESTDATA, case_options
from coxswain_controller.translate.incremental import Translator

CASES = sorted(p for p in TESTDATA.iterdir() if (p / "input.yaml").exists())


def _objects(case: Path) -> list[dict[str, Any]]:
    with (case / "input.yaml").open() as handle:
        return [d for d in yaml.safe_load_all(handle) if isinstance(d, dict)]


def test_a_route_that_cannot_be_read_is_reported_and_others_are_served() -> None:
    objects = _objects(TESTDATA / "backend-references")
    healthy = translate(Inputs.from_objects(objects))
    routes = [o for o in objects if o["kind"] == "HTTPRoute"]
    broken = routes[0]
    broken["spec"]["rules"] = 5
    result = translate(Inputs.from_objects(objects))
    ref = f"HTTPRoute {broken['metadata']['namespace']}/{broken['metadata']['name']}"
    rejected = [e for e in result.events if str(e.ref) == ref and e.reason == "Rejected"]
    assert rejected and "could not be read" in rejected[0].message
    assert all(str(v.ref) != ref for v in result.verdicts)  # no verdict about what was not read
    served_before = {str(v.ref) for v in healthy.verdicts} - {ref}
    assert served_before <= {str(v.ref) for v in result.verdicts}


WRONG = [None, "", "x", -1, 70000, 3.5, True, [], {}, ["a"], {"a": 1}, "*", "a..b", 2**40]


def _paths(obj: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = []
    items = (
        obj.items() if isinstance(obj, dict) else enumerate(obj) if isinstance(obj, list) else ()
    )
    for key, value in items:
        path = (*prefix, key)
        if path not in {("kind",), ("metadata", "name"), ("metadata", "namespace")}:
            found.append(path)
        found += _paths(value, path)
    return found


def _set(obj: Any, path: tuple[Any, ...], value: Any) -> None:
    for key in path[:-1]:
        obj = obj[key]
    obj[path[-1]] = value


@settings(max_examples=150, deadline=None)
@given(case=st.sampled_from(CASES), data=st.data())
def test_wrong_shapes_anywhere_never_fail_a_pass(case: Path, data: st.DataObject) -> None:
    objects = _objects(case)
    options = case_options(case)
    translator = Translator(options)
    translator.translate(Inputs.from_objects(objects))
    mutated = copy.deepcopy(objects)
    for _ in range(data.draw(st.integers(1, 3))):
        target = data.draw(st.sampled_from(mutated))
        paths = _paths(target)
        if paths:
            _set(
                target,
                data.draw(st.sampled_from(paths)),
                copy.deepcopy(data.draw(st.sampled_from(WRONG))),
            )
    inputs = Inputs.from_objects(mutated)
    fresh = translate(inputs, options)  # must not raise
    patched = translator.translate(inputs)
    assert (patched.snapshots, patched.verdicts, patched.events) == (
        fresh.snapshots,
        fresh.verdicts,
        fresh.events,
    )


@pytest.mark.parametrize("kind", ["Gateway", "ReferenceGrant", "EndpointSlice", "IngressClass"])
def test_other_kinds_that_cannot_be_read_cost_only_themselves(kind: str) -> None:
    objects = _objects(TESTDATA / "backend-references") + _objects(
        TESTDATA / "ingress-class-selection"
    )
    before = translate(Inputs.from_objects(objects))
    objects.append({"kind": kind, "metadata": {"name": "bad", "namespace": "shop"}, "spec": 7})
    objects.append(
        {"kind": kind, "metadata": {"name": "worse", "namespace": "shop"}, "endpoints": 7}
    )
    after = translate(Inputs.from_objects(objects))
    assert after.snapshots == before.snapshots  # everything else is served exactly as before
    assert all(v in after.verdicts for v in before.verdicts)
