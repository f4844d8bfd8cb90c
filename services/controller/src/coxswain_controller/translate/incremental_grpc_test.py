"""GRPCRoutes in a patched pass: `Translator` answers exactly what `translate()` answers.

An HTTPRoute and a GRPCRoute contending for one listener decide each other's acceptance, so a
change to either can flip a route that did not change. Covered: every GRPCRoute of every golden
case removed, restored and edited one at a time (each a patch, not a full pass), and random
sequences of HTTPRoute and GRPCRoute puts and deletes on contended listeners, with Service
changes between, each step compared with a fresh translation. incremental_test covers the rest.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from coxswain_controller.translate import Inputs, Options, translate
from coxswain_controller.translate.goldens import TESTDATA, case_options
from coxswain_controller.translate.incremental import Translator

Tables = dict[str, dict[tuple[str, str], Any]]


def _tables(case: Path) -> Tables:
    with (case / "input.yaml").open() as handle:
        objects = [d for d in yaml.safe_load_all(handle) if isinstance(d, dict)]
    tables: Tables = {}
    for obj in objects:
        meta = obj["metadata"]
        tables.setdefault(obj["kind"], {})[(meta.get("namespace", ""), meta["name"])] = obj
    return tables


CASES = [
    p
    for p in sorted(TESTDATA.iterdir())
    if (p / "input.yaml").exists() and _tables(p).get("GRPCRoute")
]


def _step(translator: Translator, tables: Tables, options: Options | None = None) -> None:
    inputs = Inputs(tables)
    patched, fresh = translator.translate(inputs), translate(inputs, options)
    assert patched.snapshots == fresh.snapshots
    assert patched.verdicts == fresh.verdicts
    assert patched.events == fresh.events


def _edited(route: dict[str, Any]) -> dict[str, Any]:
    edited = copy.deepcopy(route)
    edited.setdefault("spec", {})["hostnames"] = ["edited.example.com"]
    edited["spec"]["rules"] = [{"backendRefs": [{"name": "missing", "port": 8080}]}]
    edited["metadata"]["generation"] = edited["metadata"].get("generation", 1) + 1
    return edited


def test_there_are_golden_cases_with_grpcroutes() -> None:
    assert len(CASES) >= 5


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_each_grpcroute_removed_restored_and_edited_patches_to_a_fresh_result(case: Path) -> None:
    tables = _tables(case)
    routes = tables["GRPCRoute"]
    options = case_options(case)
    translator = Translator(options)
    _step(translator, tables, options)
    for key, route in routes.items():
        without = {k: v for k, v in routes.items() if k != key}
        _step(translator, {**tables, "GRPCRoute": without}, options)
        _step(translator, {**tables, "GRPCRoute": dict(routes)}, options)
        _step(translator, {**tables, "GRPCRoute": {**routes, key: _edited(route)}}, options)
        _step(translator, {**tables, "GRPCRoute": dict(routes)}, options)
    assert translator.patched == 4 * len(routes)


# A generated cluster: one Gateway whose listeners overlap in hostnames, routes of both kinds
# drawn from a small space of listeners, hostnames and ages, so that they contend, win, lose and
# cascade (a route refused by an older one no longer refuses a newer one) in every combination.
HOSTS = ("a.example.com", "*.example.com", "other.org")


def _world() -> Tables:
    controller = Options().gateway_controller
    listeners = [
        {"name": "any", "port": 80, "protocol": "HTTP"},
        {"name": "wild", "port": 8080, "protocol": "HTTP", "hostname": "*.example.com"},
        {"name": "a", "port": 8080, "protocol": "HTTP", "hostname": "a.example.com"},
    ]
    return {
        "GatewayClass": {("", "c"): {"kind": "GatewayClass", "metadata": {"name": "c"},
                                      "spec": {"controllerName": controller}}},
        "Namespace": {("", "n"): {"kind": "Namespace", "metadata": {"name": "n"}}},
        "Gateway": {("n", "g"): {"kind": "Gateway",
                                 "metadata": {"name": "g", "namespace": "n", "generation": 1},
                                 "spec": {"gatewayClassName": "c", "listeners": listeners}}},
        "Service": {("n", "svc"): _service(80)},
        "HTTPRoute": {},
        "GRPCRoute": {},
    }  # fmt: skip


def _service(port: int) -> dict[str, Any]:
    return {
        "kind": "Service",
        "metadata": {"name": "svc", "namespace": "n"},
        "spec": {"ports": [{"name": "p", "port": port, "targetPort": 8080}]},
    }


route_specs = st.fixed_dictionaries(
    {
        "kind": st.sampled_from(("HTTPRoute", "GRPCRoute")),
        "name": st.sampled_from(("r1", "r2", "r3")),
        "sections": st.lists(st.sampled_from((None, "any", "wild", "a")), min_size=1, max_size=2),
        "hostnames": st.lists(st.sampled_from(HOSTS), max_size=2, unique=True),
        "created": st.integers(0, 3),
        "refused": st.booleans(),
    }
)


def _route(spec: dict[str, Any], generation: int) -> dict[str, Any]:
    parents = [{"name": "g", **({"sectionName": s} if s else {})} for s in spec["sections"]]
    filters = (
        [{"type": "ExtensionRef", "extensionRef": {"group": "x", "kind": "Y", "name": "z"}}]
        if spec["refused"]
        else []
    )
    return {
        "kind": spec["kind"],
        "metadata": {
            "name": spec["name"],
            "namespace": "n",
            "generation": generation,
            "creationTimestamp": f"2026-01-0{spec['created'] + 1}T00:00:00Z",
        },
        "spec": {
            "parentRefs": parents,
            "hostnames": spec["hostnames"],
            "rules": [{"filters": filters, "backendRefs": [{"name": "svc", "port": 80}]}],
        },
    }


steps = st.lists(
    st.one_of(
        st.tuples(st.just("put"), route_specs),
        st.tuples(st.just("delete"), route_specs),
        st.tuples(st.just("service"), st.sampled_from(("drop", 80, 81))),
    ),
    min_size=1,
    max_size=20,
)


@settings(max_examples=100, deadline=None)
@given(steps)
def test_random_edits_of_both_kinds_patch_to_fresh_results(
    sequence: list[tuple[str, Any]],
) -> None:
    tables = _world()
    translator = Translator(Options())
    _step(translator, tables)
    for generation, (action, arg) in enumerate(sequence, start=2):
        if action == "service":
            services = {} if arg == "drop" else {("n", "svc"): _service(arg)}
            tables = {**tables, "Service": services}
        else:
            kind, key = arg["kind"], ("n", arg["name"])
            routes = dict(tables[kind])
            if action == "put":
                routes[key] = _route(arg, generation)
            else:
                routes.pop(key, None)
            tables = {**tables, kind: routes}
        _step(translator, tables)
    assert translator.patched == len(sequence)  # routes and Services: every step a patch
