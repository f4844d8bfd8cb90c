"""The Deployment controller's part of kube-controller-manager, as the devkit node plays it.

Pure planning: given a Deployment and the Pods it owns, which Pods to create and which to
delete, and the Deployment's status. There are no ReplicaSets (the emulator does not serve
them): Pods are owned by the Deployment directly, named `<deployment>-<pod-template-hash>-<5>`
and labelled with the template's labels plus `pod-template-hash`, as a ReplicaSet's would be, so
Services select them and a template change is seen as a new hash. The rules follow the real
controller's:
- scaling removes not-ready Pods first, then the newest;
- `RollingUpdate` (the default) creates new Pods up to `replicas + maxSurge` and removes old ones
  while at least `replicas - maxUnavailable` stay ready (both default to 25%; surge rounds up,
  unavailability down; both 0 means one may be unavailable), unhealthy old Pods going first;
- `Recreate` removes every old Pod and creates new ones once they are gone.
`minReadySeconds`, `paused`, `revisionHistoryLimit` and `progressDeadlineSeconds` are not used.
"""

from __future__ import annotations

import hashlib
import json
import math
import secrets
from dataclasses import dataclass, field
from typing import Any

from coxswain_devkit.apiserver.meta import parse_timestamp

__all__ = ["Plan", "FINALIZER", "HASH_LABEL", "is_ready", "new_pod", "owned", "plan", "status"]

Obj = dict[str, Any]
HASH_LABEL = "pod-template-hash"
# Holds a deleted Pod until the node has stopped its processes (the kubelet's graceful deletion).
FINALIZER = "coxswain-devkit/node"
# apimachinery's rand.SafeEncodeString alphabet: no vowels, no look-alike characters.
_SAFE = "bcdfghjklmnpqrstvwxz2456789"


@dataclass(frozen=True, slots=True)
class Plan:
    create: int = 0  # how many new Pods (at the current template) to create
    delete: list[Obj] = field(default_factory=list)  # the Pods to delete


def _safe(data: bytes, length: int) -> str:
    number = int.from_bytes(hashlib.sha256(data).digest()[:8], "big")
    chars = []
    for _ in range(length):
        number, digit = divmod(number, len(_SAFE))
        chars.append(_SAFE[digit])
    return "".join(chars)


def template_hash(deployment: Obj) -> str:
    template = (deployment.get("spec") or {}).get("template") or {}
    return _safe(json.dumps(template, sort_keys=True).encode(), 10)


def deleting(pod: Obj) -> bool:
    return bool(pod["metadata"].get("deletionTimestamp"))


def is_ready(pod: Obj) -> bool:
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def owned(deployment: Obj, pods: list[Obj]) -> list[Obj]:
    uid = deployment["metadata"]["uid"]
    return [
        p
        for p in pods
        if any(r.get("uid") == uid for r in p["metadata"].get("ownerReferences") or [])
    ]


def _replicas(deployment: Obj) -> int:
    value = (deployment.get("spec") or {}).get("replicas")
    return 1 if value is None else int(value)


def _resolve(value: Any, total: int, *, round_up: bool) -> int:
    text = str(value)
    if not text.endswith("%"):
        return int(text)
    exact = total * int(text[:-1]) / 100
    return math.ceil(exact) if round_up else math.floor(exact)


def _rolling(deployment: Obj, replicas: int) -> tuple[int, int]:
    strategy = (deployment.get("spec") or {}).get("strategy") or {}
    rolling = strategy.get("rollingUpdate") or {}
    surge = _resolve(rolling.get("maxSurge", "25%"), replicas, round_up=True)
    unavailable = _resolve(rolling.get("maxUnavailable", "25%"), replicas, round_up=False)
    return surge, (1 if surge == 0 and unavailable == 0 else unavailable)


def _doomed_first(pods: list[Obj]) -> list[Obj]:
    """Not-ready Pods first, then the newest: the order the controller scales down in."""

    def key(pod: Obj) -> tuple[bool, float, str]:
        created = pod["metadata"].get("creationTimestamp")
        age = -parse_timestamp(created) if created else 0.0
        return (is_ready(pod), age, pod["metadata"]["name"])

    return sorted(pods, key=key)


def _scale(pods: list[Obj], replicas: int) -> Plan:
    if len(pods) < replicas:
        return Plan(create=replicas - len(pods))
    return Plan(delete=_doomed_first(pods)[: len(pods) - replicas])


