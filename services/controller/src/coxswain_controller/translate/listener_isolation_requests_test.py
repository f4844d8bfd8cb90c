"""Listener isolation end to end through translation and the real matcher.

Covers what the `listener-isolation-*` golden cases show as data, asked as requests: each case's
manifests are translated, the shared pool's snapshot compiled by `coxswain_routing
.compile_router`, and every request of the upstream GatewayHTTPListenerIsolation conformance
test sent to the Gateway's port — a host reaches only the routes of the most specific listener
matching it, both when the hostnames are the listeners' alone and when the routes name
intersecting ones; `explain` names the listener that claimed each request. Also covers a route
whose every hostname another listener claims: Accepted and counted, served nowhere. The bytes on
the wire are tests/e2e/listener_features_test.py's.
"""

from __future__ import annotations

import pytest
import yaml

from coxswain_controller.translate import Inputs, translate
from coxswain_controller.translate.goldens import TESTDATA
from coxswain_controller.translate.result import GatewayVerdict, RouteVerdict, TranslateResult
from coxswain_controller.translate.scopes import SHARED_POOL
from coxswain_routing import (
    Candidate,
    GatewayListeners,
    HostRoutes,
    Router,
    compile_router,
    explain,
)

CASES = (
    "listener-isolation-hostnames-in-listeners",
    "listener-isolation-with-hostname-intersection",
)

# The upstream test's table: (host, path) -> the listener whose route answers, or None (404).
OWNERS = {
    "bar.com": "empty-hostname",
    "bar.example.com": "wildcard-example-com",
    "bar.foo.example.com": "wildcard-foo-example-com",
    "abc.foo.example.com": "abc-foo-example-com",
}
PATHS = (
    "/empty-hostname",
    "/wildcard-example-com",
    "/wildcard-foo-example-com",
    "/abc-foo-example-com",
)


def translated(case: str) -> TranslateResult:
    docs = yaml.safe_load_all((TESTDATA / case / "input.yaml").read_text())
    return translate(Inputs.from_objects([d for d in docs if isinstance(d, dict)]))


def gateway_port(result: TranslateResult) -> tuple[Router, int]:
    resources = result.snapshots[SHARED_POOL]
    listeners = next(r for r in resources if isinstance(r, GatewayListeners))
    return compile_router(resources), listeners.listeners[0].bind_port


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("host", sorted(OWNERS))
@pytest.mark.parametrize("path", PATHS)
def test_only_the_claiming_listeners_routes_answer(case: str, host: str, path: str) -> None:
    router, port = gateway_port(translated(case))
    outcome = router.match(port, host, "GET", path)
    if path == f"/{OWNERS[host]}":
        assert isinstance(outcome, Candidate), outcome
        assert outcome.rule.id.name.startswith(f"attaches-to-{OWNERS[host]}")
    else:
        assert not isinstance(outcome, Candidate), outcome.rule.id
        assert outcome.status == 404
    assert explain(router, port, host, "GET", path).listener == OWNERS[host]


def test_routes_are_accepted_and_counted_whatever_isolation_hides() -> None:
    result = translated(CASES[1])
    routes = [v for v in result.verdicts if isinstance(v, RouteVerdict)]
    assert len(routes) == 4
    for verdict in routes:
        (parent,) = verdict.parents
        assert [(c.type.value, c.status) for c in parent.conditions] == [
            ("Accepted", True),
            ("ResolvedRefs", True),
        ]


def test_a_route_whose_hosts_another_listener_claims_is_served_nowhere() -> None:
    # The *.example.com listener's route names only abc.foo.example.com, which the abc
    # listener claims: attached (Accepted, attachedRoutes 1) and served for no host.
    docs = list(yaml.safe_load_all((TESTDATA / CASES[0] / "input.yaml").read_text()))
    route = next(d for d in docs if d["metadata"]["name"] == "attaches-to-wildcard-example-com")
    route["spec"]["hostnames"] = ["abc.foo.example.com"]
    result = translate(Inputs.from_objects(docs))
    router, port = gateway_port(result)
    outcome = router.match(port, "abc.foo.example.com", "GET", "/wildcard-example-com")
    assert not isinstance(outcome, Candidate)
    served = [
        r.host
        for r in result.snapshots[SHARED_POOL]
        if isinstance(r, HostRoutes)
        and any(x.id.name == route["metadata"]["name"] for x in r.rules)
    ]
    assert served == []
    verdict = next(v for v in result.verdicts if v.ref.name == route["metadata"]["name"])
    assert isinstance(verdict, RouteVerdict) and verdict.parents[0].conditions[0].status
    gateway = next(v for v in result.verdicts if isinstance(v, GatewayVerdict))
    counts = {x.name: x.attached_routes for x in gateway.listeners}
    assert counts["wildcard-example-com"] == 1
