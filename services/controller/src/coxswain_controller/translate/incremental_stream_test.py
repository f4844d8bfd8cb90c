"""Stream routes through the incremental Translator: it still answers what `translate()` does.

Stream routes are never patched: a change to a TCPRoute, TLSRoute or UDPRoute, or to a Service
one names, runs every stage. Endpoint churn is patched (a stream route's endpoint sets, UDP ones
included, follow their slices), and so is an HTTPRoute edit beside stream routes, which leaves
them as they were. Leaves out what the stream routes mean (the golden cases).
"""

from __future__ import annotations

import copy
from typing import Any

from coxswain_controller.translate import Inputs, Options, translate
from coxswain_controller.translate.goldens import TESTDATA
from coxswain_controller.translate.incremental import Translator
from coxswain_controller.translate.incremental_test import _same, _tables
from coxswain_routing import EndpointSet

CASE = TESTDATA / "streamroutes-backends-by-transport"


def _step(translator: Translator, tables: dict[str, Any]) -> None:
    inputs = Inputs(tables)
    _same(translator.translate(inputs), translate(inputs, Options()))


def _with_endpoint(slice_: dict[str, Any], address: str) -> dict[str, Any]:
    grown = copy.deepcopy(slice_)
    grown["endpoints"].append({"addresses": [address], "conditions": {"ready": True}})
    return grown


def test_endpoint_churn_behind_stream_routes_patches() -> None:
    tables = _tables(CASE)
    translator = Translator(Options())
    _step(translator, tables)
    slices = dict(tables["EndpointSlice"])
    key = ("shop", "dns-a")  # the slice behind both dns ports, TCP and UDP
    slices[key] = _with_endpoint(slices[key], "10.0.0.9")
    tables = {**tables, "EndpointSlice": slices}
    _step(translator, tables)
    assert translator.patched == 1
    (shared,) = translator.translate(Inputs(tables)).snapshots.values()
    (udp,) = [r for r in shared if r.key == "endpoints/shop/dns/53/udp"]
    assert isinstance(udp, EndpointSet)
    assert ("10.0.0.9", 5354) in {(e.address, e.port) for e in udp.endpoints}


def test_a_service_a_stream_route_names_translates_afresh() -> None:
    tables = _tables(CASE)
    translator = Translator(Options())
    _step(translator, tables)
    services = dict(tables["Service"])
    udp_only = copy.deepcopy(services[("shop", "udp-only")])
    udp_only["spec"]["ports"][0]["protocol"] = "TCP"  # now the UDPRoute's reference misses
    services[("shop", "udp-only")] = udp_only
    _step(translator, {**tables, "Service": services})
    assert translator.patched == 0


def test_a_stream_route_edit_translates_afresh_and_an_httproute_edit_beside_it_patches() -> None:
    tables = _tables(CASE)
    translator = Translator(Options())
    _step(translator, tables)
    routes = dict(tables["TCPRoute"])
    edited = copy.deepcopy(routes[("shop", "tcp-split")])
    edited["spec"]["rules"][0]["backendRefs"] = edited["spec"]["rules"][0]["backendRefs"][:1]
    edited["metadata"]["generation"] = 2
    routes[("shop", "tcp-split")] = edited
    tables = {**tables, "TCPRoute": routes}
    _step(translator, tables)
    assert translator.patched == 0
    http = {
        ("shop", "web"): {
            "kind": "HTTPRoute",
            "metadata": {"name": "web", "namespace": "shop", "generation": 1},
            "spec": {"parentRefs": [{"name": "gw"}], "rules": [{}]},
        }
    }
    _step(translator, {**tables, "HTTPRoute": http})
    assert translator.patched == 1
