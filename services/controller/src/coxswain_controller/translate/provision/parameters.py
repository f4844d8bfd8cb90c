"""CoxswainGatewayParameters: reading one object, and layering a Gateway's over its class's.

Spec 001: the provisioner "resolves each Gateway's effective CoxswainGatewayParameters (per-field
overlay: Gateway's parametersRef wins per-field, GatewayClass's fills the rest; podTemplate
strategic-merges across both layers)". So every field is optional in each layer: replicas, image,
resources and service.type are taken whole from the Gateway's layer when it sets them;
labels and service.annotations are merged key by key, the Gateway's winning; the podTemplate of
each layer is a patch, applied class first, then Gateway, onto the rendered Deployment.

Gateway API (GatewayClass.spec.parametersRef, Gateway.spec.infrastructure.parametersRef): "If
the referent cannot be found, refers to an unsupported kind, or when the data within that
resource is malformed, the [GatewayClass | Gateway] SHOULD be rejected with the "Accepted"
status condition set to "False" and an "InvalidParameters" reason." Every check here returns
the message that condition carries; nothing raises.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from coxswain_controller.translate.inputs import Inputs, Obj, name, namespace
from coxswain_controller.translate.provision import strategic

__all__ = [
    "GatewayParameters",
    "PARAMETERS_GROUP",
    "PARAMETERS_KIND",
    "SERVICE_TYPES",
    "layered",
    "read",
    "resolve",
]

PARAMETERS_GROUP = "coxswain-labs.dev"
PARAMETERS_KIND = "CoxswainGatewayParameters"
# Spec 002: "NodePort is rejected: it cannot preserve the advertised listener port."
SERVICE_TYPES = ("LoadBalancer", "ClusterIP")
NODE_PORT_REFUSED = (
    "service type NodePort is not supported: a NodePort Service is reached on a node port the "
    "API server allocates (30000-32767), so it cannot preserve the listener's advertised port "
    "(spec 002); use LoadBalancer or ClusterIP"
)

PROXY_CONTAINER = "proxy"  # the dedicated proxy's container, which patches merge onto by name
_FIELDS = frozenset({"replicas", "image", "resources", "service", "labels", "podTemplate"})
_MAX_REPLICAS = 2**31 - 1
# Kubernetes quantities (k8s.io/apimachinery resource.Quantity): a decimal number and a suffix.
_QUANTITY = re.compile(r"^[+]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+|[KMGTPE]i|[numkMGTPE])?$")
_NAME_PART = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_PREFIX = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")


@dataclass(frozen=True, slots=True)
class GatewayParameters:
    """One layer, or the effective parameters: every field optional (None/empty: not set)."""

    replicas: int | None = None  # the Deployment's replicas; unset: 1 at creation, then left
    image: str | None = None  # the proxy image; unset: the controller's --proxy-image
    resources: Mapping[str, Any] | None = None  # the proxy container's ResourceRequirements
    service_type: str | None = None  # LoadBalancer or ClusterIP; unset: --vip-service-type
    service_annotations: Mapping[str, str] = field(default_factory=dict)  # onto the Service
    labels: Mapping[str, str] = field(default_factory=dict)  # onto every generated object
    # podTemplate patches in the order they apply (class's, then Gateway's).
    pod_templates: tuple[Mapping[str, Any], ...] = ()
    sources: tuple[str, ...] = ()  # "CoxswainGatewayParameters ns/name" of each layer


def resolve(inputs: Inputs, ref: Mapping[str, Any], ns: str) -> GatewayParameters | str:
    """The parameters `ref` names in namespace `ns`, or why they cannot be used."""
    ref_name = ref.get("name")
    if not isinstance(ref_name, str) or not ref_name:
        return f"parametersRef to {PARAMETERS_KIND} names no object"
    obj = inputs.get(PARAMETERS_KIND, ns, ref_name)
    if obj is None:
        return f"{PARAMETERS_KIND} {ns}/{ref_name} not found"
    return read(obj)


def read(obj: Obj) -> GatewayParameters | str:
    """One object's parameters, or the first reason they cannot be used."""
    where = f"{PARAMETERS_KIND} {namespace(obj)}/{name(obj)}"
    spec = obj.get("spec") or {}
    if not isinstance(spec, Mapping):
        return f"{where}: spec must be an object"
    unknown = sorted(str(k) for k in spec if k not in _FIELDS)
    if unknown:
        return f"{where}: unknown field(s) spec.{', spec.'.join(unknown)}"
    problem = _problem(spec)
    if problem:
        return f"{where}: {problem}"
    service = spec.get("service") or {}
    template = spec.get("podTemplate")
    return GatewayParameters(
        replicas=spec.get("replicas"),
        image=spec.get("image"),
        resources=spec.get("resources"),
        service_type=service.get("type"),
        service_annotations=dict(service.get("annotations") or {}),
        labels=dict(spec.get("labels") or {}),
        pod_templates=(template,) if template else (),
        sources=(where,),
    )


