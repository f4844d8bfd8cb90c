"""A patched pass is a fresh pass: `Translator` answers exactly what `translate()` answers.

Every golden case has each of its routes removed, put back and edited one at a time, and a
generated cluster goes through random sequences of route edits, additions and deletions mixed
with changes to other kinds (which rebuild). After every step the Translator's result must equal
a fresh translation of the same inputs: snapshots, verdicts (attachedRoutes included), Events.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from coxswain_controller.translate import Inputs, Options, TranslateResult, translate
from coxswain_controller.translate.conditions import Reason
from coxswain_controller.translate.goldens import TESTDATA, case_options
from coxswain_controller.translate.incremental import Translator
from coxswain_controller.translate.result import GatewayVerdict, RouteVerdict

CASES = sorted(p for p in TESTDATA.iterdir() if (p / "input.yaml").exists())
Tables = dict[str, dict[tuple[str, str], Any]]


def _tables(case: Path) -> Tables:
    with (case / "input.yaml").open() as handle:
        objects = [d for d in yaml.safe_load_all(handle) if isinstance(d, dict)]
    tables: Tables = {}
    for obj in objects:
        meta = obj["metadata"]
        tables.setdefault(obj["kind"], {})[(meta.get("namespace", ""), meta["name"])] = obj
    return tables


def _same(a: TranslateResult, b: TranslateResult) -> None:
    assert a.snapshots == b.snapshots
    assert a.verdicts == b.verdicts
    assert a.events == b.events
    assert a.gateway_identities == b.gateway_identities
    assert a.provision == b.provision


def _step(translator: Translator, tables: Tables, options: Options | None = None) -> None:
    inputs = Inputs(tables)
    _same(translator.translate(inputs), translate(inputs, options))


def _with_routes(tables: Tables, routes: dict[tuple[str, str], Any]) -> Tables:
    return {**tables, "HTTPRoute": routes}


def _edited(route: dict[str, Any]) -> dict[str, Any]:
    edited = copy.deepcopy(route)
    spec = edited.setdefault("spec", {})
    spec["hostnames"] = ["edited.example.com"]
    spec["rules"] = [{"backendRefs": [{"name": "missing", "port": 80}]}]
    edited["metadata"]["generation"] = edited["metadata"].get("generation", 1) + 1
    return edited


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_each_route_removed_restored_and_edited_patches_to_a_fresh_result(case: Path) -> None:
    tables = _tables(case)
    routes = tables.get("HTTPRoute", {})
    options = case_options(case)
    translator = Translator(options)
    _step(translator, tables, options)
    for key, route in routes.items():
        without = {k: v for k, v in routes.items() if k != key}
        _step(translator, _with_routes(tables, without), options)
        _step(translator, _with_routes(tables, dict(routes)), options)
        _step(translator, _with_routes(tables, {**routes, key: _edited(route)}), options)
        _step(translator, _with_routes(tables, dict(routes)), options)
    assert translator.patched == 4 * len(routes)


def test_a_change_to_another_kind_translates_afresh_then_patching_resumes() -> None:
    tables = _tables(TESTDATA / "backend-references")
    translator = Translator(Options())
    _step(translator, tables)
    grants = {**tables.get("ReferenceGrant", {})}
    grants.pop(next(iter(grants)), None)
    tables = {**tables, "ReferenceGrant": grants}
    _step(translator, tables)
    assert translator.patched == 0  # the grants changed: every stage ran again
    routes = dict(tables["HTTPRoute"])
    key = next(iter(routes))
    routes[key] = _edited(routes[key])
    _step(translator, _with_routes(tables, routes))
    assert translator.patched == 1
    slices = {k: v for k, v in tables["EndpointSlice"].items() if k[1] != "web-1"}
    _step(translator, {**_with_routes(tables, routes), "EndpointSlice": slices})
    assert translator.patched == 2  # endpoint churn patches too
    services = dict(tables["Service"])
    services.pop(next(iter(services)))
    _step(
        translator, {**_with_routes(tables, routes), "EndpointSlice": slices, "Service": services}
    )
    assert translator.patched == 3  # and so does a Service no Ingress names


def test_a_route_edited_to_carry_a_crlf_header_value_stops_being_served() -> None:
    # Issue 12: a value that would split a header on the wire refuses the route on the patch
    # that sees it, exactly as a fresh pass does, and the route is served again once fixed.
    tables = _tables(TESTDATA / "filters-malformed-values")
    routes = tables["HTTPRoute"]
    key = ("shop", "valid")
    translator = Translator(Options())
    _step(translator, tables)
    injected = copy.deepcopy(routes[key])
    header = injected["spec"]["rules"][0]["filters"][0]["requestHeaderModifier"]["set"][0]
    header["value"] = "prod\r\nX-Injected: yes"
    edited = _with_routes(tables, {**routes, key: injected})
    result = translator.translate(Inputs(edited))
    _same(result, translate(Inputs(edited)))
    without = {k: v for k, v in routes.items() if k != key}
    assert result.snapshots == translate(Inputs(_with_routes(tables, without))).snapshots
    verdict = next(
        v for v in result.verdicts if isinstance(v, RouteVerdict) and v.ref.name == "valid"
    )
    accepted = verdict.parents[0].conditions[0]
    assert (accepted.status, accepted.reason) == (False, Reason.UNSUPPORTED_VALUE)
    assert accepted.message == (
        "rules[0].filters[0].requestHeaderModifier.set[0].value: contains CR, LF or NUL"
    )
    _step(translator, _with_routes(tables, dict(routes)))
    assert translator.patched == 2


def test_a_service_an_ingress_names_translates_afresh() -> None:
    tables = _tables(TESTDATA / "ingress-paths-tls-and-default-backend")
    translator = Translator(Options())
    _step(translator, tables)
    services = dict(tables["Service"])
    services.pop(next(iter(services)))
    _step(translator, {**tables, "Service": services})
    assert translator.patched == 0


# A generated cluster: two Gateways with listeners of differing hostnames and namespace policies,
# routes drawn from a small space of parentRefs, hostnames and backends, so that they attach,
# collide on hosts, fail to attach and fail to resolve in every combination.
NAMESPACES = ("a", "b")
HOSTS = ("x.example.com", "y.example.com", "*.example.com", "other.org")
BACKENDS = ("web", "api", "missing")


def _world() -> Tables:
    controller = Options().gateway_controller
    tables: Tables = {
        "GatewayClass": {("", "c"): {"kind": "GatewayClass", "metadata": {"name": "c"},
                                      "spec": {"controllerName": controller}}},
        "Namespace": {("", ns): {"kind": "Namespace", "metadata": {"name": ns}}
                      for ns in NAMESPACES},
    }  # fmt: skip
    listeners_by_gateway = {
        "g1": [
            {"name": "any", "port": 80, "protocol": "HTTP"},
            {"name": "x", "port": 8080, "protocol": "HTTP", "hostname": "x.example.com"},
        ],
        "g2": [
            {"name": "wild", "port": 80, "protocol": "HTTP", "hostname": "*.example.com",
             "allowedRoutes": {"namespaces": {"from": "All"}}},
        ],
    }  # fmt: skip
    tables["Gateway"] = {
        ("a", g): {"kind": "Gateway", "metadata": {"name": g, "namespace": "a", "generation": 1},
                   "spec": {"gatewayClassName": "c", "listeners": listeners}}
        for g, listeners in listeners_by_gateway.items()
    }  # fmt: skip
    tables["Service"] = {}
    tables["EndpointSlice"] = {}
    for ns in NAMESPACES:
        for svc in BACKENDS[:2]:
            tables["Service"][(ns, svc)] = _service(ns, svc, 80)
            tables["EndpointSlice"][(ns, f"{svc}-1")] = _slice(ns, svc, 1, 0)
    tables["HTTPRoute"] = {}
    return tables


def _service(ns: str, svc: str, port: int) -> dict[str, Any]:
    return {
        "kind": "Service",
        "metadata": {"name": svc, "namespace": ns},
        "spec": {"ports": [{"name": "http", "port": port, "targetPort": 8080}]},
    }


def _slice(ns: str, svc: str, count: int, serial: int) -> dict[str, Any]:
    endpoints = [
        {
            "addresses": [f"10.{NAMESPACES.index(ns)}.{serial % 250}.{i}"],
            "conditions": {"ready": i % 2 == 0},
        }
        for i in range(count)
    ]
    return {
        "kind": "EndpointSlice",
        "metadata": {
            "name": f"{svc}-1",
            "namespace": ns,
            "labels": {"kubernetes.io/service-name": svc},
        },
        "ports": [{"name": "http", "port": 8080}],
        "endpoints": endpoints,
    }


route_specs = st.fixed_dictionaries(
    {
        "namespace": st.sampled_from(NAMESPACES),
        "name": st.sampled_from(("r1", "r2", "r3", "r4")),
        "parents": st.lists(
            st.tuples(st.sampled_from(("g1", "g2", "nope")), st.sampled_from((None, "x", "any"))),
            min_size=1,
            max_size=2,
        ),
        "hostnames": st.lists(st.sampled_from(HOSTS), max_size=2, unique=True),
        "path": st.sampled_from(("/", "/a", "/a/b")),
        "backend": st.sampled_from(BACKENDS),
        "backend_ns": st.sampled_from((None, *NAMESPACES)),
        "created": st.integers(0, 3),
    }
)


def _route(spec: dict[str, Any], generation: int) -> dict[str, Any]:
    parents = [
        {"name": g, "namespace": "a", **({"sectionName": s} if s else {})}
        for g, s in spec["parents"]
    ]
    return {
        "kind": "HTTPRoute",
        "metadata": {
            "name": spec["name"],
            "namespace": spec["namespace"],
            "generation": generation,
            "creationTimestamp": f"2026-01-0{spec['created'] + 1}T00:00:00Z",
        },
        "spec": {
            "parentRefs": parents,
            "hostnames": spec["hostnames"],
            "rules": [
                {
                    "matches": [{"path": {"type": "PathPrefix", "value": spec["path"]}}],
                    "backendRefs": [
                        {"name": spec["backend"], "port": 80}
                        | ({"namespace": spec["backend_ns"]} if spec["backend_ns"] else {})
                    ],
                }
            ],
        },
    }


steps = st.lists(
    st.one_of(
        st.tuples(st.just("put"), route_specs),
        st.tuples(st.just("delete"), route_specs),
        st.tuples(
            st.just("services"),
            st.tuples(
                st.sampled_from(NAMESPACES),
                st.sampled_from(BACKENDS),
                st.sampled_from(("drop", 80, 81)),
            ),
        ),
        st.tuples(st.just("grants"), st.sampled_from(NAMESPACES)),
        st.tuples(
            st.just("slices"),
            st.tuples(st.sampled_from(NAMESPACES), st.sampled_from(BACKENDS), st.integers(0, 3)),
        ),
    ),
    min_size=1,
    max_size=25,
)


@settings(max_examples=100, deadline=None)
@given(steps)
def test_random_edit_sequences_patch_to_fresh_results(sequence: list[tuple[str, Any]]) -> None:
    tables = _world()
    translator = Translator(Options())
    _step(translator, tables)
    for generation, (action, arg) in enumerate(sequence, start=2):
        if action == "services":
            # A Service removed, or (re)created with port 80 or 81: the routes naming it follow.
            ns, svc, port = arg
            services = {k: v for k, v in tables["Service"].items() if k != (ns, svc)}
            if port != "drop":
                services[(ns, svc)] = _service(ns, svc, port)
            tables = {**tables, "Service": services}
        elif action == "grants":
            # Another kind changed: a ReferenceGrant letting the other namespace in (a full pass).
            other = NAMESPACES[1 - NAMESPACES.index(arg)]
            grants = dict(tables.get("ReferenceGrant", {}))
            if (arg, "let-in") in grants:
                del grants[(arg, "let-in")]
            else:
                grants[(arg, "let-in")] = {
                    "kind": "ReferenceGrant",
                    "metadata": {"name": "let-in", "namespace": arg},
                    "spec": {
                        "from": [{"group": "gateway.networking.k8s.io", "kind": "HTTPRoute",
                                  "namespace": other}],
                        "to": [{"group": "", "kind": "Service"}],
                    },
                }  # fmt: skip
            tables = {**tables, "ReferenceGrant": grants}
        elif action == "slices":
            # Endpoint churn: a Service's slice gains, loses or replaces its endpoints.
            ns, svc, count = arg
            slices = dict(tables["EndpointSlice"])
            if count == 0:
                slices.pop((ns, f"{svc}-1"), None)
            else:
                slices[(ns, f"{svc}-1")] = _slice(ns, svc, count, generation)
            tables = {**tables, "EndpointSlice": slices}
        else:
            routes = dict(tables["HTTPRoute"])
            key = (arg["namespace"], arg["name"])
            if action == "put":
                routes[key] = _route(arg, generation)
            else:
                routes.pop(key, None)
            tables = _with_routes(tables, routes)
        _step(translator, tables)


def test_a_status_write_is_not_a_change_to_translate() -> None:
    tables = _tables(TESTDATA / "backend-references")
    translator = Translator(Options())
    _step(translator, tables)
    gateways = {
        key: {**gw, "status": {"conditions": [{"type": "Programmed", "status": "True"}]},
              "metadata": {**gw["metadata"], "resourceVersion": "99"}}
        for key, gw in tables["Gateway"].items()
    }  # fmt: skip
    routes = {
        key: {**route, "status": {"parents": []}} for key, route in tables["HTTPRoute"].items()
    }
    tables = {**tables, "Gateway": gateways, "HTTPRoute": routes}
    _step(translator, tables)
    assert translator.patched == 1  # our own status writes cost no pass of any stage
    key = next(iter(gateways))
    relabeled = {**gateways[key], "metadata": {**gateways[key]["metadata"], "generation": 7}}
    _step(translator, {**tables, "Gateway": {**gateways, key: relabeled}})
    assert translator.patched == 1  # a change translation can see runs every stage


def test_the_published_services_status_is_the_one_status_translation_reads() -> None:
    case = TESTDATA / "published-service-without-address"
    options = case_options(case)
    tables = _tables(case)
    translator = Translator(options)
    _step(translator, tables, options)
    key = ("coxswain-system", "coxswain-proxy")
    service = tables["Service"][key]
    assigned = {**service, "status": {"loadBalancer": {"ingress": [{"ip": "198.51.100.7"}]}}}
    tables = {**tables, "Service": {**tables["Service"], key: assigned}}
    result = translator.translate(Inputs(tables))
    _same(result, translate(Inputs(tables), options))
    gateway = next(v for v in result.verdicts if isinstance(v, GatewayVerdict))
    assert gateway.addresses == (("IPAddress", "198.51.100.7"),)
