"""Warning (and Normal) Events on the objects translation had something to say about.

Spec 003 "Events": "An Event is published when the problem first appears, and again when the
replica publishing it takes over leadership, not on every resync". So this remembers what it
published in the current leadership term; `new_term()` forgets it.
"""

from __future__ import annotations

import asyncio
import datetime
import logging
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from kubernetes.client import ApiClient

from coxswain_controller.kube import api as kube
from coxswain_controller.sources import kinds
from coxswain_controller.translate.result import Event

log = logging.getLogger(__name__)

__all__ = ["EventRecorder"]

# An Event's involvedObject names each kind at the version the current Gateway API release
# serves it at (the first the controller reads it at: sources/kinds.py), so `kubectl describe`
# finds it on a standard-channel cluster; the object is found by uid and name whatever version
# it names, so an older cluster's still works.
API_VERSIONS = {
    **{kind.name: f"{kinds.GATEWAY_GROUP}/{kind.versions[0]}" for kind in kinds.GATEWAY},
    "Ingress": "networking.k8s.io/v1",
    "IngressClass": "networking.k8s.io/v1",
}


class EventRecorder:
    def __init__(
        self,
        api_client: ApiClient,
        *,
        confirm_leader: Callable[[], Awaitable[bool]],
        component: str = "coxswain-controller",
    ) -> None:
        self._client = api_client
        self._confirm = confirm_leader
        self._component = component
        self._published: set[tuple[object, str, str]] = set()

    def new_term(self) -> None:
        self._published.clear()

    async def record(self, events: Iterable[Event]) -> int:
        """Publish the events not yet published this term; returns how many were created."""
        created = 0
        for event in events:
            key = (event.ref, event.reason, event.message)
            if key in self._published:
                continue
            if not await self._confirm():
                return created
            try:
                await asyncio.to_thread(self._create, event)
            except kube.KubeError as err:
                log.warning(
                    "event not recorded",
                    extra={"fields": {"object": str(event.ref), "status": err.status}},
                )
                continue
            self._published.add(key)
            created += 1
        return created

    def _create(self, event: Event) -> None:
        now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        namespace = event.ref.namespace or "default"
        body: Any = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"generateName": f"{event.ref.name}.", "namespace": namespace},
            "involvedObject": {
                "apiVersion": API_VERSIONS.get(event.ref.kind, ""),
                "kind": event.ref.kind,
                "namespace": event.ref.namespace,
                "name": event.ref.name,
                "uid": event.uid,
            },
            "reason": event.reason,
            "message": event.message[:1024],
            "type": event.type,
            "source": {"component": self._component},
            "reportingComponent": self._component,
            "firstTimestamp": now,
            "lastTimestamp": now,
            "count": 1,
        }
        path = f"/api/v1/namespaces/{namespace}/events"
        kube.request(self._client, "POST", path, body=body)
