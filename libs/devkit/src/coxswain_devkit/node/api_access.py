"""A pod's credential for the API server: the kubelet's kube-api-access volume, as a kubeconfig.

In a cluster, every container of a pod whose ServiceAccount token is automounted finds
`/var/run/secrets/kubernetes.io/serviceaccount/{token,namespace,ca.crt}`, which the client
libraries' in-cluster configuration reads (with KUBERNETES_SERVICE_HOST/PORT). That
configuration insists on https and on that fixed path; the emulator speaks plain HTTP and a
process here has no such path. So the agent gets the same token the kubelet would — a
TokenRequest for the pod's ServiceAccount, bound to the Pod, for 3607 s (which the API server
extends to a year, as it does the kubelet's) — writes it under the pod's directory next to a
kubeconfig naming the agent's API URL and that token file, and the services that talk to the
API are started with `--kubeconfig` (`launch`). Their requests then authenticate as
`system:serviceaccount:<ns>:<sa>`, and RBAC applies to them as it would in a pod.

Whether the token is mounted follows the pod's `automountServiceAccountToken`, else the
ServiceAccount's, else true. Off, the process gets no credential at all and finds no API
configuration, as in a pod. A missing ServiceAccount keeps the container waiting
(`ContainerCreating`), as the volume the kubelet could not set up would. The token is requested
again past 80% of its lifetime, as the kubelet does.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from coxswain_devkit.node.env import CannotRun
from coxswain_devkit.node.volumes import MOUNT_WAIT, Reader, TokenIssuer, write_file

__all__ = ["ApiAccess", "TOKEN_SECONDS", "automounted"]

Obj = dict[str, Any]
TOKEN_SECONDS = 3607  # what the kubelet asks for its kube-api-access token
REFRESH_AT = 0.8


def automounted(pod: Obj, account: Obj | None) -> bool:
    """The pod's automountServiceAccountToken, else its ServiceAccount's, else true."""
    for holder in (pod.get("spec") or {}, account or {}):
        value = holder.get("automountServiceAccountToken")
        if value is not None:
            return bool(value)
    return True


class ApiAccess:
    def __init__(
        self, pod: Obj, root: Path, *, api_url: str, read: Reader, issue: TokenIssuer
    ) -> None:
        self._pod = pod
        self.directory = root / "serviceaccount"
        self._api_url = api_url
        self._read = read
        self._issue = issue
        self._renew_at: float | None = None  # monotonic; None until a token was written

    @property
    def kubeconfig_path(self) -> Path:
        return self.directory / "kubeconfig"

    async def kubeconfig(self) -> Path | None:
        """The kubeconfig with the pod's API token; None when the pod mounts no token."""
        namespace, account = self._account()
        found = await self._read("serviceaccounts", namespace, account)
        if found is None:
            raise CannotRun(
                MOUNT_WAIT, f'MountVolume.SetUp failed: serviceaccount "{account}" not found'
            )
        if not automounted(self._pod, found):
            return None
        if self._renew_at is None:
            await self._write()
        return self.kubeconfig_path

    async def refresh(self) -> None:
        """Request the token again once it is past 80% of its lifetime (once it was written)."""
        if self._renew_at is not None and time.monotonic() >= self._renew_at:
            await self._write()

    async def _write(self) -> None:
        namespace, account = self._account()
        meta = self._pod["metadata"]
        bound = {"kind": "Pod", "apiVersion": "v1", "name": meta["name"], "uid": meta["uid"]}
        body = {"spec": {"expirationSeconds": TOKEN_SECONDS, "boundObjectRef": bound}}
        answer = await self._issue(namespace, account, body)
        if answer is None:
            raise CannotRun(
                MOUNT_WAIT, f'MountVolume.SetUp failed: serviceaccount "{account}" not found'
            )
        token = self.directory / "token"
        write_file(token, str(answer["status"]["token"]).encode())
        write_file(self.directory / "namespace", namespace.encode())
        write_file(self.kubeconfig_path, _kubeconfig(self._api_url, token, namespace))
        self._renew_at = time.monotonic() + REFRESH_AT * TOKEN_SECONDS

    def _account(self) -> tuple[str, str]:
        meta, spec = self._pod["metadata"], self._pod.get("spec") or {}
        return str(meta["namespace"]), str(spec.get("serviceAccountName") or "default")


def _kubeconfig(api_url: str, token: Path, namespace: str) -> bytes:
    """A kubeconfig (JSON is YAML) sending the token file's token to the API server."""
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "devkit", "cluster": {"server": api_url}}],
        "users": [{"name": "pod", "user": {"tokenFile": str(token)}}],
        "contexts": [
            {"name": "pod", "context": {"cluster": "devkit", "user": "pod", "namespace": namespace}}
        ],
        "current-context": "pod",
    }
    return json.dumps(config, indent=2).encode()
