"""Merging verdicts onto live status: what is kept, what is replaced, when nothing is written.

Covers foreign condition types kept, other controllers' parents entries kept, our stale parents
entries dropped, lastTransitionTime kept while a condition's status holds, a negative-polarity
condition of ours withdrawn once the verdict leaves it out (a Gateway's
InsecureFrontendValidationMode and its own ResolvedRefs, a route's PartiallyInvalid too), and
"no write" when the live status already says what the verdict says; status.addresses replaced
whole, or dropped when there are none; a policy's ancestors merged as a route's parents are,
other controllers' kept and ours dropped when none is left; a Gateway's attachedListenerSets
written and withdrawn, a GatewayClass's supportedFeatures replaced whole.
"""

from __future__ import annotations

from typing import Any

from coxswain_controller.status.merge import merge_status

ME = "coxswain-labs.dev/gateway-controller"


def cond(kind: str, status: str, reason: str, *, gen: int = 1, at: str = "t0") -> dict[str, Any]:
    return {
        "type": kind,
        "status": status,
        "reason": reason,
        "message": "",
        "observedGeneration": gen,
        "lastTransitionTime": at,
    }


def ours(kind: str, status: str, reason: str, gen: int = 1) -> dict[str, Any]:
    c = cond(kind, status, reason, gen=gen)
    del c["lastTransitionTime"]
    return c


def test_foreign_condition_types_are_kept() -> None:
    live = {
        "conditions": [
            cond("Accepted", "False", "Pending"),
            cond("example.com/Healthy", "True", "Fine"),
        ]
    }
    merged = merge_status(
        live, {"conditions": [ours("Accepted", "True", "Accepted")]}, controller=ME, now="t1"
    )
    assert merged is not None
    types = {c["type"]: c for c in merged["conditions"]}
    assert types["example.com/Healthy"]["reason"] == "Fine"
    assert types["Accepted"]["status"] == "True" and types["Accepted"]["lastTransitionTime"] == "t1"


def test_last_transition_time_is_kept_while_the_status_holds() -> None:
    live = {"conditions": [cond("Accepted", "True", "Accepted", gen=1, at="t0")]}
    merged = merge_status(
        live, {"conditions": [ours("Accepted", "True", "Accepted", gen=2)]}, controller=ME, now="t1"
    )
    assert merged is not None
    assert merged["conditions"][0]["lastTransitionTime"] == "t0"
    assert merged["conditions"][0]["observedGeneration"] == 2


def test_nothing_to_write_when_the_status_already_says_it() -> None:
    live = {"conditions": [cond("Accepted", "True", "Accepted", at="t0")]}
    assert (
        merge_status(
            live, {"conditions": [ours("Accepted", "True", "Accepted")]}, controller=ME, now="t9"
        )
        is None
    )


def test_other_controllers_parents_are_kept_and_ours_replaced() -> None:
    theirs = {
        "parentRef": {"name": "other-gw"},
        "controllerName": "example.com/other",
        "conditions": [cond("Accepted", "True", "Accepted")],
    }
    stale = {
        "parentRef": {"name": "gone"},
        "controllerName": ME,
        "conditions": [cond("Accepted", "True", "Accepted")],
    }
    live = {"parents": [theirs, stale]}
    fragment = {
        "parents": [
            {
                "parentRef": {"name": "gw"},
                "controllerName": ME,
                "conditions": [ours("Accepted", "True", "Accepted")],
            }
        ]
    }
    merged = merge_status(live, fragment, controller=ME, now="t1")
    assert merged is not None
    assert [p["parentRef"]["name"] for p in merged["parents"]] == ["other-gw", "gw"]
    assert merged["parents"][0] == theirs


def test_listener_conditions_keep_their_transition_times() -> None:
    live = {
        "listeners": [
            {
                "name": "http",
                "attachedRoutes": 1,
                "supportedKinds": [],
                "conditions": [cond("Accepted", "True", "Accepted", at="t0")],
            }
        ]
    }
    fragment = {
        "listeners": [
            {
                "name": "http",
                "attachedRoutes": 2,
                "supportedKinds": [],
                "conditions": [ours("Accepted", "True", "Accepted")],
            }
        ]
    }
    merged = merge_status(live, fragment, controller=ME, now="t1")
    assert merged is not None
    assert merged["listeners"][0]["attachedRoutes"] == 2
    assert merged["listeners"][0]["conditions"][0]["lastTransitionTime"] == "t0"


def test_a_negative_polarity_condition_is_withdrawn_when_no_longer_true() -> None:
    live = {
        "listeners": [
            {
                "name": "https",
                "conditions": [
                    cond("Accepted", "True", "Accepted"),
                    cond("OverlappingTLSConfig", "True", "OverlappingHostnames"),
                    cond("example.com/Audited", "True", "Fine"),
                ],
            }
        ]
    }
    fragment = {
        "listeners": [{"name": "https", "conditions": [ours("Accepted", "True", "Accepted")]}]
    }
    merged = merge_status(live, fragment, controller=ME, now="t1")
    assert merged is not None
    types = [c["type"] for c in merged["listeners"][0]["conditions"]]
    assert types == ["example.com/Audited", "Accepted"]


