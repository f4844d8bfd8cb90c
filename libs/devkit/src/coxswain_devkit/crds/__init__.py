"""The Gateway API CustomResourceDefinitions of the current release, for the emulator in tests
and the demo.

Each channel is whole, as upstream ships it (`RELEASE`): `standard()` holds the ten CRDs of the
standard channel (GatewayClass, Gateway, HTTPRoute, GRPCRoute, ReferenceGrant, BackendTLSPolicy,
ListenerSet, TLSRoute, TCPRoute, UDPRoute, every one served at v1; the beta versions served
beside it, the alpha ones present but unserved); `experimental()` holds the same ten with their
alpha versions served (deprecated) and the experimental channel's own kinds in
gateway.networking.x-k8s.io (XBackend, XBackendTrafficPolicy, XMesh). Apply one channel through
the API (or `ApiServer.apply`) to make the Gateway API served; delete its CRDs to take it away.
`coxswain()` holds Coxswain's own (CoxswainGatewayParameters and
CoxswainIngressClassParameters), which the emulator CLI always serves: the files in deploy/crds/
that a cluster installs, never a copy. Pants packages them into this package (BUILD: relocated
here and wrapped as resources), so a wheel or PEX has them; run from a checkout, they are read
where they are.
"""

from __future__ import annotations

import sys
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

RELEASE = "v1.6.3"  # the Gateway API release both files follow
STANDARD = "gateway-api-standard.yaml"
EXPERIMENTAL = "gateway-api-experimental.yaml"
DEPLOYED = ("coxswaingatewayparameters.yaml", "coxswainingressclassparameters.yaml",
            "coxswainpolicies.yaml")  # Coxswain's  # fmt: skip


def _load(name: str) -> list[dict[str, Any]]:
    return _documents(resources.files(__name__).joinpath(name).read_text())


def standard() -> list[dict[str, Any]]:
    return _load(STANDARD)


def experimental() -> list[dict[str, Any]]:
    """The experimental channel: the standard channel's kinds (more versions served) and its
    own; apply it instead of `standard()`, as upstream's experimental-install.yaml is."""
    return _load(EXPERIMENTAL)


def coxswain() -> list[dict[str, Any]]:
    return [doc for name in DEPLOYED for doc in _documents(deployed_text(name))]


def deployed_text(name: str) -> str:
    """One of deploy/crds/'s files: as packaged with the devkit, else from the checkout."""
    packaged = resources.files(__name__).joinpath(name)
    if packaged.is_file():
        return packaged.read_text()
    # Run from sources in a Pants sandbox, the files are relocated beside the sources, under
    # the root source root (which is on the path), not inside this package's own directory.
    for entry in sys.path:
        relocated = Path(entry or ".") / "coxswain_devkit" / "crds" / name
        if relocated.is_file():
            return relocated.read_text()
    return (checkout_crds() / name).read_text()


def checkout_crds() -> Path:
    """deploy/crds/ of the checkout this file is in (the root is five levels up)."""
    return Path(__file__).resolve().parents[5] / "deploy" / "crds"


def _documents(text: str) -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(text) if isinstance(doc, dict)]
