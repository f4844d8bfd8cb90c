"""A container's environment, resolved as the kubelet resolves it before each start.

`env` entries are taken in order: a literal `value` may refer to earlier entries as
`$(NAME)`; `valueFrom` reads the pod's own fields (`fieldRef`) or a key of a ConfigMap or Secret
in the pod's namespace (`configMapKeyRef`, `secretKeyRef`); `envFrom` copies a whole ConfigMap or
Secret first. What cannot be resolved keeps the container from starting with the kubelet's own
reason, `CreateContainerConfigError`, and a message naming what is missing.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

__all__ = ["CannotRun", "Reader", "expand", "resolve"]

Obj = dict[str, Any]
# Reads ("configmaps" | "secrets", namespace, name): the object, or None if it does not exist.
Reader = Callable[[str, str, str], Awaitable[Obj | None]]

CONFIG_ERROR = "CreateContainerConfigError"

# k8s.io/kubernetes/third_party/forked/golang/expansion: `$(VAR)` is replaced when VAR is
# defined, `$$` is an escaped `$`, anything else is kept as written.
_REFERENCE = re.compile(r"\$\$|\$\(([^)]*)\)")


class CannotRun(Exception):
    """Why a container cannot start: `reason` goes to `state.waiting.reason`, as the kubelet's."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(f"{reason}: {message}")
        self.reason = reason
        self.message = message


def expand(text: str, env: Mapping[str, str]) -> str:
    def one(match: re.Match[str]) -> str:
        if match.group(0) == "$$":
            return "$"
        name = match.group(1)
        return env[name] if name in env else match.group(0)

    return _REFERENCE.sub(one, text)


def _field(pod: Obj, pod_ip: str, path: str) -> str:
    meta, spec = pod.get("metadata") or {}, pod.get("spec") or {}
    simple = {
        "metadata.name": meta.get("name", ""),
        "metadata.namespace": meta.get("namespace", ""),
        "metadata.uid": meta.get("uid", ""),
        "spec.nodeName": spec.get("nodeName", ""),
        "spec.serviceAccountName": spec.get("serviceAccountName", "default"),
        "status.podIP": pod_ip,
        "status.podIPs": pod_ip,
        "status.hostIP": "127.0.0.1",
        "status.hostIPs": "127.0.0.1",
    }
    if path in simple:
        return str(simple[path])
    keyed = re.fullmatch(r"metadata\.(labels|annotations)\['([^']*)'\]", path)
    if keyed is not None:
        return str((meta.get(keyed.group(1)) or {}).get(keyed.group(2), ""))
    raise CannotRun(CONFIG_ERROR, f"unsupported fieldRef fieldPath {path!r}")


def _data(obj: Obj, plural: str) -> dict[str, str]:
    if plural == "configmaps":
        return {str(k): str(v) for k, v in (obj.get("data") or {}).items()}
    return {str(k): base64.b64decode(v).decode() for k, v in (obj.get("data") or {}).items()}


async def _source(read: Reader, plural: str, namespace: str, ref: Obj) -> dict[str, str] | None:
    """The data of the ConfigMap/Secret `ref` names; None if it is optional and missing."""
    name = str(ref.get("name", ""))
    obj = await read(plural, namespace, name)
    if obj is None:
        if ref.get("optional"):
            return None
        raise CannotRun(CONFIG_ERROR, f'{plural[:-1]} "{name}" not found')
    return _data(obj, plural)


async def _key(read: Reader, plural: str, namespace: str, ref: Obj) -> str | None:
    data = await _source(read, plural, namespace, ref)
    if data is None:
        return None
    key = str(ref.get("key", ""))
    if key not in data:
        if ref.get("optional"):
            return None
        raise CannotRun(CONFIG_ERROR, f"couldn't find key {key} in {plural[:-1]} {ref.get('name')}")
    return data[key]


async def _value_from(read: Reader, pod: Obj, pod_ip: str, source: Obj) -> str | None:
    namespace = pod["metadata"]["namespace"]
    if "fieldRef" in source:
        return _field(pod, pod_ip, str(source["fieldRef"].get("fieldPath", "")))
    if "configMapKeyRef" in source:
        return await _key(read, "configmaps", namespace, source["configMapKeyRef"])
    if "secretKeyRef" in source:
        return await _key(read, "secrets", namespace, source["secretKeyRef"])
    raise CannotRun(CONFIG_ERROR, f"unsupported valueFrom {sorted(source)}")


async def _env_from(read: Reader, pod: Obj, container: Obj) -> dict[str, str]:
    env: dict[str, str] = {}
    namespace = pod["metadata"]["namespace"]
    for source in container.get("envFrom") or []:
        prefix = str(source.get("prefix", ""))
        for field, plural in (("configMapRef", "configmaps"), ("secretRef", "secrets")):
            if field in source:
                data = await _source(read, plural, namespace, source[field]) or {}
                env.update({prefix + k: v for k, v in data.items()})
    return env


async def resolve(read: Reader, pod: Obj, container: Obj, pod_ip: str) -> dict[str, str]:
    """The container's variables (only those its spec declares), in declaration order."""
    env = await _env_from(read, pod, container)
    for entry in container.get("env") or []:
        name = str(entry.get("name", ""))
        if "valueFrom" in entry:
            value = await _value_from(read, pod, pod_ip, entry["valueFrom"] or {})
            if value is not None:
                env[name] = value
        else:
            env[name] = expand(str(entry.get("value", "")), env)
    return env
