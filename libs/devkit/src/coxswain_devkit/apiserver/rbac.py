"""RBAC: whether a user may make a request, from the Roles, ClusterRoles and bindings stored here.

kube-apiserver's RBAC authorizer, read from `k8s.io/kubernetes/plugin/pkg/auth/authorizer/rbac`'s
documented behaviour and written small: a request's `Attributes` (user, verb, namespace, API
group, resource, subresource, name — or a non-resource path) are allowed when some binding whose
subjects include the user refers to a role with a rule that covers them. ClusterRoleBindings
count everywhere; a RoleBinding (to a Role in its namespace, or to a ClusterRole) only for
requests in its own namespace. The privileged group `system:masters` is allowed everything
before any binding is read, as the real server's first authorizer does. Nothing is cached: the
objects are read at every decision, so a binding written is in force for the very next request.

Rule matching, as `rbac/v1` defines it:
- `verbs`, `apiGroups`: the request's, or `*`;
- `resources`: the resource, `<resource>/<subresource>` for a subresource request, `*` (every
  resource and subresource), or `*/<subresource>`;
- `resourceNames`: empty for every object, else the request must name one of them (a list or
  watch names one only through the field selector `metadata.name=<name>`; a create never does);
- `nonResourceURLs`: the path, `*`, or a prefix ending in `*`.
A ClusterRole with an `aggregationRule` has the rules of every ClusterRole its selectors match
(what the cluster's aggregation controller writes into it), evaluated at each decision.
A binding that refers to a missing role grants nothing, and the denial's reason says so.

Also here: `rules_for` (what SelfSubjectRulesReview lists), the Forbidden message kube-apiserver
writes, and `bootstrap_policy`, the default ClusterRoles and bindings every cluster starts with
that a ServiceAccount's kubectl needs (discovery, health, its own access reviews) and the admin's
cluster-admin binding.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

from coxswain_devkit.apiserver import errors
from coxswain_devkit.apiserver.auth import AUTHENTICATED, MASTERS, UNAUTHENTICATED, User
from coxswain_devkit.apiserver.store import Key, Obj, Store

GROUP = "rbac.authorization.k8s.io"
API_VERSION = f"{GROUP}/v1"
VERBS = ("get", "list", "watch", "create", "update", "patch", "delete", "deletecollection")


@dataclass(frozen=True, slots=True)
class Attributes:
    """What a request asks to do, as kube-apiserver's RequestInfo and authorizer see it."""

    user: User  # who asks
    verb: str  # get, list, watch, create, ...; for a non-resource request the lowercase method
    namespace: str = ""  # "" for cluster-scoped resources and requests across all namespaces
    group: str = ""  # the API group ("" for core)
    resource: str = ""  # e.g. "pods"; "" for a non-resource request
    subresource: str = ""  # e.g. "log", "status", "token"
    name: str = ""  # the object's name, if the request names one
    path: str = ""  # the URL path of a non-resource request (e.g. "/healthz")
    version: str = ""  # the API version asked for (only reported, never matched)
    resource_request: bool = True  # False for discovery, /healthz, /version, /openapi, ...


@dataclass(frozen=True, slots=True)
class Decision:
    allowed: bool
    reason: str = ""  # "RBAC: allowed by ..." or why nothing could allow it; "" when neither


@dataclass(frozen=True, slots=True)
class Grant:
    """One binding's role, as far as it applies to one user."""

    source: str  # e.g. 'ClusterRoleBinding "x" of ClusterRole "y" to User "alice"'
    namespace: str  # "" for a ClusterRoleBinding: its rules hold everywhere
    rules: tuple[Obj, ...] = field(default=())  # the role's (aggregated) rules


def _matches(values: list[str] | None, wanted: str) -> bool:
    return any(v in ("*", wanted) for v in values or ())


def _resource_matches(rule: Obj, attrs: Attributes) -> bool:
    combined = f"{attrs.resource}/{attrs.subresource}" if attrs.subresource else attrs.resource
    for resource in rule.get("resources") or ():
        if resource in ("*", combined):
            return True
        if attrs.subresource and resource == f"*/{attrs.subresource}":
            return True
    return False


def _url_matches(rule: Obj, path: str) -> bool:
    for url in rule.get("nonResourceURLs") or ():
        if url in ("*", path) or (url.endswith("*") and path.startswith(url[:-1])):
            return True
    return False


def rule_allows(rule: Obj, attrs: Attributes) -> bool:
    if not _matches(rule.get("verbs"), attrs.verb):
        return False
    if not attrs.resource_request:
        return _url_matches(rule, attrs.path)
    names = rule.get("resourceNames") or []
    return (
        _matches(rule.get("apiGroups"), attrs.group)
        and _resource_matches(rule, attrs)
        and (not names or attrs.name in names)
    )


