"""What a Gateway asks of its infrastructure: labels, annotations, parameters and addresses.

Read once per Gateway in the Gateway stage (gateway_states), under its guard, so a malformed
field costs only that Gateway. Spec 002 and the Gateway API:

- `spec.infrastructure.labels` and `.annotations` (GEP-1867) go onto every object provisioned
  for the Gateway (GatewayInfrastructurePropagation).
- `spec.infrastructure.parametersRef` to a CoxswainGatewayParameters makes the Gateway dedicated;
  its parameters are layered over its class's (parameters.py). Unusable parameters are
  "Accepted: False, InvalidParameters".
- `spec.addresses` are requested addresses. Gateway API (GatewayReasonUnsupportedAddress): "This
  reason is used with the "Accepted" condition when the Gateway has an address of an unsupported
  type, or the address value is not valid for its type"; whether a supported one can be had is
  the Service's to say (addresses.py).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from coxswain_controller.translate.conditions import ConditionType, Reason
from coxswain_controller.translate.inputs import Inputs, Obj, namespace, spec
from coxswain_controller.translate.provision import parameters
from coxswain_controller.translate.provision.parameters import GatewayParameters
from coxswain_controller.translate.result import Condition

__all__ = ["Infrastructure", "is_parameters_ref", "read_infrastructure"]

IP_ADDRESS, HOSTNAME = "IPAddress", "Hostname"


@dataclass(frozen=True, slots=True)
class Infrastructure:
    labels: Mapping[str, str] = field(default_factory=dict)  # GEP-1867, onto every object
    annotations: Mapping[str, str] = field(default_factory=dict)
    # The effective parameters of a dedicated Gateway (class's layered under its own); None
    # for a shared one.
    parameters: GatewayParameters | None = None
    # spec.addresses with a value, as (type, value); those without one ask for nothing.
    addresses: tuple[tuple[str, str], ...] = ()
    problems: tuple[Condition, ...] = ()  # Accepted: False reasons


def is_parameters_ref(ref: Any) -> bool:
    if not isinstance(ref, Mapping) or not ref:
        return False
    return ref.get("group") == parameters.PARAMETERS_GROUP and (
        ref.get("kind") == parameters.PARAMETERS_KIND
    )


def read_infrastructure(
    inputs: Inputs, gateway: Obj, class_parameters: GatewayParameters | None, dedicated: bool
) -> Infrastructure:
    """The Gateway's infrastructure request; `class_parameters` is its class's layer (None when
    the class names none) and `dedicated` whether the Gateway is dedicated at all."""
    infra: Mapping[str, Any] = spec(gateway).get("infrastructure") or {}
    problems: list[Condition] = []
    effective = None
    if dedicated:
        own = None
        ref = infra.get("parametersRef")
        if isinstance(ref, Mapping) and is_parameters_ref(ref):
            found = parameters.resolve(inputs, ref, namespace(gateway))
            if isinstance(found, str):
                problems.append(_invalid_parameters(f"infrastructure.parametersRef: {found}"))
            else:
                own = found
        effective = parameters.layered(class_parameters, own)
    addresses, unsupported = _addresses(spec(gateway).get("addresses") or [])
    problems += unsupported
    return Infrastructure(
        labels=_strings(infra.get("labels")),
        annotations=_strings(infra.get("annotations")),
        parameters=effective,
        addresses=addresses,
        problems=tuple(problems),
    )


def _invalid_parameters(message: str) -> Condition:
    return Condition(ConditionType.ACCEPTED, False, Reason.INVALID_PARAMETERS, message)


def _strings(value: Any) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise TypeError("infrastructure labels and annotations must be maps")
    return {str(k): str(v) for k, v in value.items()}


def _addresses(raw: Any) -> tuple[tuple[tuple[str, str], ...], list[Condition]]:
    if not isinstance(raw, list):
        raise TypeError("spec.addresses must be a list")
    found: list[tuple[str, str]] = []
    problems = []
    for entry in raw:
        # GatewaySpecAddress: type defaults to IPAddress; a value may be left out (v1.3,
        # GatewayOptionalAddressValue: "the implementation assigns one").
        kind = str(entry.get("type") or IP_ADDRESS)
        value = str(entry.get("value") or "")
        problem = _unsupported(kind, value)
        if problem:
            problems.append(
                Condition(ConditionType.ACCEPTED, False, Reason.UNSUPPORTED_ADDRESS, problem)
            )
        elif value:
            found.append((kind, value))
    return tuple(dict.fromkeys(found)), problems[:1]


def _unsupported(kind: str, value: str) -> str:
    if kind not in (IP_ADDRESS, HOSTNAME):
        return f"address type {kind!r} is not supported (IPAddress, Hostname)"
    if kind == IP_ADDRESS and value:
        try:
            ipaddress.ip_address(value)
        except ValueError:
            return f"{value!r} is not an IP address"
    return ""
