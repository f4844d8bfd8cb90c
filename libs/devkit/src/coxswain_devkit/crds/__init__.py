"""Minimal Gateway API CustomResourceDefinitions, for the emulator in tests and the demo.

`standard()` holds GatewayClass, Gateway, HTTPRoute, GRPCRoute, ReferenceGrant and
BackendTLSPolicy; `experimental()` adds TLSRoute, TCPRoute, UDPRoute and ListenerSet. Apply them
through the API (or `ApiServer.apply`) to make the Gateway API served; delete them to take it away.
`coxswain()` holds Coxswain's own (CoxswainIngressClassParameters and
CoxswainGatewayParameters), which the emulator CLI always serves. The CoxswainGatewayParameters
file is the one in deploy/crds/, byte for byte (crds_test checks it).
"""

from __future__ import annotations

from importlib import resources
from typing import Any

import yaml

STANDARD = "gateway-api-standard.yaml"
EXPERIMENTAL = "gateway-api-experimental.yaml"
COXSWAIN = "coxswain.yaml"
GATEWAY_PARAMETERS = "coxswaingatewayparameters.yaml"  # a copy of deploy/crds/'s


def _load(name: str) -> list[dict[str, Any]]:
    text = resources.files(__name__).joinpath(name).read_text()
    return [doc for doc in yaml.safe_load_all(text) if isinstance(doc, dict)]


def standard() -> list[dict[str, Any]]:
    return _load(STANDARD)


def experimental() -> list[dict[str, Any]]:
    """The standard channel's CRDs and the experimental ones."""
    return _load(STANDARD) + _load(EXPERIMENTAL)


def coxswain() -> list[dict[str, Any]]:
    return _load(COXSWAIN) + _load(GATEWAY_PARAMETERS)
