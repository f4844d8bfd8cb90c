"""The leader's mark on its own Pod, which the discovery Service selects on.

Spec 001: "the leader labels its own pod (discovery.coxswain-labs.dev/leader: "true"), so the
coxswain-controller-discovery Service routes dials to it". A JSON merge patch sets the label,
and one setting it to null removes it, leaving every other label alone. Failures are the
caller's to log and retry; nothing here blocks the election on them.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from coxswain_controller.kube import api as kube

LEADER_LABEL = "discovery.coxswain-labs.dev/leader"


@dataclass(frozen=True, slots=True)
class PodRef:
    namespace: str  # --pod-namespace
    name: str  # --pod-name

    @property
    def path(self) -> str:
        return f"/api/v1/namespaces/{self.namespace}/pods/{self.name}"


async def mark(client: Any, pod: PodRef, *, leading: bool, request_timeout: float) -> None:
    """Add (leading) or remove the leader label; raises `kube.KubeError`."""
    body = {"metadata": {"labels": {LEADER_LABEL: "true" if leading else None}}}
    await asyncio.to_thread(
        kube.request,
        client,
        "PATCH",
        pod.path,
        body=body,
        content_type=kube.MERGE_PATCH,
        timeout=request_timeout,
    )
