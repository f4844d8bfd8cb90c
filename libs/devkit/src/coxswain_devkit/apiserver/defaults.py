"""What the real server's per-kind strategies add to the objects written, for the kinds that
need it.

Namespaces become Active and carry the `kubernetes` finalizer that namespace deletion runs
through, and every write leaves them labelled with their own name (`label_namespace`); Services
get a cluster IP and each port a targetPort (its port) when it has none; Secrets are Opaque
unless typed; CustomResourceDefinitions are checked and become Established at once (their
`openAPIV3Schema` is not itself checked; custom resources are held to it for unknown fields
only, see `validation`). Everything else is stored as sent.
"""

from __future__ import annotations

import ipaddress
from typing import Any

from coxswain_devkit.apiserver import errors
from coxswain_devkit.apiserver.registry import Kind, Registry

Obj = dict[str, Any]

_SERVICE_CIDR = ipaddress.ip_network("10.96.0.0/16")
# Kubernetes 1.22 (NamespaceDefaultLabelName, GA): "The Kubernetes control plane sets an
# immutable label kubernetes.io/metadata.name on all namespaces. The value of the label is the
# namespace name." Gateways select namespaces by it (allowedRoutes.namespaces.from: Selector).
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"


class Defaulter:
    def __init__(self, registry: Registry) -> None:
        self._registry = registry
        self._next_ip = 10

    def on_create(self, kind: Kind, obj: Obj) -> None:
        if kind.resource == ("", "namespaces"):
            obj.setdefault("spec", {}).setdefault("finalizers", ["kubernetes"])
            obj.setdefault("status", {})["phase"] = "Active"
            label_namespace(obj, obj["metadata"]["name"])
        elif kind.resource == ("", "services"):
            self._service(obj.setdefault("spec", {}))
        elif kind.resource == ("", "secrets"):
            obj["type"] = obj.get("type") or "Opaque"  # SetDefaults_Secret
        elif kind.resource == ("apiextensions.k8s.io", "customresourcedefinitions"):
            self.check_crd(obj)
            obj["status"] = crd_status(obj)

    def on_update(self, kind: Kind, obj: Obj, name: str) -> None:
        """Every update, patch and apply of the object `name`: what the kind's strategy
        enforces in PrepareForUpdate."""
        if kind.resource == ("", "namespaces"):
            label_namespace(obj, name)

    def _service(self, spec: dict[str, Any]) -> None:
        spec.setdefault("type", "ClusterIP")
        for port in spec.get("ports") or []:
            # SetDefaults_Service: "If this is not specified, the value of the 'port' field is
            # used"; a protobuf body (kubectl create service) leaves an unset targetPort out.
            if isinstance(port, dict) and port.get("targetPort") in (None, 0, ""):
                port["targetPort"] = port.get("port")
        if spec["type"] == "ExternalName" or spec.get("clusterIP") == "None":
            return
        if not spec.get("clusterIP"):
            spec["clusterIP"] = str(_SERVICE_CIDR[self._next_ip])
            self._next_ip += 1
        spec.setdefault("clusterIPs", [spec["clusterIP"]])

    def check_crd(self, crd: Obj) -> None:
        name = crd["metadata"]["name"]
        spec = crd.get("spec") or {}
        names = spec.get("names") or {}
        problems = []
        if not spec.get("group") or not names.get("plural") or not names.get("kind"):
            problems.append(("spec", "Required value: group, names.plural and names.kind"))
        elif name != f"{names['plural']}.{spec['group']}":
            problems.append(
                ("metadata.name", 'Invalid value: must be spec.names.plural+"."+spec.group')
            )
        if not any(v.get("served", True) for v in spec.get("versions") or []):
            problems.append(("spec.versions", "Required value: at least one served version"))
        if spec.get("scope", "Namespaced") not in ("Namespaced", "Cluster"):
            problems.append(("spec.scope", "Unsupported value: must be Namespaced or Cluster"))
        resource = (spec.get("group", ""), names.get("plural", ""))
        served = self._registry.preferred(*resource)
        if (served and served.builtin) or self._registry.owner_of(*resource) not in (None, name):
            problems.append(("spec.names.plural", "Invalid value: already served"))
        if problems:
            raise errors.invalid("CustomResourceDefinition", "apiextensions.k8s.io", name, problems)


def label_namespace(namespace: Obj, name: str) -> None:
    """The namespace strategy's PrepareForCreate and PrepareForUpdate: the name label is set to
    the name whatever the request said, so removing or changing it leaves it as it was."""
    meta = namespace["metadata"]
    labels = meta.get("labels")
    meta["labels"] = {**(labels if isinstance(labels, dict) else {}), NAMESPACE_NAME_LABEL: name}


def crd_status(crd: Obj) -> dict[str, Any]:
    """A CRD's status once the server serves it: names accepted, Established."""
    spec = crd.get("spec") or {}
    conditions = [
        {
            "type": t,
            "status": "True",
            "reason": r,
            "message": m,
            "lastTransitionTime": crd["metadata"]["creationTimestamp"],
        }
        for t, r, m in (
            ("NamesAccepted", "NoConflicts", "no conflicts found"),
            ("Established", "InitialNamesAccepted", "the initial names have been accepted"),
        )
    ]
    stored = [v["name"] for v in spec.get("versions") or [] if v.get("storage")]
    return {
        "conditions": conditions,
        "acceptedNames": spec.get("names") or {},
        "storedVersions": stored,
    }
