"""Which resources the emulator serves: the built-in kinds plus every served CRD version.

Every request starts here: the URL names (group, version, plural) and the registry answers with
the `Kind` that says whether it is namespaced, has a status subresource, and which verbs it
allows. Applying a CustomResourceDefinition registers its served versions; deleting it
unregisters them, which is how the Gateway API kinds appear and disappear (the controller's
Ingress-only mode probes for them). Objects are stored per (group, plural), so every served
version of a resource sees the same objects: conversion is the identity, as a CRD's "None"
strategy makes it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from coxswain_devkit.apiserver.columns import PrinterColumn, printer_columns

READ_WRITE = ("create", "delete", "deletecollection", "get", "list", "patch", "update", "watch")


@dataclass(frozen=True, slots=True)
class Kind:
    group: str  # the API group; "" for the core group
    version: str  # the served version, e.g. "v1"
    kind: str  # the object kind, e.g. "ConfigMap"
    plural: str  # the resource name in URLs, e.g. "configmaps"
    singular: str  # e.g. "configmap"
    namespaced: bool  # namespaced, or cluster-scoped
    short_names: tuple[str, ...] = ()  # kubectl's aliases, e.g. ("cm",)
    status: bool = False  # whether it has the /status subresource
    builtin: bool = True  # built-in kinds accept strategic merge patch; custom ones do not
    verbs: tuple[str, ...] = READ_WRITE  # the verbs discovery advertises and handlers allow
    subresources: tuple[str, ...] = field(default=())  # others besides status: "log", "token"
    categories: tuple[str, ...] = ()  # kubectl's `get all` and friends
    # A deprecated CRD version's warning, sent with every answer at that version (as the
    # server's `Warning: 299` header; kubectl prints it); "" when the version is not deprecated.
    deprecation: str = ""
    # A CRD version's additionalPrinterColumns (or the Age column defaulted for it); () for
    # built-in kinds, which `columns` prints by kind.
    printer_columns: tuple[PrinterColumn, ...] = ()

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def resource(self) -> tuple[str, str]:
        """The storage identity shared by all versions: (group, plural)."""
        return (self.group, self.plural)


def _k(
    group: str, version: str, kind: str, plural: str, *, namespaced: bool = True, **kw: Any
) -> Kind:
    return Kind(group, version, kind, plural, kind.lower(), namespaced, **kw)


BUILTIN: tuple[Kind, ...] = (
    _k("", "v1", "Namespace", "namespaces", namespaced=False, short_names=("ns",), status=True),
    _k("", "v1", "Service", "services", short_names=("svc",), status=True, categories=("all",)),
    _k("", "v1", "Secret", "secrets"),
    _k("", "v1", "ConfigMap", "configmaps", short_names=("cm",)),
    _k("", "v1", "ServiceAccount", "serviceaccounts", short_names=("sa",), subresources=("token",)),
    _k(
        "",
        "v1",
        "Pod",
        "pods",
        short_names=("po",),
        status=True,
        subresources=("log",),
        categories=("all",),
    ),
    _k("", "v1", "Event", "events", short_names=("ev",)),
    # Registered by the devkit node agent; its kubeletEndpoint serves the node's pods' logs.
    _k("", "v1", "Node", "nodes", namespaced=False, short_names=("no",), status=True),
    _k("events.k8s.io", "v1", "Event", "events", short_names=("ev",)),
    _k("discovery.k8s.io", "v1", "EndpointSlice", "endpointslices"),
    _k(
        "apps",
        "v1",
        "Deployment",
        "deployments",
        short_names=("deploy",),
        status=True,
        subresources=("scale",),
        categories=("all",),
    ),
    _k("networking.k8s.io", "v1", "Ingress", "ingresses", short_names=("ing",), status=True),
    _k("networking.k8s.io", "v1", "IngressClass", "ingressclasses", namespaced=False),
    _k("coordination.k8s.io", "v1", "Lease", "leases"),
    # Stored and served only: nothing evicts Pods here, so nothing reads them but kubectl.
    _k(
        "policy",
        "v1",
        "PodDisruptionBudget",
        "poddisruptionbudgets",
        short_names=("pdb",),
        status=True,
    ),
    _k(
        "authentication.k8s.io",
        "v1",
        "TokenReview",
        "tokenreviews",
        namespaced=False,
        verbs=("create",),
    ),
    _k(
        "authentication.k8s.io",
        "v1",
        "SelfSubjectReview",
        "selfsubjectreviews",
        namespaced=False,
        verbs=("create",),
    ),
    # RBAC (enforced with ApiServer(rbac=True); see access.py) and the reviews answered from it.
    _k("rbac.authorization.k8s.io", "v1", "Role", "roles"),
    _k("rbac.authorization.k8s.io", "v1", "RoleBinding", "rolebindings"),
    _k("rbac.authorization.k8s.io", "v1", "ClusterRole", "clusterroles", namespaced=False),
    _k(
        "rbac.authorization.k8s.io",
        "v1",
        "ClusterRoleBinding",
        "clusterrolebindings",
        namespaced=False,
    ),
    *(
        _k("authorization.k8s.io", "v1", kind, f"{kind.lower()}s", namespaced=ns, verbs=("create",))
        for kind, ns in (
            ("SubjectAccessReview", False),
            ("LocalSubjectAccessReview", True),
            ("SelfSubjectAccessReview", False),
            ("SelfSubjectRulesReview", False),
        )
    ),
    _k(
        "apiextensions.k8s.io",
        "v1",
        "CustomResourceDefinition",
        "customresourcedefinitions",
        namespaced=False,
        short_names=("crd", "crds"),
        status=True,
    ),
)

_VERSION_RE = re.compile(r"^v(\d+)(?:(alpha|beta)(\d+))?$")


def version_priority(version: str) -> tuple[int, int, int]:
    """Kubernetes' version order: GA before beta before alpha, higher numbers first."""
    m = _VERSION_RE.match(version)
    if m is None:
        return (-1, 0, 0)
    stage = {"alpha": 0, "beta": 1, None: 2}[m.group(2)]
    return (stage, int(m.group(1)), int(m.group(3) or 0))