def test_a_routes_partially_invalid_is_withdrawn_once_no_rule_is_dropped() -> None:
    entry = {"parentRef": {"name": "gw"}, "controllerName": ME}
    live = {
        "parents": [
            {
                **entry,
                "conditions": [
                    cond("Accepted", "True", "Accepted"),
                    cond("ResolvedRefs", "False", "BackendNotFound"),
                    cond("PartiallyInvalid", "True", "UnsupportedValue"),
                ],
            }
        ]
    }
    fixed = [ours("Accepted", "True", "Accepted"), ours("ResolvedRefs", "True", "ResolvedRefs")]
    merged = merge_status(
        live, {"parents": [{**entry, "conditions": fixed}]}, controller=ME, now="t1"
    )
    assert merged is not None
    assert [c["type"] for c in merged["parents"][0]["conditions"]] == ["Accepted", "ResolvedRefs"]


def test_addresses_are_replaced_whole_and_dropped_when_there_are_none() -> None:
    live = {
        "addresses": [{"type": "IPAddress", "value": "203.0.113.1"}],
        "conditions": [cond("Accepted", "True", "Accepted")],
    }
    moved = merge_status(
        live,
        {"addresses": [{"type": "Hostname", "value": "lb.example.net"}]},
        controller=ME,
        now="t1",
    )
    assert moved is not None
    assert moved["addresses"] == [{"type": "Hostname", "value": "lb.example.net"}]
    assert moved["conditions"] == live["conditions"]
    gone = merge_status(live, {"addresses": []}, controller=ME, now="t1")
    assert gone is not None and "addresses" not in gone
    assert merge_status(live, {"addresses": live["addresses"]}, controller=ME, now="t1") is None


def test_a_gateways_tls_conditions_are_withdrawn_when_left_out() -> None:
    live = {
        "conditions": [
            cond("Accepted", "True", "Accepted"),
            cond("ResolvedRefs", "False", "InvalidClientCertificateRef"),
            cond("InsecureFrontendValidationMode", "True", "ConfigurationChanged"),
            cond("example.com/Audited", "True", "Fine"),
        ]
    }
    fragment = {"conditions": [ours("Accepted", "True", "Accepted")]}
    merged = merge_status(live, fragment, controller=ME, now="t1")
    assert merged is not None
    assert [c["type"] for c in merged["conditions"]] == ["example.com/Audited", "Accepted"]


def ancestor(controller: str, gateway: str, *conditions: dict[str, Any]) -> dict[str, Any]:
    ref = {"group": "gateway.networking.k8s.io", "kind": "Gateway", "namespace": "ns"}
    return {
        "ancestorRef": {**ref, "name": gateway},
        "controllerName": controller,
        "conditions": list(conditions),
    }


def test_a_policys_ancestors_keep_other_controllers_entries() -> None:
    theirs = ancestor("example.com/other", "gw", cond("Accepted", "True", "Accepted"))
    live = {
        "ancestors": [
            theirs,
            ancestor(ME, "gw", cond("Accepted", "True", "Accepted", at="t0")),
            ancestor(ME, "gone", cond("Accepted", "True", "Accepted")),
        ]
    }
    fragment = {"ancestors": [ancestor(ME, "gw", ours("Accepted", "True", "Accepted"))]}
    merged = merge_status(live, fragment, controller=ME, now="t1")
    assert merged is not None
    assert merged["ancestors"][0] == theirs
    assert [a["ancestorRef"]["name"] for a in merged["ancestors"]] == ["gw", "gw"]
    assert merged["ancestors"][1]["conditions"][0]["lastTransitionTime"] == "t0"
    assert merge_status(merged, fragment, controller=ME, now="t2") is None


def test_a_policy_no_gateway_of_ours_uses_loses_our_ancestors_only() -> None:
    mine = {"ancestors": [ancestor(ME, "gw", cond("Accepted", "True", "Accepted"))]}
    dropped = merge_status(mine, {"ancestors": []}, controller=ME, now="t1")
    assert dropped is not None and "ancestors" not in dropped
    # Nobody's: nothing to write at all.
    assert merge_status({}, {"ancestors": []}, controller=ME, now="t1") is None


def test_attached_listener_sets_is_ours_and_dropped_when_not_given() -> None:
    fragment: dict[str, Any] = {"conditions": [], "listeners": [], "attachedListenerSets": 2}
    merged = merge_status({"attachedListenerSets": 1}, fragment, controller=ME, now="t1")
    assert merged is not None and merged["attachedListenerSets"] == 2
    assert merge_status(merged, fragment, controller=ME, now="t2") is None
    del fragment["attachedListenerSets"]
    withdrawn = merge_status(merged, fragment, controller=ME, now="t3")
    assert withdrawn is not None and "attachedListenerSets" not in withdrawn


def test_supported_features_are_ours_and_replaced_whole() -> None:
    live = {"supportedFeatures": [{"name": "Gateway"}, {"name": "Old"}]}
    fragment = {"conditions": [], "supportedFeatures": [{"name": "Gateway"}, {"name": "HTTPRoute"}]}
    merged = merge_status(live, fragment, controller=ME, now="t1")
    assert merged is not None
    assert merged["supportedFeatures"] == [{"name": "Gateway"}, {"name": "HTTPRoute"}]
    assert merge_status(merged, fragment, controller=ME, now="t2") is None
