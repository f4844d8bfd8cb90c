"""The Gateway API CustomResourceDefinitions of the current release, for the emulator in tests
and the demo.

Each channel is whole, as upstream ships it (`RELEASE`): `standard()` holds the ten CRDs of the
standard channel (GatewayClass, Gateway, HTTPRoute, GRPCRoute, ReferenceGrant, BackendTLSPolicy,
ListenerSet, TLSRoute, TCPRoute, UDPRoute, every one served at v1; the beta versions served
beside it, the alpha ones present but unserved); `experimental()` holds the same ten with their
alpha versions served (deprecated) and the experimental channel's own kinds in
gateway.networking.x-k8s.io (XBackend, XBackendTrafficPolicy, XMesh). Apply one channel through
the API (or `ApiServer.apply`) to make the Gateway API served; delete its CRDs to take it away.
`coxswain()` holds Coxswain's own (CoxswainIngressClassParameters and
CoxswainGatewayParameters), which the emulator CLI always serves. The CoxswainGatewayParameters
file is the one in deploy/crds/, byte for byte (crds_test checks it).
"""

from __future__ import annotations

from importlib import resources
from typing import Any

import yaml

RELEASE = "v1.6.3"  # the Gateway API release both files follow
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
    """The experimental channel: the standard channel's kinds (more versions served) and its
    own; apply it instead of `standard()`, as upstream's experimental-install.yaml is."""
    return _load(EXPERIMENTAL)


def coxswain() -> list[dict[str, Any]]:
    return _load(COXSWAIN) + _load(GATEWAY_PARAMETERS)