def _subject(subject: Obj, default_namespace: str) -> str:
    kind, name = subject.get("kind", ""), subject.get("name", "")
    if kind == "ServiceAccount":
        return f'{kind} "{name}/{subject.get("namespace") or default_namespace}"'
    return f'{kind} "{name}"'


def _applies(subject: Obj, user: User, default_namespace: str) -> bool:
    kind, name = subject.get("kind"), subject.get("name")
    if kind == "User":
        return bool(user.name == name)
    if kind == "Group":
        return name in user.groups
    if kind == "ServiceAccount":
        namespace = subject.get("namespace") or default_namespace
        return user.service_account() == (namespace, name)
    return False


def _selected(labels: dict[str, str], selector: Obj) -> bool:
    """metav1.LabelSelector: every matchLabels pair and every matchExpressions requirement."""
    if any(labels.get(k) != v for k, v in (selector.get("matchLabels") or {}).items()):
        return False
    for expression in selector.get("matchExpressions") or ():
        key, op, values = (
            expression.get("key"),
            expression.get("operator"),
            expression.get("values") or [],
        )
        present = key in labels
        if (
            (op == "In" and not (present and labels[key] in values))
            or (op == "NotIn" and present and labels[key] in values)
            or (op == "Exists" and not present)
            or (op == "DoesNotExist" and present)
        ):
            return False
    return True


class Authorizer:
    def __init__(self, store: Store) -> None:
        self._store = store

    def _items(self, plural: str, namespace: str | None = None) -> list[Obj]:
        return self._store.items((GROUP, plural), namespace)

    def _cluster_role_rules(
        self, name: str, seen: frozenset[str] = frozenset()
    ) -> tuple[Obj, ...] | None:
        role = self._store.get(Key(GROUP, "clusterroles", "", name))
        if role is None:
            return None
        aggregation = role.get("aggregationRule")
        if not aggregation:
            return tuple(role.get("rules") or ())
        selectors = aggregation.get("clusterRoleSelectors") or []
        rules: list[Obj] = []
        for other in self._items("clusterroles"):
            other_name = other["metadata"]["name"]
            labels = other["metadata"].get("labels") or {}
            if other_name in seen | {name} or not any(_selected(labels, s) for s in selectors):
                continue
            rules.extend(self._cluster_role_rules(other_name, seen | {name}) or ())
        return tuple(rules)

    def _role_rules(self, ref: Obj, namespace: str) -> tuple[Obj, ...] | None:
        if ref.get("kind") == "ClusterRole":
            return self._cluster_role_rules(str(ref.get("name", "")))
        role = self._store.get(Key(GROUP, "roles", namespace, str(ref.get("name", ""))))
        return None if role is None else tuple(role.get("rules") or ())

    def grants(self, user: User, namespace: str) -> Iterator[Grant | str]:
        """Every binding that applies to `user` for a request in `namespace` ("" for the cluster
        scope: ClusterRoleBindings only), as a Grant, or as the error why its role is missing."""
        bindings = [("ClusterRoleBinding", b, "") for b in self._items("clusterrolebindings")]
        if namespace:
            bindings += [
                ("RoleBinding", b, namespace) for b in self._items("rolebindings", namespace)
            ]
        for kind, binding, ns in bindings:
            subject = next(
                (s for s in binding.get("subjects") or () if _applies(s, user, ns)), None
            )
            if subject is None:
                continue
            ref = binding.get("roleRef") or {}
            rules = self._role_rules(ref, ns)
            if rules is None:
                plural = "clusterrole" if ref.get("kind") == "ClusterRole" else "role"
                yield f'{plural}.{GROUP} "{ref.get("name", "")}" not found'
                continue
            name = binding["metadata"]["name"] + (f"/{ns}" if ns else "")
            role = f'{ref.get("kind")} "{ref.get("name")}"'
            source = f'{kind} "{name}" of {role} to {_subject(subject, ns)}'
            yield Grant(source, ns, rules)

    def authorize(self, attrs: Attributes) -> Decision:
        if MASTERS in attrs.user.groups:
            return Decision(True)
        missing = []
        for grant in self.grants(attrs.user, attrs.namespace):
            if isinstance(grant, str):
                missing.append(grant)
            elif any(rule_allows(rule, attrs) for rule in grant.rules):
                return Decision(True, f"RBAC: allowed by {grant.source}")
        if not missing:
            return Decision(False)
        # utilerrors.NewAggregate's text: one error bare, several in brackets.
        listed = missing[0] if len(missing) == 1 else f"[{', '.join(missing)}]"
        return Decision(False, f"RBAC: {listed}")

    def rules_for(self, user: User, namespace: str) -> tuple[list[Obj], list[Obj], list[str]]:
        """What SelfSubjectRulesReview lists: resource rules, non-resource rules, and errors."""
        resource_rules: list[Obj] = []
        url_rules: list[Obj] = []
        missing: list[str] = []
        for grant in self.grants(user, namespace):
            if isinstance(grant, str):
                missing.append(grant)
                continue
            for rule in grant.rules:
                if rule.get("nonResourceURLs"):
                    if not grant.namespace:  # only cluster-wide bindings grant URLs
                        url_rules.append(_url_rule(rule))
                else:
                    resource_rules.append(_resource_rule(rule))
        return resource_rules, url_rules, missing


