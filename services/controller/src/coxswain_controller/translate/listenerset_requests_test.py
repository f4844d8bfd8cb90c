"""ListenerSets end to end through translation and the real matcher.

Covers what the `listenerset-*` golden cases show as data, asked as requests: each case is
translated, the shared pool's snapshot compiled by `coxswain_routing.compile_router`, and the
requests of the upstream conformance tests sent to the Gateway's port — ListenerSetHTTPRouting's
whole table (a Gateway parentRef reaches the Gateway's own listeners only, a ListenerSet one that
set's, a sectionName one listener), ListenerSetDefaultNotAllowed's and
ListenerSetAllowedNamespaceSame's (a refused set's hostnames answer 404),
ListenerSetDualParentRefIndependence's, and the cross-namespace hostname conflict's (the older
set keeps the name). Also: a ListenerSet's listeners bind on the Gateway's own bind port,
`explain` names the set's listener that claimed a request, and a set that cannot be read is
Invalid while its Gateway serves on. The bytes on the wire are
tests/e2e/listener_features_test.py's.
"""

from __future__ import annotations

import pytest
import yaml

from coxswain_controller.translate import Inputs, translate
from coxswain_controller.translate.goldens import TESTDATA
from coxswain_controller.translate.result import ListenerSetVerdict, ObjectRef, TranslateResult
from coxswain_controller.translate.scopes import SHARED_POOL
from coxswain_routing import Candidate, GatewayListeners, Router, compile_router, explain

GW = "gateway-conformance-infra"


def translated(case: str) -> TranslateResult:
    docs = yaml.safe_load_all((TESTDATA / case / "input.yaml").read_text())
    return translate(Inputs.from_objects([d for d in docs if isinstance(d, dict)]))


def port_of(result: TranslateResult, gateway: str) -> tuple[Router, int]:
    resources = result.snapshots[SHARED_POOL]
    listeners = next(r for r in resources if isinstance(r, GatewayListeners) and r.name == gateway)
    ports = {x.bind_port for x in listeners.listeners if x.port == 80}
    assert len(ports) == 1, "a ListenerSet's listeners share the Gateway's bind port"
    return compile_router(resources), ports.pop()


def backend(router: Router, port: int, host: str, path: str) -> str | None:
    """The Service answering, or None for a 404."""
    outcome = router.match(port, host, "GET", path)
    if not isinstance(outcome, Candidate):
        assert outcome.status == 404, outcome
        return None
    (chosen,) = outcome.rule.backends
    return chosen.endpoints.split("/")[2]


HOSTS = {
    "gateway": ("gateway-listener-1.com", "gateway-listener-2.com"),
    "set-1": (
        "listener-set-http-routing-1-listener-1.com",
        "listener-set-http-routing-1-listener-2.com",
    ),
    "set-2": (
        "listener-set-http-routing-2-listener-1.com",
        "listener-set-http-routing-2-listener-2.com",
    ),
}
ALL = [h for hosts in HOSTS.values() for h in hosts]
# ListenerSetHTTPRouting: each path, the hosts it answers on and the backend answering.
ROUTING = [
    ("/route", ALL, "infra-backend-v1"),
    ("/gateway-route", HOSTS["gateway"], "infra-backend-v2"),
    ("/gateway-section-route", ("gateway-listener-1.com",), "infra-backend-v3"),
    ("/listener-set-http-routing-1-route", HOSTS["set-1"], "infra-backend-v2"),
    (
        "/listener-set-http-routing-1-section-route",
        ("listener-set-http-routing-1-listener-1.com",),
        "infra-backend-v3",
    ),
    ("/listener-set-http-routing-2-route", HOSTS["set-2"], "infra-backend-v2"),
]


@pytest.mark.parametrize(("path", "hosts", "service"), ROUTING, ids=[p for p, _, _ in ROUTING])
def test_listenerset_http_routing(path: str, hosts: tuple[str, ...], service: str) -> None:
    router, port = port_of(
        translated("listenerset-http-routing"), "gateway-with-listener-sets-http-routing"
    )
    for host in ALL:
        expected = service if host in hosts else None
        assert backend(router, port, host, path) == expected, host


