"""The Deployment `scale` subresource through the real client: read, patch, replace, refused.

Covers `read_namespaced_deployment_scale` (spec.replicas, status.selector),
`patch_namespaced_deployment_scale` and `replace_namespaced_deployment_scale` changing only
`spec.replicas` (and moving `generation`), a negative count refused with 422, and discovery
listing `deployments/scale`. `kubectl scale` against it runs in node/agent_test.py.
"""

from __future__ import annotations

from typing import Any

import kubernetes
import pytest

DEPLOYMENT = {
    "apiVersion": "apps/v1",
    "kind": "Deployment",
    "metadata": {"name": "web"},
    "spec": {
        "replicas": 2,
        "selector": {"matchLabels": {"app": "web", "tier": "edge"}},
        "template": {
            "metadata": {"labels": {"app": "web", "tier": "edge"}},
            "spec": {"containers": [{"name": "c", "image": "nginx"}]},
        },
    },
}


def test_scale_reads_and_writes_replicas(apps: Any) -> None:
    apps.create_namespaced_deployment("default", DEPLOYMENT)
    scale = apps.read_namespaced_deployment_scale("web", "default")
    assert (scale.spec.replicas, scale.status.selector) == (2, "app=web,tier=edge")
    apps.patch_namespaced_deployment_scale("web", "default", {"spec": {"replicas": 5}})
    deployment = apps.read_namespaced_deployment("web", "default")
    assert (deployment.spec.replicas, deployment.metadata.generation) == (5, 2)
    assert deployment.spec.selector.match_labels == {"app": "web", "tier": "edge"}
    body = {"metadata": {"name": "web"}, "spec": {"replicas": 0}}
    assert apps.replace_namespaced_deployment_scale("web", "default", body).spec.replicas == 0
    with pytest.raises(kubernetes.client.exceptions.ApiException) as refused:
        apps.patch_namespaced_deployment_scale("web", "default", {"spec": {"replicas": -1}})
    assert refused.value.status == 422


def test_discovery_lists_the_scale_subresource(client: Any) -> None:
    resources = kubernetes.client.AppsV1Api(client).get_api_resources().resources
    scale = next(r for r in resources if r.name == "deployments/scale")
    assert (scale.group, scale.version, scale.kind) == ("autoscaling", "v1", "Scale")
