"""RBAC decisions from stored roles and bindings, without HTTP.

Covers each rule field (verbs, apiGroups, resources with subresources and `*/<sub>`, the `*`
wildcards, resourceNames, nonResourceURLs with a trailing `*`), where bindings hold (a
ClusterRoleBinding everywhere; a RoleBinding to a Role or a ClusterRole only in its own
namespace; nothing namespaced at the cluster scope), every subject kind (User, Group, and a
ServiceAccount with and without a namespace in a RoleBinding), system:masters allowed without
any binding, aggregated ClusterRoles, a binding to a missing role (denied, the reason naming the
role), the allow reason naming binding, role and subject, the bootstrap policy, and the rules
SelfSubjectRulesReview lists. The HTTP side (401, 403 bodies, reviews, impersonation) is in
access_test.py; kubectl in rbac_kubectl_test.py.
"""

from __future__ import annotations

from typing import Any

import pytest

from coxswain_devkit.apiserver import ApiServer
from coxswain_devkit.apiserver.auth import ADMIN, User
from coxswain_devkit.apiserver.rbac import Attributes, bootstrap_policy

RBAC = "rbac.authorization.k8s.io/v1"
# Without system:authenticated, so the bootstrap policy's discovery rules do not grant her URLs.
ALICE = User("alice", groups=("devs",))
PROXY = User(
    "system:serviceaccount:shop:proxy",
    groups=("system:serviceaccounts", "system:serviceaccounts:shop", "system:authenticated"),
)


def _role(name: str, rules: list[dict[str, Any]], namespace: str = "") -> dict[str, Any]:
    kind = "Role" if namespace else "ClusterRole"
    meta: dict[str, Any] = {"name": name, **({"namespace": namespace} if namespace else {})}
    return {"apiVersion": RBAC, "kind": kind, "metadata": meta, "rules": rules}


def _binding(
    name: str, role_kind: str, role: str, subjects: list[dict[str, Any]], namespace: str = ""
) -> dict[str, Any]:
    kind = "RoleBinding" if namespace else "ClusterRoleBinding"
    meta: dict[str, Any] = {"name": name, **({"namespace": namespace} if namespace else {})}
    return {
        "apiVersion": RBAC,
        "kind": kind,
        "metadata": meta,
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": role_kind, "name": role},
        "subjects": subjects,
    }


def _user(name: str) -> dict[str, Any]:
    return {"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": name}


@pytest.fixture
def server() -> ApiServer:
    server = ApiServer(rbac=True)
    server.apply(
        [
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": n}}
            for n in ("shop", "other")
        ]
    )
    return server


def _allowed(server: ApiServer, user: User, verb: str, resource: str = "", **kw: Any) -> bool:
    return server.access.authorize(Attributes(user, verb, resource=resource, **kw)).allowed


def _grant(server: ApiServer, rules: list[dict[str, Any]], user: str = "alice") -> None:
    server.apply([_role("r", rules), _binding("b", "ClusterRole", "r", [_user(user)])])


