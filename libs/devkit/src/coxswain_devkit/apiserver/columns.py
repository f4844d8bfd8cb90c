"""kubectl's columns for the kinds the devkit's cluster runs: Pods, Deployments, Services, Nodes.

kube-apiserver prints each built-in kind with its own columns (pkg/printers/internalversion);
with the node agent and the load balancer running, `kubectl get pods` and `kubectl get svc` are
how one sees what they did, so these kinds get the columns operators know: a Pod's READY,
STATUS (a waiting container's reason, or Terminating), RESTARTS, and with `-o wide` its IP and
NODE; a Deployment's READY, UP-TO-DATE and AVAILABLE; a Service's TYPE, CLUSTER-IP,
EXTERNAL-IP and PORT(S); a Node's STATUS and VERSION. Every other kind keeps NAME and AGE.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["cells", "definitions"]

Obj = dict[str, Any]
Cell = Callable[[Obj], Any]


def _status(obj: Obj) -> Obj:
    return obj.get("status") or {}


def _spec(obj: Obj) -> Obj:
    return obj.get("spec") or {}


def _pod_ready(pod: Obj) -> str:
    statuses = _status(pod).get("containerStatuses") or []
    total = len(_spec(pod).get("containers") or []) or len(statuses)
    return f"{sum(1 for s in statuses if s.get('ready'))}/{total}"


def _pod_phase(pod: Obj) -> str:
    """kubectl's STATUS: the phase, unless a container says more, or the pod is terminating."""
    if pod.get("metadata", {}).get("deletionTimestamp"):
        return "Terminating"
    reason = str(_status(pod).get("reason") or _status(pod).get("phase") or "Pending")
    for status in _status(pod).get("containerStatuses") or []:
        state = status.get("state") or {}
        waiting, terminated = state.get("waiting") or {}, state.get("terminated") or {}
        if waiting.get("reason"):
            reason = str(waiting["reason"])
        elif terminated.get("reason"):
            reason = str(terminated["reason"])
    return reason


def _restarts(pod: Obj) -> int:
    return sum(int(s.get("restartCount", 0)) for s in _status(pod).get("containerStatuses") or [])


def _external(service: Obj) -> str:
    ingress = (_status(service).get("loadBalancer") or {}).get("ingress") or []
    found = [str(i.get("ip") or i.get("hostname")) for i in ingress]
    found += [str(ip) for ip in _spec(service).get("externalIPs") or []]
    if found:
        return ",".join(found)
    return "<pending>" if _spec(service).get("type") == "LoadBalancer" else "<none>"


def _ports(service: Obj) -> str:
    ports = _spec(service).get("ports") or []
    listed = [f"{p.get('port')}/{p.get('protocol', 'TCP')}" for p in ports]
    return ",".join(listed) or "<none>"


def _node_ready(node: Obj) -> str:
    conditions = _status(node).get("conditions") or []
    ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)
    return "Ready" if ready else "NotReady"


# (name, type, priority, cell); NAME comes first and AGE after these priority-0 columns.
_KINDS: dict[str, list[tuple[str, str, int, Cell]]] = {
    "Pod": [
        ("Ready", "string", 0, _pod_ready),
        ("Status", "string", 0, _pod_phase),
        ("Restarts", "integer", 0, _restarts),
        ("IP", "string", 1, lambda p: _status(p).get("podIP") or "<none>"),
        ("Node", "string", 1, lambda p: _spec(p).get("nodeName") or "<none>"),
    ],
    "Deployment": [
        (
            "Ready",
            "string",
            0,
            lambda d: f"{_status(d).get('readyReplicas', 0)}/{_spec(d).get('replicas', 1)}",
        ),
        ("Up-to-date", "integer", 0, lambda d: _status(d).get("updatedReplicas", 0)),
        ("Available", "integer", 0, lambda d: _status(d).get("availableReplicas", 0)),
    ],
    "Service": [
        ("Type", "string", 0, lambda s: _spec(s).get("type", "ClusterIP")),
        ("Cluster-IP", "string", 0, lambda s: _spec(s).get("clusterIP") or "<none>"),
        ("External-IP", "string", 0, _external),
        ("Port(s)", "string", 0, _ports),
    ],
    "Node": [
        ("Status", "string", 0, _node_ready),
        ("Version", "string", 0, lambda n: "v1.32.0-coxswain-devkit"),
    ],
}


def _column(name: str, kind: str, priority: int, description: str) -> Obj:
    fmt = "name" if name == "Name" else ""
    return {
        "name": name,
        "type": kind,
        "format": fmt,
        "description": description,
        "priority": priority,
    }


def definitions(kind: str) -> list[Obj]:
    extra = _KINDS.get(kind, [])
    head = [_column("Name", "string", 0, "the object's name")]
    shown = [_column(n, t, p, n) for n, t, p, _ in extra if p == 0]
    age = [_column("Age", "string", 0, "time since creationTimestamp")]
    wide = [_column(n, t, p, n) for n, t, p, _ in extra if p > 0]
    return head + shown + age + wide


def cells(kind: str, obj: Obj, age: str) -> list[Any]:
    extra = _KINDS.get(kind, [])
    name = (obj.get("metadata") or {}).get("name", "")
    shown = [cell(obj) for _, _, p, cell in extra if p == 0]
    wide = [cell(obj) for _, _, p, cell in extra if p > 0]
    return [name, *shown, age, *wide]