def test_explain_names_the_listenersets_listener() -> None:
    router, port = port_of(
        translated("listenerset-http-routing"), "gateway-with-listener-sets-http-routing"
    )
    host = "listener-set-http-routing-2-listener-1.com"
    result = explain(router, port, host, "GET", "/route")
    assert (
        result.listener
        == f"{GW}/listener-set-http-routing-2/listener-set-http-routing-2-listener-1"
    )


@pytest.mark.parametrize(
    ("case", "gateway", "host", "answered"),
    [
        pytest.param(
            "listenerset-default-not-allowed",
            "gateway-default-does-not-allow-listenerset",
            "gateway-listener-1.com",
            True,
            id="default-gateway-listener",
        ),
        pytest.param(
            "listenerset-default-not-allowed",
            "gateway-default-does-not-allow-listenerset",
            "listener-set-1-listener-1.com",
            False,
            id="default-refused-set",
        ),
        pytest.param(
            "listenerset-allowed-namespace-same",
            "gateway-with-listenerset-http-listener",
            "listener-set-1-listener-2.com",
            True,
            id="same-admitted-set",
        ),
        pytest.param(
            "listenerset-allowed-namespace-same",
            "gateway-with-listenerset-http-listener",
            "listener-set-2-listener-1.com",
            False,
            id="same-set-of-another-namespace",
        ),
    ],
)
def test_only_admitted_listenersets_are_served(
    case: str, gateway: str, host: str, answered: bool
) -> None:
    router, port = port_of(translated(case), gateway)
    assert (backend(router, port, host, "/route") is not None) is answered


def test_dual_parentrefs_are_weighed_apart() -> None:
    router, port = port_of(
        translated("listenerset-dual-parentref-independence"), "gateway-dual-parentref"
    )
    assert backend(router, port, "gw-dual.com", "/dualboth") == "infra-backend-v1"
    assert backend(router, port, "ls-dual.com", "/dualboth") == "infra-backend-v1"
    assert backend(router, port, "ls-dual.com", "/dualone") == "infra-backend-v2"
    assert backend(router, port, "gw-dual.com", "/dualone") is None


def test_the_older_listenerset_keeps_a_conflicting_hostname() -> None:
    router, port = port_of(
        translated("listenerset-hostname-conflict"), "gateway-ls-cross-ns-conflict"
    )
    assert backend(router, port, "cross-ns-conflict.com", "/route-a") == "infra-backend-v1"
    assert backend(router, port, "cross-ns-conflict.com", "/route-b") is None
    assert backend(router, port, "unique-b.com", "/route-b") == "infra-backend-v2"


def test_a_listenerset_that_cannot_be_read_costs_only_itself() -> None:
    # A port that is no number: the set is Accepted: False, Invalid; the Gateway it names (of
    # another team, maybe) and its routes are served as before.
    case = TESTDATA / "listenerset-allowed-namespace-same" / "input.yaml"
    docs = [d for d in yaml.safe_load_all(case.read_text()) if isinstance(d, dict)]
    (broken,) = [d for d in docs if d["metadata"]["name"] == "listenerset-with-http-listener"]
    broken["spec"]["listeners"][0]["port"] = "eighty"
    result = translate(Inputs.from_objects(docs))
    verdict = next(
        v
        for v in result.verdicts
        if v.ref == ObjectRef("ListenerSet", GW, "listenerset-with-http-listener")
    )
    assert isinstance(verdict, ListenerSetVerdict)
    assert [(c.type.value, c.status, c.reason.value) for c in verdict.conditions] == [
        ("Accepted", False, "Invalid"),
        ("Programmed", False, "Invalid"),
    ]
    router, port = port_of(result, "gateway-with-listenerset-http-listener")
    assert backend(router, port, "gateway-listener-1.com", "/route") == "infra-backend-v1"
    assert backend(router, port, "listener-set-1-listener-1.com", "/route") is None