@pytest.mark.parametrize(
    ("rule", "request_", "allowed"),
    [
        pytest.param(
            {"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]},
            {"verb": "get", "resource": "pods", "namespace": "shop", "name": "p"},
            True,
            id="exact",
        ),
        pytest.param(
            {"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]},
            {"verb": "list", "resource": "pods", "namespace": "shop"},
            False,
            id="other-verb",
        ),
        pytest.param(
            {"apiGroups": ["apps"], "resources": ["pods"], "verbs": ["get"]},
            {"verb": "get", "resource": "pods", "namespace": "shop"},
            False,
            id="other-group",
        ),
        pytest.param(
            {"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]},
            {
                "verb": "deletecollection",
                "group": "apps",
                "resource": "deployments",
                "namespace": "shop",
            },
            True,
            id="wildcards",
        ),
        pytest.param(
            {"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]},
            {"verb": "get", "resource": "pods", "subresource": "log", "namespace": "shop"},
            False,
            id="resource-does-not-cover-its-subresource",
        ),
        pytest.param(
            {"apiGroups": [""], "resources": ["pods/log"], "verbs": ["get"]},
            {"verb": "get", "resource": "pods", "subresource": "log", "namespace": "shop"},
            True,
            id="subresource",
        ),
        pytest.param(
            {"apiGroups": [""], "resources": ["pods/log"], "verbs": ["get"]},
            {"verb": "get", "resource": "pods", "namespace": "shop"},
            False,
            id="subresource-does-not-cover-the-resource",
        ),
        pytest.param(
            {"apiGroups": ["apps"], "resources": ["*/status"], "verbs": ["update"]},
            {"verb": "update", "group": "apps", "resource": "deployments", "subresource": "status"},
            True,
            id="any-resources-subresource",
        ),
        pytest.param(
            {"apiGroups": ["*"], "resources": ["*"], "verbs": ["create"]},
            {
                "verb": "create",
                "resource": "serviceaccounts",
                "subresource": "token",
                "namespace": "shop",
            },
            True,
            id="star-covers-subresources",
        ),
        pytest.param(
            {
                "apiGroups": [""],
                "resources": ["secrets"],
                "verbs": ["get"],
                "resourceNames": ["ca"],
            },
            {"verb": "get", "resource": "secrets", "namespace": "shop", "name": "ca"},
            True,
            id="resource-name",
        ),
        pytest.param(
            {
                "apiGroups": [""],
                "resources": ["secrets"],
                "verbs": ["get"],
                "resourceNames": ["ca"],
            },
            {"verb": "get", "resource": "secrets", "namespace": "shop", "name": "other"},
            False,
            id="other-resource-name",
        ),
        pytest.param(
            {
                "apiGroups": [""],
                "resources": ["secrets"],
                "verbs": ["list"],
                "resourceNames": ["ca"],
            },
            {"verb": "list", "resource": "secrets", "namespace": "shop"},
            False,
            id="resource-names-never-cover-an-unnamed-list",
        ),
        pytest.param(
            {"nonResourceURLs": ["/healthz"], "verbs": ["get"]},
            {"verb": "get", "path": "/healthz", "resource_request": False},
            True,
            id="url",
        ),
        pytest.param(
            {"nonResourceURLs": ["/apis/*"], "verbs": ["get"]},
            {"verb": "get", "path": "/apis/apps/v1", "resource_request": False},
            True,
            id="url-prefix",
        ),
        pytest.param(
            {"nonResourceURLs": ["/apis/*"], "verbs": ["get"]},
            {"verb": "get", "path": "/api", "resource_request": False},
            False,
            id="url-outside-the-prefix",
        ),
        pytest.param(
            {"apiGroups": ["*"], "resources": ["*"], "verbs": ["get"]},
            {"verb": "get", "path": "/healthz", "resource_request": False},
            False,
            id="resource-rules-grant-no-urls",
        ),
    ],
)
def test_rules(
    server: ApiServer, rule: dict[str, Any], request_: dict[str, Any], allowed: bool
) -> None:
    _grant(server, [rule])
    assert _allowed(server, ALICE, **request_) is allowed


def test_nothing_is_allowed_without_a_binding(server: ApiServer) -> None:
    assert not _allowed(server, ALICE, "get", "pods", namespace="shop")
    assert not _allowed(server, PROXY, "list", "secrets", namespace="shop")


def test_system_masters_need_no_binding(server: ApiServer) -> None:
    assert _allowed(server, ADMIN, "delete", "namespaces", name="shop")
    assert _allowed(server, User("root", groups=("system:masters",)), "escalate", "clusterroles")


@pytest.mark.parametrize(
    ("binding", "where", "allowed"),
    [
        pytest.param(
            _binding("b", "ClusterRole", "read", [_user("alice")]),
            "shop",
            True,
            id="cluster-binding-in-a-namespace",
        ),
        pytest.param(
            _binding("b", "ClusterRole", "read", [_user("alice")]),
            "",
            True,
            id="cluster-binding-at-cluster-scope",
        ),
        pytest.param(
            _binding("b", "ClusterRole", "read", [_user("alice")], "shop"),
            "shop",
            True,
            id="role-binding-to-cluster-role",
        ),
        pytest.param(
            _binding("b", "ClusterRole", "read", [_user("alice")], "shop"),
            "other",
            False,
            id="role-binding-elsewhere",
        ),
        pytest.param(
            _binding("b", "ClusterRole", "read", [_user("alice")], "shop"),
            "",
            False,
            id="role-binding-not-cluster-wide",
        ),
        pytest.param(
            _binding("b", "Role", "read", [_user("alice")], "shop"),
            "shop",
            True,
            id="role-binding-to-its-role",
        ),
        pytest.param(
            _binding("b", "Role", "read", [_user("alice")], "other"),
            "other",
            False,
            id="role-in-another-namespace",
        ),
        pytest.param(
            _binding("b", "ClusterRole", "read", [{"kind": "Group", "name": "devs"}]),
            "shop",
            True,
            id="group",
        ),
        pytest.param(
            _binding("b", "ClusterRole", "read", [{"kind": "Group", "name": "ops"}]),
            "shop",
            False,
            id="other-group",
        ),
        pytest.param(
            _binding("b", "ClusterRole", "read", [_user("bob")]), "shop", False, id="other-user"
        ),
    ],
)
def test_where_bindings_hold(
    server: ApiServer, binding: dict[str, Any], where: str, allowed: bool
) -> None:
    rules = [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]}]
    server.apply([_role("read", rules), _role("read", rules, "shop"), binding])
    assert _allowed(server, ALICE, "get", "configmaps", namespace=where, name="c") is allowed


@pytest.mark.parametrize(
    ("subject", "allowed"),
    [
        pytest.param(
            {"kind": "ServiceAccount", "name": "proxy", "namespace": "shop"}, True, id="sa"
        ),
        pytest.param(
            {"kind": "ServiceAccount", "name": "proxy"},
            True,
            id="sa-defaults-to-the-bindings-namespace",
        ),
        pytest.param(
            {"kind": "ServiceAccount", "name": "proxy", "namespace": "other"},
            False,
            id="same-name-other-namespace",
        ),
        pytest.param(
            {"kind": "User", "name": "system:serviceaccount:shop:proxy"},
            True,
            id="sa-by-its-username",
        ),
        pytest.param(
            {"kind": "Group", "name": "system:serviceaccounts:shop"}, True, id="sa-namespace-group"
        ),
    ],
)
def test_service_account_subjects(
    server: ApiServer, subject: dict[str, Any], allowed: bool
) -> None:
    rules = [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]}]
    server.apply([_role("read", rules, "shop"), _binding("b", "Role", "read", [subject], "shop")])
    assert _allowed(server, PROXY, "get", "configmaps", namespace="shop") is allowed


