"""A pod's volumes as files under its own directory, written and kept fresh as the kubelet does.

A process here cannot see `/var/run/secrets/...`, so each volume is materialised under
`<pod dir>/volumes/<volume name>/` and `launch` points the service at those files. Supported:
- `projected` with `serviceAccountToken` sources (a TokenRequest for the pod's
  serviceAccountName with the source's audience and expirationSeconds, bound to the Pod, so the
  identity service's TokenReview sees a token bound to a live pod, as in a cluster),
  `configMap`, `secret` and `downwardAPI` sources;
- `configMap`, `secret` (with `items`, `optional`), `emptyDir`.
`sync()` is called before the containers start and then periodically: a token past 80% of its
lifetime is requested again (the kubelet's rule) and ConfigMaps and Secrets are read again, so a
rotated trust bundle reaches the files. Files are replaced atomically and only when they change.
A missing ConfigMap, Secret or ServiceAccount keeps the pod in `ContainerCreating`, as a mount
that cannot be set up does; any other volume type is refused with a message naming it.
"""

from __future__ import annotations

import base64
import os
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from coxswain_devkit.node.env import CannotRun

__all__ = ["Volumes", "MOUNT_WAIT", "write_file"]

Obj = dict[str, Any]
# Reads ("configmaps" | "secrets" , namespace, name), None when absent.
Reader = Callable[[str, str, str], Awaitable[Obj | None]]
# Requests a token: (namespace, serviceaccount, TokenRequest body) -> TokenRequest.
TokenIssuer = Callable[[str, str, Obj], Awaitable[Obj | None]]

MOUNT_WAIT = "ContainerCreating"
DEFAULT_TOKEN_SECONDS = 3600
REFRESH_AT = 0.8  # the kubelet renews a projected token past 80% of its lifetime
_DOWNWARD = {"metadata.name": "name", "metadata.namespace": "namespace", "metadata.uid": "uid"}


def write_file(path: Path, data: bytes) -> None:
    """Replace `path` atomically with `data`, unless it holds that already."""
    if path.exists() and path.read_bytes() == data:
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def _decoded(obj: Obj, plural: str) -> dict[str, bytes]:
    if plural == "secrets":
        return {k: base64.b64decode(v) for k, v in (obj.get("data") or {}).items()}
    files = {k: str(v).encode() for k, v in (obj.get("data") or {}).items()}
    files.update({k: base64.b64decode(v) for k, v in (obj.get("binaryData") or {}).items()})
    return files


class Volumes:
    def __init__(self, pod: Obj, root: Path, *, read: Reader, issue: TokenIssuer) -> None:
        self._pod = pod
        self.root = root / "volumes"
        self._read = read
        self._issue = issue
        self._tokens: dict[str, float] = {}  # file path -> monotonic time to renew it

    def path(self, volume: str) -> Path:
        return self.root / volume

    def mounts(self, container: Obj) -> list[tuple[str, Path]]:
        """(mountPath, local path) for each of the container's volumeMounts."""
        return [
            (str(m["mountPath"]), self.path(str(m["name"])) / str(m.get("subPath", "")))
            for m in container.get("volumeMounts") or []
        ]

    async def sync(self) -> None:
        for volume in (self._pod.get("spec") or {}).get("volumes") or []:
            await self._volume(volume)

    async def _volume(self, volume: Obj) -> None:
        where = self.path(str(volume["name"]))
        if "emptyDir" in volume:
            where.mkdir(parents=True, exist_ok=True)
        elif "configMap" in volume:
            await self._object(where, "configmaps", volume["configMap"], "name")
        elif "secret" in volume:
            await self._object(where, "secrets", volume["secret"], "secretName")
        elif "projected" in volume:
            for source in volume["projected"].get("sources") or []:
                await self._projected(where, source)
        else:
            kinds = sorted(k for k in volume if k != "name")
            raise CannotRun(
                "CreateContainerConfigError",
                f"volume {volume['name']!r}: the devkit node does not support {kinds}",
            )
        where.mkdir(parents=True, exist_ok=True)

    async def _projected(self, where: Path, source: Obj) -> None:
        if "serviceAccountToken" in source:
            await self._token(where, source["serviceAccountToken"])
        elif "configMap" in source:
            await self._object(where, "configmaps", source["configMap"], "name")
        elif "secret" in source:
            await self._object(where, "secrets", source["secret"], "name")
        elif "downwardAPI" in source:
            self._downward(where, source["downwardAPI"])
        else:
            raise CannotRun(
                "CreateContainerConfigError", f"unsupported projected source {sorted(source)}"
            )

    async def _object(self, where: Path, plural: str, ref: Obj, name_field: str) -> None:
        name, namespace = str(ref.get(name_field, "")), self._pod["metadata"]["namespace"]
        obj = await self._read(plural, namespace, name)
        if obj is None:
            if ref.get("optional"):
                return
            raise CannotRun(
                MOUNT_WAIT, f'MountVolume.SetUp failed: {plural[:-1]} "{name}" not found'
            )
        files = _decoded(obj, plural)
        items = ref.get("items")
        if items:
            files = {str(i["path"]): files[i["key"]] for i in items if i.get("key") in files}
        for relative, data in files.items():
            write_file(where / relative, data)

    async def _token(self, where: Path, source: Obj) -> None:
        target = where / str(source.get("path", "token"))
        if self._tokens.get(str(target), 0.0) > time.monotonic():
            return
        meta, spec = self._pod["metadata"], self._pod.get("spec") or {}
        seconds = int(source.get("expirationSeconds") or DEFAULT_TOKEN_SECONDS)
        audience = source.get("audience")
        body = {
            "spec": {
                "audiences": [audience] if audience else [],
                "expirationSeconds": seconds,
                "boundObjectRef": {
                    "kind": "Pod",
                    "apiVersion": "v1",
                    "name": meta["name"],
                    "uid": meta["uid"],
                },
            }
        }
        account = str(spec.get("serviceAccountName") or "default")
        answer = await self._issue(meta["namespace"], account, body)
        if answer is None:
            raise CannotRun(
                MOUNT_WAIT,
                f'MountVolume.SetUp failed: serviceaccount "{account}" not found',
            )
        write_file(target, str(answer["status"]["token"]).encode())
        self._tokens[str(target)] = time.monotonic() + REFRESH_AT * seconds

    def _downward(self, where: Path, source: Obj) -> None:
        meta = self._pod["metadata"]
        for item in source.get("items") or []:
            field = str((item.get("fieldRef") or {}).get("fieldPath", ""))
            if field not in _DOWNWARD:
                raise CannotRun(
                    "CreateContainerConfigError", f"unsupported downwardAPI fieldPath {field!r}"
                )
            write_file(where / str(item["path"]), str(meta.get(_DOWNWARD[field], "")).encode())