def _resource_rule(rule: Obj) -> Obj:
    kept = {
        k: list(rule.get(k) or []) for k in ("verbs", "apiGroups", "resources", "resourceNames")
    }
    return {k: v for k, v in kept.items() if v or k == "verbs"}


def _url_rule(rule: Obj) -> Obj:
    return {
        "verbs": list(rule.get("verbs") or []),
        "nonResourceURLs": list(rule["nonResourceURLs"]),
    }


def forbidden(attrs: Attributes, reason: str) -> errors.ApiError:
    """403 with the Status kube-apiserver writes (responsewriters.Forbidden, NewForbidden)."""
    user = f'User "{attrs.user.name}"'
    if not attrs.resource_request:
        message = f'forbidden: {user} cannot {attrs.verb} path "{attrs.path}"'
        details = errors.StatusDetails()
    else:
        resource = f"{attrs.resource}/{attrs.subresource}" if attrs.subresource else attrs.resource
        where = (
            f'in the namespace "{attrs.namespace}"' if attrs.namespace else "at the cluster scope"
        )
        denied = (
            f'{user} cannot {attrs.verb} resource "{resource}" in API group "{attrs.group}" {where}'
        )
        qualified = f"{attrs.resource}.{attrs.group}" if attrs.group else attrs.resource
        subject = f'{qualified} "{attrs.name}"' if attrs.name else qualified
        message = f"{subject} is forbidden: {denied}"
        details = errors.StatusDetails(name=attrs.name, group=attrs.group, kind=attrs.resource)
    if reason:
        message = f"{message}: {reason}"
    return errors.ApiError(403, "Forbidden", message, details=details)


# The default policy (kube-apiserver's bootstrap policy, the part a ServiceAccount's kubectl and
# the admin need): ClusterRole name -> (rules, the groups its same-named binding grants it to).
_DISCOVERY_URLS = [
    "/api",
    "/api/*",
    "/apis",
    "/apis/*",
    "/healthz",
    "/livez",
    "/openapi",
    "/openapi/*",
    "/readyz",
    "/version",
    "/version/",
]
_BOOTSTRAP: dict[str, tuple[list[Obj], list[str]]] = {
    "cluster-admin": (
        [
            {"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]},
            {"nonResourceURLs": ["*"], "verbs": ["*"]},
        ],
        [MASTERS],
    ),
    "system:discovery": ([{"nonResourceURLs": _DISCOVERY_URLS, "verbs": ["get"]}], [AUTHENTICATED]),
    "system:basic-user": (
        [
            {
                "apiGroups": ["authorization.k8s.io"],
                "resources": ["selfsubjectaccessreviews", "selfsubjectrulesreviews"],
                "verbs": ["create"],
            },
            {
                "apiGroups": ["authentication.k8s.io"],
                "resources": ["selfsubjectreviews"],
                "verbs": ["create"],
            },
        ],
        [AUTHENTICATED],
    ),
    "system:public-info-viewer": (
        [
            {
                "nonResourceURLs": ["/healthz", "/livez", "/readyz", "/version", "/version/"],
                "verbs": ["get"],
            }
        ],
        [AUTHENTICATED, UNAUTHENTICATED],
    ),
}
_BOOTSTRAP_META: Obj = {
    "labels": {"kubernetes.io/bootstrapping": "rbac-defaults"},
    "annotations": {"rbac.authorization.kubernetes.io/autoupdate": "true"},
}


def bootstrap_policy() -> list[Obj]:
    """The default ClusterRoles and their ClusterRoleBindings, as objects to create."""
    objects: list[Obj] = []
    for name, (rules, groups) in _BOOTSTRAP.items():
        meta = {"name": name, **_BOOTSTRAP_META}
        objects.append(
            {"apiVersion": API_VERSION, "kind": "ClusterRole", "metadata": meta, "rules": rules}
        )
        objects.append(
            {
                "apiVersion": API_VERSION,
                "kind": "ClusterRoleBinding",
                "metadata": dict(meta),
                "roleRef": {"apiGroup": GROUP, "kind": "ClusterRole", "name": name},
                "subjects": [{"apiGroup": GROUP, "kind": "Group", "name": g} for g in groups],
            }
        )
    return objects
