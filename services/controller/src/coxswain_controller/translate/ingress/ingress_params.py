"""IngressClass parameters: a CoxswainIngressClassParameters object, read and checked.

Spec 001: the controller "watches IngressClass and its associated CoxswainIngressClassParameters
objects (the IngressClass.spec.parameters reference target). These carry class-level defaults
for Ingress routes: spec.defaultAnnotations (per-key annotation defaults that per-Ingress
annotations can override) and spec.accessLog (per-class access-log suppression)."

As a GatewayClass whose parameters cannot be honored serves none of its Gateways (spec 003), a
class whose parameters cannot be honored — another kind, a namespaced reference, an object that
is absent or malformed — serves none of its Ingresses, and each says why. The default
annotations lie under each Ingress's own (`annotations.policy`); this release keeps no access
log, so a class that turns it off is served and told, once, that it has no effect yet.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from coxswain_controller.translate.inputs import Inputs, Obj, name, spec

__all__ = ["KIND", "ClassParameters", "class_parameters"]

GROUP = "coxswain-labs.dev"
KIND = "CoxswainIngressClassParameters"


@dataclass(frozen=True)
class ClassParameters:
    default_annotations: Mapping[str, str] = field(default_factory=dict)
    # spec.accessLog.enabled: true has the proxy log the class's requests; false, or unset,
    # does not (the access log is off unless asked for: docs/operations.md).
    access_log: bool = False
    unused: tuple[str, ...] = ()  # fields set that nothing in this release reads


NONE = ClassParameters()


def class_parameters(inputs: Inputs, ingress_class: Obj) -> ClassParameters | str:
    """The class's parameters, or why they cannot be honored."""
    ref = spec(ingress_class).get("parameters")
    if not ref:
        return NONE
    if not isinstance(ref, Mapping):
        return "spec.parameters must be an object"
    target = f"{ref.get('apiGroup') or 'core'}/{ref.get('kind')} {ref.get('name')}"
    if ref.get("apiGroup") != GROUP or ref.get("kind") != KIND:
        return f"parameters {target} cannot be honored: only {GROUP}/{KIND} is supported"
    if (ref.get("scope") or "Cluster") != "Cluster":
        return f"parameters {target} cannot be honored: {KIND} is cluster-scoped"
    found = inputs.get(KIND, "", str(ref.get("name", "")))
    if found is None:
        return f"parameters {target} not found"
    return _read(found)


def _read(parameters: Obj) -> ClassParameters | str:
    body: Any = parameters.get("spec") or {}
    where = f"{KIND} {name(parameters)}"
    if not isinstance(body, Mapping):
        return f"{where}: spec must be an object"
    defaults = body.get("defaultAnnotations") or {}
    if not isinstance(defaults, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in defaults.items()
    ):
        return f"{where}: spec.defaultAnnotations must map annotation names to strings"
    access: Any = body.get("accessLog") or {}
    enabled = access.get("enabled", False) if isinstance(access, Mapping) else None
    if not isinstance(enabled, bool):
        return f"{where}: spec.accessLog.enabled must be true or false"
    return ClassParameters(dict(defaults), enabled)
