"""RBAC enforced over HTTP, with real ServiceAccount tokens and the real `kubernetes` client.

Covers, with `rbac=True`: the admin (no credentials) allowed everything; a token with no
bindings refused with kube-apiserver's 403 Status (reason, message naming user, verb, resource,
group and namespace or the cluster scope, details) and a Namespace read being a request in that
namespace; a Role and RoleBinding written through the API in force at once, in their namespace
only; each verb (get, list, watch, create, update, patch, delete, deletecollection) mapped from
its method; subresources (`pods/log`, `deployments/status`, `serviceaccounts/token`) granted
apart from their resource; resourceNames for get and for a watch naming one object through its
field selector; 401 for a forged, an expired and a wrong-audience token, for another scheme
and for a deleted ServiceAccount's token; a kubeconfig carrying a token
(`write_kubeconfig(token=...)`); user tokens with groups; impersonation headers (allowed for the
admin, 403 for a token without `impersonate`, 400 for groups without a user);
SubjectAccessReview (a virtual resource, as the controller's operator API asks),
LocalSubjectAccessReview, SelfSubjectAccessReview, SelfSubjectRulesReview and SelfSubjectReview,
and their 422s. Without `rbac`, a token is allowed everything and every
review says allowed. kubectl is in rbac_kubectl_test.py; the rule matching in rbac_test.py.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import kubernetes
import pytest
from kubernetes.client import ApiException

from coxswain_devkit.apiserver import ThreadedApiServer
from coxswain_devkit.apiserver.conftest import FakeClock

RBAC = "rbac.authorization.k8s.io"
SA_USER = "system:serviceaccount:shop:app"
Client = Callable[..., Any]


@pytest.fixture
def api(clock: FakeClock) -> Iterator[ThreadedApiServer]:
    with ThreadedApiServer(clock=clock, rbac=True) as server:
        server.call(
            lambda s: s.apply(
                [
                    {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "shop"}},
                    {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "other"}},
                    {
                        "apiVersion": "v1",
                        "kind": "ServiceAccount",
                        "metadata": {"name": "app", "namespace": "shop"},
                    },
                ]
            )
        )
        yield server


def _api(cls: Any, client: Any) -> Any:
    """A typed client API as Any, as the other tests hold them."""
    return cls(client)


def _token(api: ThreadedApiServer, audiences: list[str] | None = None) -> str:
    spec = {"audiences": audiences} if audiences else {}
    answer = api.call(lambda s: s.tokens.request("shop", "app", {"spec": spec}))
    return str(answer["status"]["token"])


@pytest.fixture
def connect(api: ThreadedApiServer) -> Iterator[Client]:
    """`connect(token=..., headers=...)`: an ApiClient sending that bearer token and headers."""
    opened: list[Any] = []

    def make(token: str = "", headers: dict[str, str] | None = None) -> Any:
        config = kubernetes.client.Configuration(host=api.url)
        if token:
            config.api_key = {"authorization": token}
            config.api_key_prefix = {"authorization": "Bearer"}
        client: Any = kubernetes.client.ApiClient(config)
        for name, value in (headers or {}).items():
            client.set_default_header(name, value)
        opened.append(client)
        return client

    yield make
    for client in opened:
        client.close()


@pytest.fixture
def app(api: ThreadedApiServer, connect: Client) -> Any:
    """The CoreV1Api of the ServiceAccount shop/app."""
    return _api(kubernetes.client.CoreV1Api, connect(_token(api)))


def _grant(core: Any, rules: list[dict[str, Any]], namespace: str = "shop") -> None:
    """As the admin: a Role with `rules` in `namespace`, bound to shop/app."""
    rbac = _api(kubernetes.client.RbacAuthorizationV1Api, core.api_client)
    rbac.create_namespaced_role(namespace, {"metadata": {"name": "r"}, "rules": rules})
    rbac.create_namespaced_role_binding(
        namespace,
        {
            "metadata": {"name": "r"},
            "roleRef": {"apiGroup": RBAC, "kind": "Role", "name": "r"},
            "subjects": [{"kind": "ServiceAccount", "name": "app", "namespace": "shop"}],
        },
    )


def _refused(call: Callable[[], Any]) -> dict[str, Any]:
    with pytest.raises(ApiException) as raised:
        call()
    body: dict[str, Any] = json.loads(raised.value.body or "{}")
    assert raised.value.status == body["code"]
    return body


def test_the_admin_needs_no_token(core: Any) -> None:
    core.create_namespaced_config_map("shop", {"metadata": {"name": "c"}})
    assert core.list_namespaced_secret("shop").items == []
    assert core.read_namespace("kube-system").metadata.name == "kube-system"


def test_a_token_without_bindings_is_forbidden(app: Any) -> None:
    body = _refused(lambda: app.list_namespaced_pod("shop"))
    assert body == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": f'pods is forbidden: User "{SA_USER}" cannot list resource "pods" in API group '
        '"" in the namespace "shop"',
        "reason": "Forbidden",
        "details": {"name": "", "group": "", "kind": "pods"},
        "code": 403,
    }
    body = _refused(lambda: app.list_namespace())
    assert body["message"].endswith(
        'cannot list resource "namespaces" in API group "" at the cluster scope'
    )
    body = _refused(lambda: app.read_namespace("shop"))
    assert body["message"] == (
        f'namespaces "shop" is forbidden: User "{SA_USER}" cannot get resource "namespaces" in '
        'API group "" in the namespace "shop"'
    )
    assert body["details"] == {"name": "shop", "group": "", "kind": "namespaces"}


def test_a_role_binding_grants_in_its_namespace_only(core: Any, app: Any) -> None:
    _grant(core, [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list"]}])
    core.create_namespaced_config_map("shop", {"metadata": {"name": "c"}})
    assert [c.metadata.name for c in app.list_namespaced_config_map("shop").items] == ["c"]
    assert app.read_namespaced_config_map("c", "shop").metadata.name == "c"
    assert _refused(lambda: app.list_namespaced_config_map("other"))["code"] == 403
    body = _refused(lambda: app.list_config_map_for_all_namespaces())
    assert "at the cluster scope" in body["message"]
    body = _refused(lambda: app.delete_namespaced_config_map("c", "shop"))
    assert body["message"].startswith(
        f'configmaps "c" is forbidden: User "{SA_USER}" cannot delete'
    )


@pytest.mark.parametrize(
    ("verb", "call"),
    [
        pytest.param("get", lambda c: c.read_namespaced_config_map("c", "shop"), id="get"),
        pytest.param("list", lambda c: c.list_namespaced_config_map("shop"), id="list"),
        pytest.param(
            "watch",
            lambda c: c.list_namespaced_config_map(
                "shop", watch=True, timeout_seconds=0, _preload_content=False
            ).read(),
            id="watch",
        ),
        pytest.param(
            "create",
            lambda c: c.create_namespaced_config_map("shop", {"metadata": {"name": "d"}}),
            id="create",
        ),
        pytest.param(
            "update",
            lambda c: c.replace_namespaced_config_map(
                "c", "shop", {"metadata": {"name": "c"}, "data": {"k": "v"}}
            ),
            id="update",
        ),
        pytest.param(
            "patch",
            lambda c: c.patch_namespaced_config_map("c", "shop", {"data": {"k": "v"}}),
            id="patch",
        ),
        pytest.param("delete", lambda c: c.delete_namespaced_config_map("c", "shop"), id="delete"),
        pytest.param(
            "deletecollection",
            lambda c: c.delete_collection_namespaced_config_map("shop"),
            id="deletecollection",
        ),
    ],
)
def test_each_verb_needs_its_own_grant(
    core: Any, app: Any, verb: str, call: Callable[[Any], Any]
) -> None:
    core.create_namespaced_config_map("shop", {"metadata": {"name": "c"}})
    others = [
        v
        for v in ("get", "list", "watch", "create", "update", "patch", "delete", "deletecollection")
        if v != verb
    ]
    _grant(core, [{"apiGroups": [""], "resources": ["configmaps"], "verbs": others}])
    body = _refused(lambda: call(app))
    assert f'cannot {verb} resource "configmaps"' in body["message"]
    rbac = _api(kubernetes.client.RbacAuthorizationV1Api, core.api_client)
    rbac.patch_namespaced_role(
        "r", "shop", {"rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": [verb]}]}
    )
    call(app)  # in force at the next request


def test_subresources_are_granted_apart(
    api: ThreadedApiServer, core: Any, app: Any, connect: Client
) -> None:
    apps = _api(kubernetes.client.AppsV1Api, core.api_client)
    core.create_namespaced_pod(
        "shop", {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "i"}]}}
    )
    api.call(lambda s: s.set_pod_log("shop", "p", "hello\n"))
    deployment = {
        "metadata": {"name": "d"},
        "spec": {
            "selector": {"matchLabels": {"a": "b"}},
            "template": {
                "metadata": {"labels": {"a": "b"}},
                "spec": {"containers": [{"name": "c", "image": "i"}]},
            },
        },
    }
    apps.create_namespaced_deployment("shop", deployment)
    _grant(
        core,
        [
            {
                "apiGroups": [""],
                "resources": ["pods", "serviceaccounts"],
                "verbs": ["get", "create"],
            },
            {"apiGroups": ["apps"], "resources": ["deployments"], "verbs": ["get", "patch"]},
        ],
    )
    app_apps = _api(kubernetes.client.AppsV1Api, app.api_client)
    assert app.read_namespaced_pod("p", "shop").metadata.name == "p"
    body = _refused(lambda: app.read_namespaced_pod_log("p", "shop"))
    assert (
        'cannot get resource "pods/log" in API group "" in the namespace "shop"' in body["message"]
    )
    body = _refused(
        lambda: app_apps.patch_namespaced_deployment_status(
            "d", "shop", {"status": {"replicas": 1}}
        )
    )
    assert 'cannot patch resource "deployments/status" in API group "apps"' in body["message"]
    body = _refused(
        lambda: app.create_namespaced_service_account_token("app", "shop", {"spec": {}})
    )
    assert 'cannot create resource "serviceaccounts/token"' in body["message"]
    rbac = _api(kubernetes.client.RbacAuthorizationV1Api, core.api_client)
    rbac.patch_namespaced_role(
        "r",
        "shop",
        {
            "rules": [
                {"apiGroups": [""], "resources": ["pods/log"], "verbs": ["get"]},
                {"apiGroups": ["apps"], "resources": ["deployments/status"], "verbs": ["patch"]},
                {"apiGroups": [""], "resources": ["serviceaccounts/token"], "verbs": ["create"]},
            ]
        },
    )
    assert app.read_namespaced_pod_log("p", "shop") == "hello\n"
    assert (
        app_apps.patch_namespaced_deployment_status(
            "d", "shop", {"status": {"replicas": 1}}
        ).status.replicas
        == 1
    )
    assert app.create_namespaced_service_account_token("app", "shop", {"spec": {}}).status.token
    assert _refused(lambda: app.read_namespaced_pod("p", "shop"))["code"] == 403


def test_resource_names(core: Any, app: Any) -> None:
    for name in ("ca", "other"):
        core.create_namespaced_secret("shop", {"metadata": {"name": name}})
    _grant(
        core,
        [
            {
                "apiGroups": [""],
                "resources": ["secrets"],
                "verbs": ["get", "list", "watch"],
                "resourceNames": ["ca"],
            }
        ],
    )
    assert app.read_namespaced_secret("ca", "shop").metadata.name == "ca"
    body = _refused(lambda: app.read_namespaced_secret("other", "shop"))
    assert body["message"].startswith('secrets "other" is forbidden')
    assert _refused(lambda: app.list_namespaced_secret("shop"))["code"] == 403
    # A list or watch of one object by its field selector is a request naming it.
    listed = app.list_namespaced_secret("shop", field_selector="metadata.name=ca")
    assert [s.metadata.name for s in listed.items] == ["ca"]
    stream = app.list_namespaced_secret(
        "shop",
        field_selector="metadata.name=ca",
        watch=True,
        timeout_seconds=0,
        _preload_content=False,
    )
    assert json.loads(stream.readline())["object"]["metadata"]["name"] == "ca"
    stream.release_conn()
    assert (
        _refused(lambda: app.list_namespaced_secret("shop", field_selector="metadata.name=other"))[
            "code"
        ]
        == 403
    )


def _expired(api: ThreadedApiServer, clock: FakeClock) -> str:
    token = _token(api)
    clock.now += 3601
    return token


@pytest.mark.parametrize(
    "credential",
    [
        pytest.param(lambda api, clock: "not-a-jwt", id="garbage"),
        pytest.param(lambda api, clock: _token(api)[:-4] + "AAAA", id="forged-signature"),
        pytest.param(
            lambda api, clock: _token(api, ["coxswain-discovery"]), id="not-for-the-api-server"
        ),
        pytest.param(lambda api, clock: _expired(api, clock), id="expired"),
    ],
)
def test_tokens_that_do_not_authenticate_are_401(
    api: ThreadedApiServer, clock: FakeClock, connect: Client, credential: Callable[..., str]
) -> None:
    core = _api(kubernetes.client.CoreV1Api, connect(credential(api, clock)))
    body = _refused(lambda: core.list_namespaced_config_map("shop"))
    assert (body["code"], body["reason"], body["message"]) == (401, "Unauthorized", "Unauthorized")


def test_a_kubeconfig_with_a_token(api: ThreadedApiServer, tmp_path: Path) -> None:
    token = _token(api)
    path = api.call(lambda s: s.write_kubeconfig(tmp_path / "kubeconfig", token=token))
    client: Any = kubernetes.config.new_client_from_config(str(path))  # type: ignore[no-untyped-call]
    with client:
        core = _api(kubernetes.client.CoreV1Api, client)
        body = _refused(lambda: core.list_namespaced_secret("shop"))
        assert f'User "{SA_USER}" cannot list' in body["message"]


def test_another_scheme_is_401(connect: Client) -> None:
    core = _api(
        kubernetes.client.CoreV1Api, connect(headers={"Authorization": "Basic YWRtaW46YWRtaW4="})
    )
    assert _refused(lambda: core.list_namespaced_config_map("shop"))["code"] == 401


def test_a_deleted_service_account_token_stops_working(core: Any, app: Any) -> None:
    _grant(core, [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["list"]}])
    app.list_namespaced_config_map("shop")
    core.delete_namespaced_service_account("app", "shop")
    assert _refused(lambda: app.list_namespaced_config_map("shop"))["code"] == 401


def test_user_tokens_carry_their_groups(api: ThreadedApiServer, core: Any, connect: Client) -> None:
    token = api.call(lambda s: s.tokens.user_token("alice", ["platform"]))
    alice = _api(kubernetes.client.CoreV1Api, connect(token))
    assert "cannot list" in _refused(lambda: alice.list_namespaced_secret("shop"))["message"]
    rbac = _api(kubernetes.client.RbacAuthorizationV1Api, core.api_client)
    rbac.create_cluster_role(
        {
            "metadata": {"name": "secrets"},
            "rules": [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["list"]}],
        }
    )
    rbac.create_cluster_role_binding(
        {
            "metadata": {"name": "platform-secrets"},
            "roleRef": {"apiGroup": RBAC, "kind": "ClusterRole", "name": "secrets"},
            "subjects": [{"kind": "Group", "name": "platform", "apiGroup": RBAC}],
        }
    )
    assert alice.list_namespaced_secret("other").items == []
    whoami = _api(
        kubernetes.client.AuthenticationV1Api, alice.api_client
    ).create_self_subject_review({})
    assert whoami.status.user_info.username == "alice"
    assert whoami.status.user_info.groups == ["platform", "system:authenticated"]


def test_impersonation(api: ThreadedApiServer, core: Any, connect: Client) -> None:
    _grant(core, [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["list"]}])
    as_app = _api(kubernetes.client.CoreV1Api, connect(headers={"Impersonate-User": SA_USER}))
    assert as_app.list_namespaced_config_map("shop").items == []
    body = _refused(lambda: as_app.list_namespaced_secret("shop"))
    assert body["message"].startswith(f'secrets is forbidden: User "{SA_USER}"')
    whoami = _api(
        kubernetes.client.AuthenticationV1Api, as_app.api_client
    ).create_self_subject_review({})
    assert whoami.status.user_info.groups == [
        "system:serviceaccounts",
        "system:serviceaccounts:shop",
        "system:authenticated",
    ]
    # A ServiceAccount may not impersonate anyone without the `impersonate` verb.
    sneaky = _api(
        kubernetes.client.CoreV1Api,
        connect(_token(api), headers={"Impersonate-User": "system:admin"}),
    )
    body = _refused(lambda: sneaky.list_namespaced_secret("shop"))
    assert body["message"] == (
        f'users "system:admin" is forbidden: User "{SA_USER}" cannot impersonate resource "users" '
        'in API group "" at the cluster scope'
    )
    grouped = _api(kubernetes.client.CoreV1Api, connect(headers={"Impersonate-Group": "devs"}))
    assert _refused(lambda: grouped.list_namespaced_secret("shop"))["code"] == 400


def _sar(core: Any, spec: dict[str, Any]) -> Any:
    authz = _api(kubernetes.client.AuthorizationV1Api, core.api_client)
    return authz.create_subject_access_review({"spec": spec}).status


def test_subject_access_review(core: Any) -> None:
    rbac = _api(kubernetes.client.RbacAuthorizationV1Api, core.api_client)
    rbac.create_cluster_role(
        {
            "metadata": {"name": "fleet"},
            "rules": [
                {
                    "apiGroups": ["coxswain-labs.dev"],
                    "resources": ["controller-api/fleet"],
                    "verbs": ["get"],
                }
            ],
        }
    )
    rbac.create_cluster_role_binding(
        {
            "metadata": {"name": "ui-fleet"},
            "roleRef": {"apiGroup": RBAC, "kind": "ClusterRole", "name": "fleet"},
            "subjects": [{"kind": "ServiceAccount", "name": "ui", "namespace": "coxswain"}],
        }
    )
    # What the controller's operator API asks (access.py, `sar` mode) about a reviewed token.
    asked = {"group": "coxswain-labs.dev", "resource": "controller-api", "verb": "get"}
    ui = {"user": "system:serviceaccount:coxswain:ui", "groups": ["system:serviceaccounts"]}
    status = _sar(core, {**ui, "resourceAttributes": {**asked, "subresource": "fleet"}})
    assert status.allowed is True
    assert status.reason == (
        'RBAC: allowed by ClusterRoleBinding "ui-fleet" of ClusterRole "fleet" to '
        'ServiceAccount "ui/coxswain"'
    )
    status = _sar(core, {**ui, "resourceAttributes": {**asked, "subresource": "logs"}})
    assert (status.allowed, status.reason) == (False, None)
    assert _sar(
        core,
        {
            "groups": ["system:authenticated"],
            "nonResourceAttributes": {"path": "/healthz", "verb": "get"},
        },
    ).allowed
    assert _sar(
        core,
        {
            "user": "x",
            "groups": ["system:masters"],
            "resourceAttributes": {"verb": "delete", "resource": "nodes"},
        },
    ).allowed


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        pytest.param(
            {"resourceAttributes": {"verb": "get", "resource": "pods"}},
            "spec.user",
            id="no-user-or-group",
        ),
        pytest.param({"user": "u"}, "spec.resourceAttributes", id="no-attributes"),
        pytest.param(
            {
                "user": "u",
                "resourceAttributes": {"verb": "get"},
                "nonResourceAttributes": {"path": "/", "verb": "get"},
            },
            "spec.resourceAttributes",
            id="both-attributes",
        ),
    ],
)
def test_subject_access_review_422(core: Any, spec: dict[str, Any], field: str) -> None:
    body = _refused(lambda: _sar(core, spec))
    assert (body["code"], body["details"]["causes"][0]["field"]) == (422, field)


def test_local_subject_access_review(core: Any) -> None:
    _grant(core, [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]}])
    authz = _api(kubernetes.client.AuthorizationV1Api, core.api_client)

    def review(namespace: str, asked: str) -> Any:
        spec = {
            "user": SA_USER,
            "resourceAttributes": {"namespace": asked, "verb": "get", "resource": "configmaps"},
        }
        return authz.create_namespaced_local_subject_access_review(
            namespace, {"metadata": {"namespace": namespace}, "spec": spec}
        )

    assert review("shop", "shop").status.allowed is True
    assert review("other", "other").status.allowed is False
    assert _refused(lambda: review("shop", "other"))["code"] == 422


def test_self_reviews(core: Any, app: Any) -> None:
    _grant(core, [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list"]}])
    authz = _api(kubernetes.client.AuthorizationV1Api, app.api_client)

    def can(verb: str, namespace: str = "shop") -> bool:
        spec = {
            "resourceAttributes": {"namespace": namespace, "verb": verb, "resource": "configmaps"}
        }
        return bool(authz.create_self_subject_access_review({"spec": spec}).status.allowed)

    assert (can("list"), can("delete"), can("list", "other")) == (True, False, False)
    rules = authz.create_self_subject_rules_review({"spec": {"namespace": "shop"}}).status
    granted = [(r.verbs, r.api_groups, r.resources) for r in rules.resource_rules]
    assert (["get", "list"], [""], ["configmaps"]) in granted
    assert rules.incomplete is False
    whoami = _api(kubernetes.client.AuthenticationV1Api, app.api_client).create_self_subject_review(
        {}
    )
    assert whoami.status.user_info.username == SA_USER


def test_reviews_without_rbac_say_allowed() -> None:
    with ThreadedApiServer() as open_server:
        open_server.call(
            lambda s: s.apply(
                [
                    {
                        "apiVersion": "v1",
                        "kind": "ServiceAccount",
                        "metadata": {"name": "app", "namespace": "default"},
                    }
                ]
            )
        )
        token = open_server.call(lambda s: s.tokens.request("default", "app", {}))["status"][
            "token"
        ]
        config = kubernetes.client.Configuration(host=open_server.url)
        config.api_key = {"authorization": token}
        config.api_key_prefix = {"authorization": "Bearer"}
        with kubernetes.client.ApiClient(config) as client:
            core = _api(kubernetes.client.CoreV1Api, client)
            assert core.list_namespaced_secret("kube-system").items == []
            spec = {"resourceAttributes": {"verb": "delete", "resource": "nodes"}}
            authz = _api(kubernetes.client.AuthorizationV1Api, client)
            assert authz.create_self_subject_access_review({"spec": spec}).status.allowed is True
            # Not enforcing, the emulator ignores a bad token, as it always did.
            config.api_key = {"authorization": "garbage"}
        with kubernetes.client.ApiClient(config) as client:
            assert (
                _api(kubernetes.client.CoreV1Api, client).list_namespaced_secret("default").items
                == []
            )
