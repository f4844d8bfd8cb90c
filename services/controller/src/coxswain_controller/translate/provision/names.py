"""The names and labels of what the controller provisions for a Gateway.

GEP-1762: generated resources are named `<gateway>-<gatewayclass>` and labelled
`gateway.networking.k8s.io/gateway-name: <gateway>`. Names must also be valid for their kind: a
Service's name is an RFC 1035 label (at most 63 characters, starting with a letter), a label
value at most 63 characters. Gateway names may be 253 characters long (the conformance suite's
GatewayNameMaximumLength uses one), so a name that does not fit is shortened and given a hash of
the whole, which keeps it stable and unique. The dedicated proxy's ServiceAccount is the one
exception: its name is the identity the discovery server and the identity service expect,
`{gateway}-{gatewayclass}` exactly, so it is never shortened.
"""

from __future__ import annotations

import hashlib
import re

__all__ = [
    "COMPONENT_LABEL",
    "CONTROLLER_LABEL",
    "GATEWAY_LABEL",
    "MANAGED_BY",
    "MANAGED_BY_LABEL",
    "base_name",
    "controller_label_value",
    "dedicated_service_account",
    "label_value",
    "shared_service_account",
    "trust_config_map",
]

# Every object the controller provisions carries these; the watch selects on the first.
MANAGED_BY_LABEL = "app.kubernetes.io/managed-by"
MANAGED_BY = "coxswain"
# Which controller (its --controller-name, label-safe): two installations in one cluster each
# prune only their own objects.
CONTROLLER_LABEL = "coxswain-labs.dev/controller"
# GEP-1762: "resources SHOULD be labelled with gateway.networking.k8s.io/gateway-name".
GATEWAY_LABEL = "gateway.networking.k8s.io/gateway-name"
# Which part of a Gateway's infrastructure an object is: vip, dedicated-proxy, identity, trust.
COMPONENT_LABEL = "app.kubernetes.io/component"

_LABEL_MAX = 63
_RFC1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_HASH = 8


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:_HASH]


def base_name(gateway: str, gateway_class: str) -> str:
    """`{gateway}-{gatewayclass}` as an RFC 1035 label: the Service's, Deployment's and other
    objects' name (a Service name must be one)."""
    name = f"{gateway}-{gateway_class}"
    if len(name) <= _LABEL_MAX and _RFC1035.match(name):
        return name
    cleaned = re.sub(r"[^a-z0-9-]+", "-", name.lower()).strip("-")
    if not cleaned or not cleaned[0].isalpha():
        cleaned = f"gw-{cleaned}"
    prefix = cleaned[: _LABEL_MAX - _HASH - 1].rstrip("-")
    return f"{prefix}-{_digest(name)}"


def dedicated_service_account(gateway: str, gateway_class: str) -> str:
    """Spec 001: "The controller stamps the expected proxy ServiceAccount name
    ({gateway-name}-{gatewayclass-name}, per GEP-1762) into the Gateway's registry entry"."""
    return f"{gateway}-{gateway_class}"


def shared_service_account(gateway: str, gateway_class: str) -> str:
    """The inert identity of a shared-mode Gateway (GEP-1867). Not the dedicated proxy's name:
    the identity service issues SVIDs to `{gateway}-{gatewayclass}`, and this one is never a
    proxy's, so moving the Gateway to dedicated mode prunes it rather than reusing it."""
    return f"{base_name(gateway, gateway_class)[: _LABEL_MAX - 6].rstrip('-')}-infra"


def trust_config_map(gateway: str, gateway_class: str) -> str:
    """The dedicated proxy's copy of the trust bundle (a pod mounts ConfigMaps only from its
    own namespace; the identity service publishes the bundle in its own)."""
    return f"{base_name(gateway, gateway_class)[: _LABEL_MAX - 6].rstrip('-')}-trust"


def label_value(text: str) -> str:
    """`text` as a label value: itself when valid, else shortened with a hash of the whole."""
    if len(text) <= _LABEL_MAX and _LABEL_VALUE.match(text):
        return text
    cleaned = re.sub(r"[^A-Za-z0-9_.-]+", "-", text).strip("-_.")
    prefix = cleaned[: _LABEL_MAX - _HASH - 1].rstrip("-_.")
    return f"{prefix}-{_digest(text)}" if prefix else _digest(text)


def controller_label_value(controller_name: str) -> str:
    """The GatewayClass controllerName (`coxswain-labs.dev/gateway-controller`) as a label."""
    return label_value(controller_name.replace("/", "."))
