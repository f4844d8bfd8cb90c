"""Resource URLs: which (group, version, namespace, resource, name, subresource) each names.

Covers core and grouped paths, cluster-scoped and namespaced, subresources, and the Namespace
ambiguity (`/api/v1/namespaces/x/status`). Routing to handlers is covered through HTTP elsewhere.
"""

from __future__ import annotations

import pytest

from coxswain_devkit.apiserver.paths import Target, parse


@pytest.mark.parametrize(
    ("path", "target"),
    [
        pytest.param(
            "/api/v1/namespaces",
            Target("", "v1", None, "namespaces", "", ""),
            id="cluster-collection",
        ),
        pytest.param(
            "/api/v1/namespaces/a",
            Target("", "v1", None, "namespaces", "a", ""),
            id="namespace-object",
        ),
        pytest.param(
            "/api/v1/namespaces/a/status",
            Target("", "v1", None, "namespaces", "a", "status"),
            id="namespace-status",
        ),
        pytest.param(
            "/api/v1/namespaces/a/pods",
            Target("", "v1", "a", "pods", "", ""),
            id="namespaced-collection",
        ),
        pytest.param(
            "/api/v1/namespaces/a/pods/p/log",
            Target("", "v1", "a", "pods", "p", "log"),
            id="pod-log",
        ),
        pytest.param("/api/v1/pods", Target("", "v1", None, "pods", "", ""), id="all-namespaces"),
        pytest.param(
            "/apis/gateway.networking.k8s.io/v1/namespaces/n/httproutes/r/status",
            Target("gateway.networking.k8s.io", "v1", "n", "httproutes", "r", "status"),
            id="grouped-status",
        ),
        pytest.param(
            "/apis/networking.k8s.io/v1/ingressclasses/x",
            Target("networking.k8s.io", "v1", None, "ingressclasses", "x", ""),
            id="grouped-cluster-scoped",
        ),
        pytest.param("/apis/apps/v1", None, id="group-version-is-discovery"),
        pytest.param("/api/v1/namespaces/a/pods/p/log/extra", None, id="too-deep"),
        pytest.param("/healthz", None, id="not-an-api-path"),
    ],
)
def test_parse(path: str, target: Target | None) -> None:
    assert parse(path) == target