def test_reasons_name_the_binding_or_the_missing_role(server: ApiServer) -> None:
    rules = [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]}]
    sa = {"kind": "ServiceAccount", "name": "proxy", "namespace": "shop"}
    server.apply([_role("read", rules, "shop"), _binding("b", "Role", "read", [sa], "shop")])
    decision = server.access.authorize(Attributes(PROXY, "get", "shop", "", "configmaps"))
    assert (
        decision.reason
        == 'RBAC: allowed by RoleBinding "b/shop" of Role "read" to ServiceAccount "proxy/shop"'
    )
    server.apply([_binding("gone", "ClusterRole", "nowhere", [sa])])
    decision = server.access.authorize(Attributes(PROXY, "list", "shop", "", "pods"))
    assert not decision.allowed
    assert decision.reason == 'RBAC: clusterrole.rbac.authorization.k8s.io "nowhere" not found'


def test_aggregated_cluster_roles(server: ApiServer) -> None:
    label = {"coxswain-labs.dev/aggregate-to-viewer": "true"}
    routes = _role(
        "routes",
        [
            {
                "apiGroups": ["gateway.networking.k8s.io"],
                "resources": ["httproutes"],
                "verbs": ["get"],
            }
        ],
    )
    routes["metadata"]["labels"] = label
    viewer = _role("viewer", [])
    viewer["aggregationRule"] = {"clusterRoleSelectors": [{"matchLabels": label}]}
    unlabelled = _role("secrets", [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]}])
    server.apply(
        [routes, viewer, unlabelled, _binding("b", "ClusterRole", "viewer", [_user("alice")])]
    )
    assert _allowed(
        server, ALICE, "get", "httproutes", group="gateway.networking.k8s.io", namespace="shop"
    )
    assert not _allowed(server, ALICE, "get", "secrets", namespace="shop")
    # A role labelled later joins at once: the aggregation is read at each decision.
    unlabelled["metadata"]["labels"] = label
    server.apply([unlabelled])
    assert _allowed(server, ALICE, "get", "secrets", namespace="shop")


def test_bootstrap_policy_lets_every_authenticated_user_discover(server: ApiServer) -> None:
    names = {o["metadata"]["name"] for o in bootstrap_policy()}
    assert names == {
        "cluster-admin",
        "system:discovery",
        "system:basic-user",
        "system:public-info-viewer",
    }
    for path in ("/api", "/apis/apps/v1", "/version", "/healthz", "/openapi/v3"):
        assert _allowed(server, PROXY, "get", path=path, resource_request=False), path
    assert _allowed(
        server, PROXY, "create", "selfsubjectaccessreviews", group="authorization.k8s.io"
    )
    assert not _allowed(
        server, PROXY, "create", "subjectaccessreviews", group="authorization.k8s.io"
    )
    assert not _allowed(server, PROXY, "post", path="/api", resource_request=False)


def test_rules_for_lists_what_applies_in_a_namespace(server: ApiServer) -> None:
    server.apply(
        [
            _role(
                "read",
                [
                    {
                        "apiGroups": [""],
                        "resources": ["configmaps"],
                        "verbs": ["get"],
                        "resourceNames": ["c"],
                    }
                ],
                "shop",
            ),
            _binding("b", "Role", "read", [_user("alice")], "shop"),
        ]
    )
    alice = User("alice", groups=("system:authenticated",))
    resources, urls, missing = server.access.authorizer.rules_for(alice, "shop")
    assert {
        "verbs": ["get"],
        "apiGroups": [""],
        "resources": ["configmaps"],
        "resourceNames": ["c"],
    } in resources
    assert {
        "verbs": ["get"],
        "nonResourceURLs": ["/healthz", "/livez", "/readyz", "/version", "/version/"],
    } in urls
    assert missing == []
    elsewhere, _, _ = server.access.authorizer.rules_for(alice, "other")
    assert all(r["resources"] != ["configmaps"] for r in elsewhere)