def _problem(spec: Mapping[str, Any]) -> str:
    checks = (
        _replicas(spec.get("replicas")),
        _image(spec.get("image")),
        _resources(spec.get("resources")),
        _service(spec.get("service")),
        _string_map("spec.labels", spec.get("labels"), label_values=True),
        _pod_template(spec.get("podTemplate")),
    )
    return next((c for c in checks if c), "")


def _replicas(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= _MAX_REPLICAS:
        return f"spec.replicas must be an integer from 0 to {_MAX_REPLICAS}, not {value!r}"
    return ""


def _image(value: Any) -> str:
    if value is None:
        return ""
    if not isinstance(value, str) or not value or any(c.isspace() for c in value):
        return f"spec.image must be an image reference, not {value!r}"
    return ""


def _resources(value: Any) -> str:
    if value is None:
        return ""
    if not isinstance(value, Mapping):
        return "spec.resources must be an object with limits and requests"
    for part, amounts in value.items():
        if part not in ("limits", "requests"):
            return f"spec.resources.{part} is not a field (limits, requests)"
        if not isinstance(amounts, Mapping):
            return f"spec.resources.{part} must map resource names to quantities"
        for resource, amount in amounts.items():
            if not _quantity(amount):
                return f"spec.resources.{part}.{resource}: {amount!r} is not a quantity"
    return ""


def _quantity(value: Any) -> bool:
    if isinstance(value, bool):
        return False
    if isinstance(value, int | float):
        return value >= 0
    return isinstance(value, str) and bool(_QUANTITY.match(value))


def _service(value: Any) -> str:
    if value is None:
        return ""
    if not isinstance(value, Mapping):
        return "spec.service must be an object with type and annotations"
    unknown = sorted(str(k) for k in value if k not in ("type", "annotations"))
    if unknown:
        return f"spec.service.{unknown[0]} is not a field (type, annotations)"
    kind = value.get("type")
    if kind == "NodePort":
        return f"spec.service.type: {NODE_PORT_REFUSED}"
    if kind is not None and kind not in SERVICE_TYPES:
        return f"spec.service.type must be LoadBalancer or ClusterIP, not {kind!r}"
    return _string_map("spec.service.annotations", value.get("annotations"), label_values=False)


def _string_map(where: str, value: Any, *, label_values: bool) -> str:
    if value is None:
        return ""
    if not isinstance(value, Mapping):
        return f"{where} must map names to strings"
    for key, text in value.items():
        if not isinstance(key, str) or not qualified_name(key):
            return f"{where}: {key!r} is not a valid key"
        if not isinstance(text, str):
            return f"{where}.{key} must be a string"
        if label_values and not label_value(text):
            return f"{where}.{key}: {text!r} is not a valid label value"
    return ""


def label_value(text: str) -> bool:
    """A label value: at most 63 characters, alphanumeric at both ends."""
    return len(text) <= 63 and bool(_LABEL_VALUE.match(text))


def qualified_name(key: str) -> bool:
    """A label or annotation key: an optional DNS-subdomain prefix and '/', then a name."""
    prefix, slash, rest = key.rpartition("/")
    if slash and (not prefix or len(prefix) > 253 or not _PREFIX.match(prefix)):
        return False
    return 0 < len(rest) <= 63 and bool(_NAME_PART.match(rest))


def _pod_template(value: Any) -> str:
    if value is None:
        return ""
    if not isinstance(value, Mapping):
        return "spec.podTemplate must be an object (a pod template: metadata and spec)"
    unknown = sorted(str(k) for k in value if k not in ("metadata", "spec"))
    if unknown:
        return f"spec.podTemplate.{unknown[0]} is not a field (metadata, spec)"
    for part in ("metadata", "spec"):
        if value.get(part) is not None and not isinstance(value.get(part), Mapping):
            return f"spec.podTemplate.{part} must be an object"
    # What the patch leaves of a template holding only the proxy container: it may add, change
    # or remove anything else, but the pod must still run the proxy.
    merged = strategic.merge({"spec": {"containers": [{"name": PROXY_CONTAINER}]}}, value)
    containers = (merged.get("spec") or {}).get("containers")
    if not isinstance(containers, list) or not all(
        isinstance(c, Mapping) and isinstance(c.get("name"), str) for c in containers
    ):
        return "spec.podTemplate.spec.containers must be a list of containers, each with a name"
    if not any(c["name"] == PROXY_CONTAINER for c in containers):
        return f"spec.podTemplate removes the {PROXY_CONTAINER!r} container the proxy runs in"
    return ""


def layered(under: GatewayParameters | None, over: GatewayParameters | None) -> GatewayParameters:
    """`over` (the Gateway's) field by field over `under` (its class's)."""
    low, high = under or GatewayParameters(), over or GatewayParameters()
    return GatewayParameters(
        replicas=high.replicas if high.replicas is not None else low.replicas,
        image=high.image if high.image is not None else low.image,
        resources=high.resources if high.resources is not None else low.resources,
        service_type=high.service_type if high.service_type is not None else low.service_type,
        service_annotations={**low.service_annotations, **high.service_annotations},
        labels={**low.labels, **high.labels},
        pod_templates=low.pod_templates + high.pod_templates,
        sources=low.sources + high.sources,
    )