def crd_kinds(crd: dict[str, Any]) -> list[Kind]:
    """The kinds a CustomResourceDefinition serves: one per version with `served: true`."""
    spec = crd.get("spec") or {}
    names = spec.get("names") or {}
    kinds = []
    for version in spec.get("versions") or []:
        if not version.get("served", True):
            continue
        kinds.append(
            Kind(
                group=spec.get("group", ""),
                version=version.get("name", ""),
                kind=names.get("kind", ""),
                plural=names.get("plural", ""),
                singular=names.get("singular") or names.get("kind", "").lower(),
                namespaced=spec.get("scope", "Namespaced") == "Namespaced",
                short_names=tuple(names.get("shortNames") or ()),
                status="status" in (version.get("subresources") or {}),
                builtin=False,
                categories=tuple(names.get("categories") or ()),
                deprecation=_deprecation(spec, version),
                printer_columns=printer_columns(version),
            )
        )
    return kinds


def _deprecation(spec: dict[str, Any], version: dict[str, Any]) -> str:
    """apiextensions.k8s.io/v1: "deprecationWarning overrides the default warning returned to
    API clients"; the default names the group, version and kind as deprecated."""
    if not version.get("deprecated"):
        return ""
    kind = (spec.get("names") or {}).get("kind", "")
    default = f"{spec.get('group', '')}/{version.get('name', '')} {kind} is deprecated"
    return str(version.get("deprecationWarning") or default)


class Registry:
    """The served kinds, keyed by (group, version, plural); CRD kinds keyed also by CRD name."""

    def __init__(self) -> None:
        self._kinds: dict[tuple[str, str, str], Kind] = {
            (k.group, k.version, k.plural): k for k in BUILTIN
        }
        self._by_crd: dict[str, list[Kind]] = {}

    def lookup(self, group: str, version: str, plural: str) -> Kind | None:
        return self._kinds.get((group, version, plural))

    def preferred(self, group: str, plural: str) -> Kind | None:
        """The kind for (group, plural) at its group's preferred version."""
        candidates = [k for k in self._kinds.values() if k.resource == (group, plural)]
        return max(candidates, key=lambda k: version_priority(k.version), default=None)

    def by_kind(self, api_version: str, kind: str) -> Kind | None:
        group, _, version = api_version.rpartition("/")
        return next(
            (
                k
                for k in self._kinds.values()
                if (k.group, k.version, k.kind) == (group, version, kind)
            ),
            None,
        )

    def kinds(self) -> Iterable[Kind]:
        return self._kinds.values()

    def groups(self) -> dict[str, list[str]]:
        """Each group's served versions, preferred first (core group under "")."""
        versions: dict[str, set[str]] = {}
        for k in self._kinds.values():
            versions.setdefault(k.group, set()).add(k.version)
        return {g: sorted(v, key=version_priority, reverse=True) for g, v in versions.items()}

    def in_group_version(self, group: str, version: str) -> list[Kind]:
        return [k for k in self._kinds.values() if (k.group, k.version) == (group, version)]

    def is_served(self, group: str, plural: str) -> bool:
        return self.preferred(group, plural) is not None

    def owner_of(self, group: str, plural: str) -> str | None:
        """The CRD that defines (group, plural), if it is a custom resource."""
        for name, kinds in self._by_crd.items():
            if any(k.resource == (group, plural) for k in kinds):
                return name
        return None

    def register_crd(self, name: str, kinds: list[Kind]) -> None:
        self.unregister_crd(name)
        self._by_crd[name] = kinds
        for k in kinds:
            self._kinds[(k.group, k.version, k.plural)] = k

    def unregister_crd(self, name: str) -> list[Kind]:
        kinds = self._by_crd.pop(name, [])
        for k in kinds:
            self._kinds.pop((k.group, k.version, k.plural), None)
        return kinds
