"""Dedicated mode: a Deployment, Service and ServiceAccount per Gateway, and its trust bundle.

Spec 001 `serve proxy --dedicated`: "Read-only proxy scoped to a single Gateway (identified by
--dedicated --gateway-name=NAME --gateway-namespace=NS). Provisioned by the controller in the
Gateway's own namespace." Spec 000: "Each proxy mounts only a projected ServiceAccount token
(audience coxswain-discovery) for SVID bootstrap at
/var/run/secrets/coxswain/discovery-token/token ... and the public trust-bundle ConfigMap at
/var/run/secrets/coxswain/trust-bundle/ca.crt." A pod mounts ConfigMaps only from its own
namespace, so the bundle the identity service publishes is copied next to the Gateway. The
pod gets no API token at all (`automountServiceAccountToken: false`): "the dedicated proxy holds
zero Kubernetes API credentials".

The rendered pod template is the base the parameters' podTemplate patches are strategic-merged
onto (class's first, then the Gateway's).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from decimal import Decimal, InvalidOperation
from typing import Any

from coxswain_controller.translate.provision import common, names, strategic
from coxswain_controller.translate.provision.common import Target
from coxswain_controller.translate.provision.model import ObjectKey, Provisioned
from coxswain_controller.translate.provision.parameters import PROXY_CONTAINER, GatewayParameters

__all__ = [
    "ADMIN_PORT",
    "CONTAINER",
    "PROXY",
    "TOKEN_AUDIENCE",
    "deployment",
    "pod_template",
    "selector",
    "service",
    "service_account",
    "trust_bundle",
]

PROXY = "dedicated-proxy"  # the component label of everything but the trust bundle
TRUST = "trust"
CONTAINER = PROXY_CONTAINER  # the proxy container's name, which a podTemplate patch merges on
ADMIN_PORT = 9092  # the proxy's admin port: /readyz, /healthz, /metrics
TOKEN_AUDIENCE = "coxswain-discovery"  # noqa: S105 (an audience)
TOKEN_DIR = "/var/run/secrets/coxswain/discovery-token"  # noqa: S105 (a path)
TRUST_DIR = "/var/run/secrets/coxswain/trust-bundle"
TRUST_KEY = "ca.crt"
TOKEN_SECONDS = 3600
RUN_AS = 65532  # the images' user and group (deploy/images/*/Dockerfile)
# Lets the non-root proxy bind its listeners' ports below 1024 (a "safe" sysctl since
# Kubernetes 1.22), instead of granting NET_BIND_SERVICE.
_LOW_PORTS = {"name": "net.ipv4.ip_unprivileged_port_start", "value": "0"}


def selector(target: Target) -> dict[str, str]:
    """The labels the Deployment and the Service select its pods by (the Deployment's selector
    is immutable: these never change for a Gateway)."""
    return {names.GATEWAY_LABEL: target.gateway_label, names.COMPONENT_LABEL: PROXY}


def _parameters(target: Target) -> GatewayParameters:
    return target.infrastructure.parameters or GatewayParameters()


def service(target: Target) -> Provisioned:
    params = _parameters(target)
    service_type = params.service_type or target.options.vip_service_type or "LoadBalancer"
    body: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": common.metadata(
            target, target.base, PROXY, labels=params.labels, annotations=params.service_annotations
        ),
        "spec": {
            "type": service_type,
            "selector": selector(target),
            "ports": common.service_ports(common.ports(target.gateway)),
            **common.static_address_fields(service_type, target.infrastructure.addresses),
        },
    }
    return Provisioned(ObjectKey("Service", target.gateway.namespace, target.base), body)


def service_account(target: Target) -> Provisioned:
    name = names.dedicated_service_account(target.gateway.name, target.gateway.cls.name)
    body: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": common.metadata(target, name, PROXY, labels=_parameters(target).labels),
        "automountServiceAccountToken": False,
    }
    return Provisioned(ObjectKey("ServiceAccount", target.gateway.namespace, name), body)


def trust_bundle(target: Target, bundle: str) -> Provisioned:
    name = names.trust_config_map(target.gateway.name, target.gateway.cls.name)
    body: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": common.metadata(target, name, TRUST, labels=_parameters(target).labels),
        "data": {TRUST_KEY: bundle},
    }
    return Provisioned(ObjectKey("ConfigMap", target.gateway.namespace, name), body)


def deployment(target: Target) -> Provisioned:
    params = _parameters(target)
    spec: dict[str, Any] = {
        "selector": {"matchLabels": selector(target)},
        "template": pod_template(target),
    }
    if params.replicas is not None:
        spec = {"replicas": params.replicas, **spec}
    body: dict[str, Any] = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": common.metadata(target, target.base, PROXY, labels=params.labels),
        "spec": spec,
    }
    return Provisioned(ObjectKey("Deployment", target.gateway.namespace, target.base), body)


def pod_template(target: Target) -> dict[str, Any]:
    """The rendered template with every podTemplate patch merged onto it, in layer order."""
    template = _rendered(target)
    for patch in _parameters(target).pod_templates:
        template = strategic.merge(template, patch)
    # The selector's labels are the controller's: a patch may not take a pod out of its own
    # Deployment (the API server would refuse the Deployment).
    labels = template.setdefault("metadata", {}).setdefault("labels", {})
    if isinstance(labels, dict):
        labels.update(selector(target))
    return template


def _rendered(target: Target) -> dict[str, Any]:
    gateway, params = target.gateway, _parameters(target)
    labels = {**params.labels, **target.infrastructure.labels, **selector(target)}
    return {
        "metadata": {"labels": labels, "annotations": dict(target.infrastructure.annotations)},
        "spec": {
            "serviceAccountName": names.dedicated_service_account(gateway.name, gateway.cls.name),
            "automountServiceAccountToken": False,
            # Non-root as the images are built (deploy/images: user 65532), with the root
            # filesystem read-only; the proxy writes only its temporary PEM files, to /tmp.
            "securityContext": {
                "runAsNonRoot": True,
                "runAsUser": RUN_AS,
                "runAsGroup": RUN_AS,
                "sysctls": [dict(_LOW_PORTS)],
            },
            "containers": [_container(target)],
            "volumes": [
                {"name": "tmp", "emptyDir": {"medium": "Memory", "sizeLimit": "16Mi"}},
                {
                    "name": "discovery-token",
                    "projected": {
                        "sources": [
                            {
                                "serviceAccountToken": {
                                    "audience": TOKEN_AUDIENCE,
                                    "expirationSeconds": TOKEN_SECONDS,
                                    "path": "token",
                                }
                            }
                        ]
                    },
                },
                {
                    "name": "trust-bundle",
                    "configMap": {
                        "name": names.trust_config_map(gateway.name, gateway.cls.name),
                        "items": [{"key": TRUST_KEY, "path": TRUST_KEY}],
                    },
                },
            ],
        },
    }


def _container(target: Target) -> dict[str, Any]:
    params, options = _parameters(target), target.options
    container: dict[str, Any] = {
        "name": CONTAINER,
        "image": params.image or options.proxy_image,
        "args": _args(target),
        "ports": [
            *(
                {"name": p.name, "containerPort": p.bind_port, "protocol": p.protocol}
                for p in common.ports(target.gateway)
            ),
            {"name": "admin", "containerPort": ADMIN_PORT, "protocol": "TCP"},
        ],
        "readinessProbe": {"httpGet": {"path": "/readyz", "port": "admin"}, "periodSeconds": 5},
        "livenessProbe": {"httpGet": {"path": "/healthz", "port": "admin"}, "periodSeconds": 10},
        "volumeMounts": [
            {"name": "discovery-token", "mountPath": TOKEN_DIR, "readOnly": True},
            {"name": "trust-bundle", "mountPath": TRUST_DIR, "readOnly": True},
            {"name": "tmp", "mountPath": "/tmp"},  # noqa: S108 - the pod's own emptyDir
        ],
        "securityContext": {
            "readOnlyRootFilesystem": True,
            "allowPrivilegeEscalation": False,
            "capabilities": {"drop": ["ALL"]},
            "seccompProfile": {"type": "RuntimeDefault"},
        },
    }
    if params.resources is not None:
        container["resources"] = dict(params.resources)
    return container


def _args(target: Target) -> list[str]:
    gateway, options = target.gateway, target.options
    return [
        "serve",
        "--dedicated",
        "--gateway-name",
        gateway.name,
        "--gateway-namespace",
        gateway.namespace,
        "--discovery-endpoint",
        options.proxy_discovery_endpoint,
        "--discovery-bootstrap-endpoint",
        options.proxy_bootstrap_endpoint,
        # The proxy defaults to a worker per CPU it sees, which in a container is the node's.
        "--workers",
        str(_workers(_parameters(target).resources)),
        *options.proxy_args,
    ]


def _workers(resources: Mapping[str, Any] | None) -> int:
    """One worker per CPU the container may use: its cpu limit, else its request, else 1."""
    for part in ("limits", "requests"):
        amount = ((resources or {}).get(part) or {}).get("cpu")
        cpus = _cpus(amount)
        if cpus is not None:
            return max(1, math.ceil(cpus))
    return 1


def _cpus(amount: Any) -> Decimal | None:
    if amount is None or isinstance(amount, bool):
        return None
    text = str(amount)
    scale = Decimal("0.001") if text.endswith("m") else Decimal(1)
    try:
        return Decimal(text.removesuffix("m")) * scale
    except InvalidOperation:
        return None
