"""The provisioning stage beyond the golden cases: names that must fit, and addresses that
follow the Service through a patched pass.

Covers a Gateway with a 253-character name (conformance's GatewayNameMaximumLength): every
rendered name and label is valid for its kind, and the dedicated ServiceAccount is still the
identity the discovery server expects; and a load balancer assigning the VIP Service its address
(a status-only change, which the incremental path patches) making the Gateway Programmed
exactly as a fresh translation does. Rendering and layering themselves are the goldens'.
"""

from __future__ import annotations

import copy
import re
from typing import Any

from coxswain_controller.translate import Inputs, Options, translate
from coxswain_controller.translate.conditions import ConditionType, Reason
from coxswain_controller.translate.incremental import Translator
from coxswain_controller.translate.result import GatewayVerdict
from coxswain_controller.translate.scopes import GatewayScope

RFC1035 = re.compile(r"^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$")
LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]{0,61})?[A-Za-z0-9])?$")
OPTIONS = Options(vip_service_type="LoadBalancer")
LONG = "gateway-name-maximum-length-" + "a" * (253 - len("gateway-name-maximum-length-"))


def _class(params: str = "") -> dict[str, Any]:
    spec: dict[str, Any] = {"controllerName": OPTIONS.gateway_controller}
    if params:
        spec["parametersRef"] = {
            "group": "coxswain-labs.dev",
            "kind": "CoxswainGatewayParameters",
            "name": params,
            "namespace": "shop",
        }
    return {"kind": "GatewayClass", "metadata": {"name": "coxswain", "uid": "c"}, "spec": spec}


def _gateway(name: str) -> dict[str, Any]:
    return {
        "kind": "Gateway",
        "metadata": {"name": name, "namespace": "shop", "uid": "g", "generation": 1},
        "spec": {
            "gatewayClassName": "coxswain",
            "listeners": [{"name": "http", "port": 80, "protocol": "HTTP"}],
        },
    }


def _params() -> dict[str, Any]:
    return {"kind": "CoxswainGatewayParameters", "metadata": {"name": "p", "namespace": "shop"}}


def test_a_gateway_with_the_longest_name_gets_valid_names_and_its_identity() -> None:
    result = translate(Inputs.from_objects([_class("p"), _params(), _gateway(LONG)]), OPTIONS)
    (entry,) = result.provision
    assert not entry.hold
    for obj in entry.objects:
        metadata = obj.body["metadata"]
        if obj.key.kind == "ServiceAccount":
            assert metadata["name"] == f"{LONG}-coxswain"  # the expected identity, as is
        else:
            assert RFC1035.match(metadata["name"]), metadata["name"]
        assert all(LABEL_VALUE.match(v) for v in metadata["labels"].values())
    identity = result.gateway_identities[GatewayScope("shop", LONG)]
    assert identity.service_account == f"{LONG}-coxswain"


def _programmed(result: Any) -> tuple[bool, str, Any]:
    (gateway,) = [v for v in result.verdicts if isinstance(v, GatewayVerdict)]
    programmed = next(c for c in gateway.conditions if c.type is ConditionType.PROGRAMMED)
    return programmed.status, programmed.reason, gateway.addresses


def test_an_address_assigned_later_reaches_status_through_a_patched_pass() -> None:
    service = {
        "kind": "Service",
        "metadata": {"name": "gw-coxswain", "namespace": "shop"},
        "spec": {"type": "LoadBalancer", "ports": [{"port": 80}]},
    }
    objects = [_class(), _gateway("gw"), service]
    translator = Translator(OPTIONS)
    before = translator.translate(Inputs.from_objects(objects))
    assert _programmed(before) == (False, Reason.ADDRESS_NOT_ASSIGNED, ())
    assigned = copy.deepcopy(service)
    assigned["status"] = {"loadBalancer": {"ingress": [{"hostname": "lb.example.net"}]}}
    inputs = Inputs.from_objects([_class(), _gateway("gw"), assigned])
    after = translator.translate(inputs)
    assert translator.patched == 1  # a Service change: patched, not rebuilt
    assert _programmed(after) == (True, Reason.PROGRAMMED, (("Hostname", "lb.example.net"),))
    assert after.verdicts == translate(inputs, OPTIONS).verdicts
