"""`kubectl describe` of a custom resource shows its Events, and only its own.

kubectl describes an HTTPRoute by reading it and then listing core/v1 Events in its namespace
with the field selector `involvedObject.uid=..,involvedObject.name=..,involvedObject.namespace=..,
involvedObject.kind=HTTPRoute` (in pages of 500). Covers: the route's Events are printed with
their type, reason, source and message; Events about a Service of the same name, about an
earlier HTTPRoute of the same name (another uid) and about a same-named route in another
namespace are not. The selector grammar itself is in selection_test.py.
"""

from __future__ import annotations

from typing import Any

import pytest

from coxswain_devkit import crds
from coxswain_devkit.apiserver import ThreadedApiServer
from coxswain_devkit.apiserver.conftest import Kubectl

ROUTE_API = "gateway.networking.k8s.io/v1"


def _event(name: str, ns: str, about: dict[str, str], reason: str, message: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": name, "namespace": ns},
        "involvedObject": {"namespace": ns, **about},
        "reason": reason,
        "message": message,
        "type": "Warning" if reason == "Conflict" else "Normal",
        "source": {"component": "coxswain-controller"},
        "firstTimestamp": "2026-01-01T00:00:00Z",
        "lastTimestamp": "2026-01-01T00:00:00Z",
        "count": 1,
    }


def _route(ns: str) -> dict[str, Any]:
    return {
        "apiVersion": ROUTE_API,
        "kind": "HTTPRoute",
        "metadata": {"name": "web", "namespace": ns},
        "spec": {"hostnames": ["shop.example"]},
    }


@pytest.fixture
def events(api: ThreadedApiServer) -> None:
    api.call(
        lambda s: s.apply(
            [
                *crds.standard(),
                {"metadata": {"name": "other"}, "apiVersion": "v1", "kind": "Namespace"},
            ]
        )
    )
    route, other = api.call(lambda s: s.apply([_route("default"), _route("other")]))
    route_ref = {"kind": "HTTPRoute", "name": "web", "apiVersion": ROUTE_API}
    uid, other_uid = route["metadata"]["uid"], other["metadata"]["uid"]
    api.call(
        lambda s: s.apply(
            [
                _event("web.1", "default", {**route_ref, "uid": uid}, "Accepted", "route taken"),
                _event("web.2", "default", {**route_ref, "uid": uid}, "Conflict", "two rules"),
                _event("web.3", "default", {**route_ref, "uid": "gone"}, "Stale", "old route"),
                _event(
                    "web.4",
                    "default",
                    {"kind": "Service", "name": "web", "apiVersion": "v1", "uid": "svc"},
                    "Synced",
                    "a service",
                ),
                _event("web.5", "other", {**route_ref, "uid": other_uid}, "Elsewhere", "other ns"),
            ]
        )
    )


def test_describe_shows_the_routes_own_events(kubectl: Kubectl, events: None) -> None:
    out = kubectl("describe", "httproute", "web")
    assert "Kind:         HTTPRoute" in out
    section = out.split("Events:", 1)[1]
    lines = [line.split() for line in section.strip().splitlines()[2:]]
    assert sorted((line[0], line[1], line[3], " ".join(line[4:])) for line in lines) == [
        ("Normal", "Accepted", "coxswain-controller", "route taken"),
        ("Warning", "Conflict", "coxswain-controller", "two rules"),
    ]
