"""kubectl's columns: each built-in kind the devkit's cluster runs, and every CRD's printer columns.

kube-apiserver prints each built-in kind with its own columns (pkg/printers/internalversion);
with the node agent and the load balancer running, `kubectl get pods` and `kubectl get svc` are
how one sees what they did, so these kinds get the columns operators know: a Pod's READY,
STATUS (a waiting container's reason, or Terminating), RESTARTS, and with `-o wide` its IP and
NODE; a Deployment's READY, UP-TO-DATE and AVAILABLE; a Service's TYPE, CLUSTER-IP,
EXTERNAL-IP and PORT(S); a Node's STATUS and VERSION; a RoleBinding's or ClusterRoleBinding's
ROLE. Every other built-in kind keeps NAME and AGE.

A custom resource is printed as apiextensions-apiserver prints it: NAME, then its version's
`additionalPrinterColumns` in order (a CRD without any has the one the API server defaults,
Age over `.metadata.creationTimestamp`), each cell the first value its `jsonPath` finds,
converted by the column's `type`: `string` as JSONPath prints it (a list or object as JSON),
`integer`, `number` and `boolean` only from a value of that type, `date` as an age; a path that
finds nothing, or a value of another type, is an empty cell (null; kubectl prints nothing).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from coxswain_devkit.apiserver import jsonpath
from coxswain_devkit.apiserver.meta import parse_timestamp

__all__ = ["PrinterColumn", "cells", "definitions", "printer_columns"]

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


def _role(binding: Obj) -> str:
    ref = binding.get("roleRef") or {}
    return f"{ref.get('kind', '')}/{ref.get('name', '')}"


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
    "RoleBinding": [("Role", "string", 0, _role)],
    "ClusterRoleBinding": [("Role", "string", 0, _role)],
}


@dataclass(frozen=True, slots=True)
class PrinterColumn:
    """One of a CRD version's `additionalPrinterColumns`."""

    name: str  # the header, e.g. "Programmed"
    type: str  # integer, number, string, boolean or date
    json_path: str  # where the value is, e.g. `.status.conditions[?(@.type=="Programmed")].status`
    description: str = ""  # the column's description, shown by nothing kubectl prints
    priority: int = 0  # 0 is shown; more only with `-o wide`
    format: str = ""  # a format hint passed through to the client, e.g. "byte"


# What apiextensions-apiserver defaults a CRD version's columns to when it declares none.
DEFAULT_COLUMNS = (PrinterColumn("Age", "date", ".metadata.creationTimestamp"),)


def printer_columns(version: Obj) -> tuple[PrinterColumn, ...]:
    """A CRD version's columns (`spec.versions[].additionalPrinterColumns`), or the default."""
    declared = version.get("additionalPrinterColumns") or []
    columns = tuple(
        PrinterColumn(
            name=str(c.get("name", "")),
            type=str(c.get("type", "string")),
            json_path=str(c.get("jsonPath", "")),
            description=str(c.get("description", "")),
            priority=int(c.get("priority", 0)),
            format=str(c.get("format", "")),
        )
        for c in declared
        if isinstance(c, dict)
    )
    return columns or DEFAULT_COLUMNS


def _column(name: str, kind: str, priority: int, description: str, fmt: str = "") -> Obj:
    return {
        "name": name,
        "type": kind,
        "format": "name" if name == "Name" else fmt,
        "description": description,
        "priority": priority,
    }


def definitions(kind: str, printer: tuple[PrinterColumn, ...] = ()) -> list[Obj]:
    head = [_column("Name", "string", 0, "the object's name")]
    if printer:
        return head + [
            _column(c.name, c.type, c.priority, c.description, c.format) for c in printer
        ]
    extra = _KINDS.get(kind, [])
    shown = [_column(n, t, p, n) for n, t, p, _ in extra if p == 0]
    age = [_column("Age", "string", 0, "time since creationTimestamp")]
    wide = [_column(n, t, p, n) for n, t, p, _ in extra if p > 0]
    return head + shown + age + wide


def cells(
    kind: str,
    obj: Obj,
    age: Callable[[float], str],
    printer: tuple[PrinterColumn, ...] = (),
) -> list[Any]:
    """A row's cells; `age(epoch seconds)` renders a time as the table's age."""
    name = (obj.get("metadata") or {}).get("name", "")
    if printer:
        return [name, *(_printed(c, obj, age) for c in printer)]
    extra = _KINDS.get(kind, [])
    created = (obj.get("metadata") or {}).get("creationTimestamp")
    shown = [cell(obj) for _, _, p, cell in extra if p == 0]
    wide = [cell(obj) for _, _, p, cell in extra if p > 0]
    return [name, *shown, age(parse_timestamp(created)) if created else "<unknown>", *wide]


_compiled = functools.lru_cache(maxsize=256)(jsonpath.parse)


def _printed(column: PrinterColumn, obj: Obj, age: Callable[[float], str]) -> Any:
    try:
        found = next(jsonpath.find(_compiled(column.json_path), obj), None)
    except jsonpath.Invalid:
        return None
    if found is None:
        return None
    return _typed(column.type, found, age)


def _typed(kind: str, value: Any, age: Callable[[float], str]) -> Any:
    """apiextensions' cellForJSONValue: a value of the column's type, or an empty cell."""
    number = isinstance(value, int | float) and not isinstance(value, bool)
    if kind == "string":
        return jsonpath.text(value)
    if kind == "integer" and number:
        return int(value)
    if kind == "number" and number:
        return float(value)
    if kind == "boolean" and isinstance(value, bool):
        return value
    if kind == "date" and isinstance(value, str):
        try:
            return age(parse_timestamp(value))
        except ValueError:
            return "<invalid>"
    return None