def plan(deployment: Obj, pods: list[Obj]) -> Plan:
    """What to do next for `deployment`, given the Pods it owns (terminating ones included)."""
    replicas, current = _replicas(deployment), template_hash(deployment)
    live = [p for p in pods if not deleting(p)]
    new = [p for p in live if p["metadata"].get("labels", {}).get(HASH_LABEL) == current]
    old = [p for p in live if p not in new]
    strategy = ((deployment.get("spec") or {}).get("strategy") or {}).get("type")
    if strategy == "Recreate":
        if old:
            return Plan(delete=old)
        return Plan() if len(live) < len(pods) else _scale(new, replicas)
    if not old:
        return _scale(new, replicas)
    surge, unavailable = _rolling(deployment, replicas)
    create = max(0, min(replicas - len(new), replicas + surge - len(live)))
    removable = sum(map(is_ready, live)) - (replicas - unavailable)
    doomed = [p for p in old if not is_ready(p)]
    for pod in _doomed_first([p for p in old if is_ready(p)]):
        if removable <= 0:
            break
        doomed.append(pod)
        removable -= 1
    excess = _scale(new, replicas).delete if len(new) > replicas else []
    return Plan(create=create, delete=doomed + excess)


def new_pod(deployment: Obj, node: str) -> Obj:
    """A Pod for the current template, bound to `node` (the node agent is the scheduler too)."""
    meta, spec = deployment["metadata"], deployment.get("spec") or {}
    template = spec.get("template") or {}
    current = template_hash(deployment)
    suffix = "".join(secrets.choice(_SAFE) for _ in range(5))
    labels = {**((template.get("metadata") or {}).get("labels") or {}), HASH_LABEL: current}
    owner = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "name": meta["name"],
        "uid": meta["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"{meta['name']}-{current}-{suffix}",
            "namespace": meta["namespace"],
            "labels": labels,
            "annotations": dict((template.get("metadata") or {}).get("annotations") or {}),
            "ownerReferences": [owner],
            "finalizers": [FINALIZER],
        },
        "spec": {**(template.get("spec") or {}), "nodeName": node},
    }


def _conditions(deployment: Obj, available_ok: bool, complete: bool, now: str) -> list[Obj]:
    held = {c.get("type"): c for c in (deployment.get("status") or {}).get("conditions") or []}
    wanted = [
        ("Available", available_ok, "MinimumReplicasAvailable", "MinimumReplicasUnavailable"),
        ("Progressing", True, "NewReplicaSetAvailable" if complete else "ReplicaSetUpdated", ""),
    ]
    conditions = []
    for kind, ok, reason_ok, reason_not in wanted:
        condition = {
            "type": kind,
            "status": "True" if ok else "False",
            "reason": reason_ok if ok else reason_not,
            "message": f"Deployment {'has' if ok else 'does not have'} minimum availability."
            if kind == "Available"
            else f'Pods of template hash "{template_hash(deployment)}" '
            + ("are available." if complete else "are rolling out."),
        }
        before = held.get(kind) or {}
        same = all(before.get(f) == condition[f] for f in ("status", "reason", "message"))
        condition["lastUpdateTime"] = before.get("lastUpdateTime", now) if same else now
        condition["lastTransitionTime"] = (
            before.get("lastTransitionTime", now)
            if before.get("status") == condition["status"]
            else now
        )
        conditions.append(condition)
    return conditions


def status(deployment: Obj, pods: list[Obj], *, now: str) -> Obj:
    """The Deployment's status from the Pods it owns."""
    replicas, current = _replicas(deployment), template_hash(deployment)
    live = [p for p in pods if not deleting(p)]
    updated = [p for p in live if p["metadata"].get("labels", {}).get(HASH_LABEL) == current]
    ready = sum(map(is_ready, live))
    _, unavailable = _rolling(deployment, replicas)
    complete = len(updated) == replicas == len(live) and all(map(is_ready, updated))
    return {
        "observedGeneration": deployment["metadata"].get("generation", 1),
        "replicas": len(live),
        "updatedReplicas": len(updated),
        "readyReplicas": ready,
        "availableReplicas": ready,
        "unavailableReplicas": max(replicas - ready, 0),
        "conditions": _conditions(deployment, ready >= replicas - unavailable, complete, now),
    }
