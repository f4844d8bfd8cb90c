"""The Deployment controller's planning (`deployments.plan`), on fixed Pods.

Table tests of the rules the real controller follows: scaling up and down (not-ready first,
then the newest), a RollingUpdate bounded by maxSurge and maxUnavailable with unhealthy old
Pods removed first, and Recreate removing old Pods before creating new ones. Running the plan
against the emulator is agent_test.py's.
"""

from __future__ import annotations

from typing import Any

import pytest

from coxswain_devkit.node import deployments

Obj = dict[str, Any]


def _deployment(replicas: int, *, strategy: Obj | None = None, image: str = "new") -> Obj:
    spec: Obj = {
        "replicas": replicas,
        "template": {
            "metadata": {"labels": {"app": "a"}},
            "spec": {"containers": [{"image": image}]},
        },
    }
    if strategy is not None:
        spec["strategy"] = strategy
    return {"metadata": {"name": "a", "namespace": "n", "uid": "d", "generation": 1}, "spec": spec}


CURRENT = deployments.template_hash(_deployment(1))


def _pod(name: str, *, ready: bool = True, current: bool = True, created: int = 0) -> Obj:
    return {
        "metadata": {
            "name": name,
            "labels": {deployments.HASH_LABEL: CURRENT if current else "old"},
            "creationTimestamp": f"2030-01-01T00:00:{created:02d}Z",
        },
        "status": {"conditions": [{"type": "Ready", "status": "True" if ready else "False"}]},
    }


def _names(plan: deployments.Plan) -> tuple[int, list[str]]:
    return plan.create, [p["metadata"]["name"] for p in plan.delete]


@pytest.mark.parametrize(
    ("deployment", "pods", "expected"),
    [
        pytest.param(_deployment(3), [_pod("a")], (2, []), id="scale-up"),
        pytest.param(
            _deployment(1),
            [_pod("old", created=1), _pod("young", created=9), _pod("sick", ready=False)],
            (0, ["sick", "young"]), id="scale-down-not-ready-then-newest",
        ),
        pytest.param(
            _deployment(4), [_pod(f"o{i}", current=False) for i in range(4)],
            (1, ["o0"]), id="rolling-25-percent-surge-and-unavailable-of-4",
        ),
        pytest.param(
            _deployment(2), [_pod("o1", current=False), _pod("o2", current=False)],
            (1, []), id="rolling-of-2-keeps-both-until-a-new-one-is-ready",
        ),
        pytest.param(
            _deployment(2), [_pod("o1", current=False), _pod("o2", current=False), _pod("n1")],
            (0, ["o1"]), id="rolling-removes-an-old-one-per-new-ready",
        ),
        pytest.param(
            _deployment(2), [_pod("o1", current=False, ready=False), _pod("o2", current=False)],
            (1, ["o1"]), id="rolling-removes-unhealthy-old-pods-first",
        ),
        pytest.param(
            _deployment(2, strategy={"type": "Recreate"}), [_pod("o1", current=False), _pod("n1")],
            (0, ["o1"]), id="recreate-removes-old-first",
        ),
    ],
)  # fmt: skip
def test_plan(deployment: Obj, pods: list[Obj], expected: tuple[int, list[str]]) -> None:
    assert _names(deployments.plan(deployment, pods)) == expected


def test_status_counts_pods_and_says_when_the_rollout_is_complete() -> None:
    status = deployments.status(_deployment(2), [_pod("a"), _pod("b")], now="2030-01-01T00:00:00Z")
    assert (status["replicas"], status["updatedReplicas"], status["readyReplicas"]) == (2, 2, 2)
    progressing = next(c for c in status["conditions"] if c["type"] == "Progressing")
    assert progressing["reason"] == "NewReplicaSetAvailable"
