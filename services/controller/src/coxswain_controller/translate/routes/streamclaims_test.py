"""Which of two TLSRoutes on one port keeps a server name both are served for, and which of two
TLS listeners on one port owns a name (streamclaims).

A table of listener hostnames and the two routes' own hostnames, translated whole: the route
naming the name more precisely keeps it (the Gateway API's "hostname specificity over creation
timestamp"), and between routes naming it alike the older one does (spec 003: "each server name
on a port belongs to one route, the oldest"). A second table puts a Passthrough listener and a
Terminate one on a port: a route is served a name only through the most specific listener
covering it, in that listener's mode, and stays accepted when it is served none. Leaves out TCP
and UDP listeners and partial losses (the golden cases streamroutes-*).
"""

from __future__ import annotations

from typing import Any

import pytest

from coxswain_controller.translate import Inputs, Options, translate
from coxswain_controller.translate.result import RouteVerdict
from coxswain_routing import StreamRoute


def _objects(listener_hostname: str, older: list[str], newer: list[str]) -> list[dict[str, Any]]:
    listener: dict[str, Any] = {"name": "tls", "port": 443, "protocol": "TLS",
                                "tls": {"mode": "Passthrough"}}  # fmt: skip
    if listener_hostname:
        listener["hostname"] = listener_hostname

    def tls_route(name: str, hostnames: list[str], created: str) -> dict[str, Any]:
        meta = {"name": name, "namespace": "ns", "creationTimestamp": created}
        spec = {"parentRefs": [{"name": "gw"}], "hostnames": hostnames, "rules": [{}]}
        return {"kind": "TLSRoute", "metadata": meta, "spec": spec}

    return [
        {"kind": "GatewayClass", "metadata": {"name": "c"},
         "spec": {"controllerName": Options().gateway_controller}},
        {"kind": "Gateway", "metadata": {"name": "gw", "namespace": "ns"},
         "spec": {"gatewayClassName": "c", "listeners": [listener]}},
        tls_route("older", older, "2026-01-01T00:00:00Z"),
        tls_route("newer", newer, "2026-01-02T00:00:00Z"),
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("listener", "older", "newer", "served"),
    [
        pytest.param("", ["a.example.com"], ["a.example.com"], {"a.example.com": "older"},
                     id="same-name-the-older-route-keeps-it"),
        pytest.param("a.example.com", ["*.example.com"], ["a.example.com"],
                     {"a.example.com": "newer"},
                     id="a-precise-name-outranks-a-wildcard-narrowed-to-it"),
        pytest.param("*.example.com", ["*.com"], ["*.example.com"], {"*.example.com": "newer"},
                     id="a-longer-wildcard-outranks-a-shorter-one-narrowed-to-it"),
        pytest.param("*.example.com", [], ["*.example.com"], {"*.example.com": "newer"},
                     id="naming-the-wildcard-outranks-naming-none"),
        pytest.param("", ["*.example.com"], ["a.example.com"],
                     {"*.example.com": "older", "a.example.com": "newer"},
                     id="a-wildcard-and-a-name-it-covers-are-two-names"),
        pytest.param("*.example.com", ["*.example.com"], ["*.com"], {"*.example.com": "older"},
                     id="the-older-route-naming-it-more-precisely-keeps-it"),
    ],
)  # fmt: skip
def test_the_route_naming_a_server_name_most_precisely_then_the_oldest_keeps_it(
    listener: str, older: list[str], newer: list[str], served: dict[str, str]
) -> None:
    result = translate(Inputs.from_objects(_objects(listener, older, newer)))
    (snapshot,) = result.snapshots.values()
    (stream,) = [r for r in snapshot if isinstance(r, StreamRoute)]
    assert {m.server_name: m.id.name for m in stream.matches} == served
    # A route left with no name is refused with RouteConflict; one keeping a name is accepted.
    accepted = {
        v.ref.name: v.parents[0].conditions[0].reason.value
        for v in result.verdicts
        if isinstance(v, RouteVerdict)
    }
    keeping = set(served.values())
    assert accepted == {n: "Accepted" if n in keeping else "RouteConflict" for n in accepted}


def _two_listeners(wide: str, narrow: str, section: str, hostnames: list[str]) -> list[Any]:
    def listener(name: str, hostname: str, mode: str) -> dict[str, Any]:
        tls: dict[str, Any] = {"mode": mode}
        if mode == "Terminate":
            tls["certificateRefs"] = [{"name": "not-there"}]  # the listener still opens
        found = {"name": name, "port": 443, "protocol": "TLS", "tls": tls}
        return {**found, "hostname": hostname} if hostname else found

    meta = {"name": "r", "namespace": "ns", "creationTimestamp": "2026-01-01T00:00:00Z"}
    parent = {"name": "gw", "sectionName": section}
    spec = {"parentRefs": [parent], "hostnames": hostnames, "rules": [{}]}
    listeners = [listener("wide", wide, "Passthrough"), listener("narrow", narrow, "Terminate")]
    return [
        {"kind": "GatewayClass", "metadata": {"name": "c"},
         "spec": {"controllerName": Options().gateway_controller}},
        {"kind": "Gateway", "metadata": {"name": "gw", "namespace": "ns"},
         "spec": {"gatewayClassName": "c", "listeners": listeners}},
        {"kind": "TLSRoute", "metadata": meta, "spec": spec},
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("wide", "narrow", "section", "hostnames", "served"),
    [
        pytest.param("", "a.example.com", "wide", ["a.example.com", "b.org"], {"b.org": False},
                     id="a-precise-listener-owns-its-name"),
        pytest.param("", "*.example.com", "wide", ["x.example.com"], {},
                     id="a-wildcard-listener-owns-the-names-it-covers"),
        pytest.param("", "*.example.com", "wide", ["*.a.example.com"], {},
                     id="and-the-narrower-wildcards"),
        pytest.param("", "a.example.com", "wide", ["*.example.com"], {"*.example.com": False},
                     id="a-wildcard-wider-than-the-precise-listener-stays-with-the-wide-one"),
        pytest.param("*.example.com", "a.example.com", "wide", [], {"*.example.com": False},
                     id="naming-none-serves-the-listeners-own-hostname"),
        pytest.param("", "a.example.com", "narrow", [], {"a.example.com": True},
                     id="through-the-terminate-listener-the-name-is-terminated"),
    ],
)  # fmt: skip
def test_a_name_is_served_through_the_most_specific_tls_listener_in_its_mode(
    wide: str, narrow: str, section: str, hostnames: list[str], served: dict[str, bool]
) -> None:
    result = translate(Inputs.from_objects(_two_listeners(wide, narrow, section, hostnames)))
    (snapshot,) = result.snapshots.values()
    streams = [r for r in snapshot if isinstance(r, StreamRoute)]
    assert {m.server_name: m.terminate for s in streams for m in s.matches} == served
    (verdict,) = [v for v in result.verdicts if isinstance(v, RouteVerdict)]
    assert verdict.parents[0].conditions[0].reason.value == "Accepted"
