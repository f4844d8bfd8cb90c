"""Leader election: which replica serves discovery streams and writes status.

Every `renew_interval` the elector reads the Lease and, when it is ours or free (no holder, or
not renewed within its duration), writes itself in with the read resourceVersion, so of two
replicas racing for a free Lease exactly one write lands and the other gets 409 and re-reads.
The leader steps down when another replica holds the Lease, or when it has not managed to renew
for `renew_deadline` (shorter than the lease duration, so it stops before a successor can
start). A standby keeps translating meanwhile (the caller's business), so it takes over at once.

Leading drives the discovery `Leadership` flag and the leader label on this replica's Pod;
`confirm()` re-reads the Lease for the status writer right before each write (spec 001: "a
demoted leader re-checks its leadership immediately before every status patch"). On `stop()`
the leader releases the Lease, so a standby takes over on its next look rather than after a
lease duration.

Time comes from an injected clock and sleep, so tests move it by hand (convention 20).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from prometheus_client import Gauge

from coxswain_controller.kube import api as kube
from coxswain_controller.leader import lease, pod
from coxswain_controller.leader.leadership import Leadership
from coxswain_service import tasks

log = logging.getLogger(__name__)

LEADER = Gauge("coxswain_controller_leader", "1 while this replica holds the leader Lease.")


@dataclass(frozen=True, slots=True)
class ElectionSettings:
    identity: str  # this replica in holderIdentity: its pod name
    namespace: str = "coxswain-system"  # where the Lease lives (--leader-election-namespace)
    name: str = "coxswain-controller"  # the Lease
    lease_duration: float = 15.0  # a holder silent this long has lost the Lease
    renew_interval: float = 5.0  # how often the leader renews and a standby looks
    renew_deadline: float = 10.0  # a leader unable to renew this long steps down
    pod: pod.PodRef | None = None  # the Pod to label while leading; None labels nothing

    def validate(self) -> list[str]:
        errors = []
        if not self.identity:
            errors.append("identity: empty (set --pod-name or POD_NAME)")
        if self.lease_duration < 1:
            errors.append("lease_duration: the Lease API stores whole seconds, at least 1")
        if not 0 < self.renew_interval < self.renew_deadline < self.lease_duration:
            errors.append("need 0 < renew_interval < renew_deadline < lease_duration")
        return errors

    @property
    def path(self) -> str:
        return f"/apis/coordination.k8s.io/v1/namespaces/{self.namespace}/leases/{self.name}"


class Elector:
    def __init__(
        self,
        client: Any,
        leadership: Leadership,
        settings: ElectionSettings,
        *,
        clock: Callable[[], float] = time.time,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        if errors := settings.validate():
            raise ValueError("leader election: " + "; ".join(errors))
        self._client = client
        self._leadership = leadership
        self._settings = settings
        self._clock = clock
        self._sleep = sleep
        self._renewed_at = 0.0  # our clock at the last successful acquire or renew
        self._labelled = False  # our Pod carries the leader label
        self._task: asyncio.Task[None] | None = None

    @property
    def leading(self) -> bool:
        return self._leadership.is_leader

    def start(self) -> None:
        self._task = tasks.spawn(self._run(), name="leader-election")

    async def stop(self, *, release: bool = True) -> None:
        """Stop electing; a leader releases the Lease (unless `release` is False) and steps down."""
        if self._task is not None:
            await tasks.cancel(self._task)
        if release and self.leading:
            await self._release()
        await self._step_down("stopped", unlabel=release)

    async def confirm(self) -> bool:
        """True when the Lease, read now, is still ours and unexpired. Call before each write."""
        if not self.leading:
            return False
        try:
            current = await self._get()
        except kube.KubeError as exc:
            log.warning("leadership unconfirmed", extra={"fields": {"error": str(exc)}})
            return False
        if current is not None and lease.held_by(lease.spec_of(current), self._id, self._clock()):
            return True
        await self._step_down("the lease is held elsewhere")
        return False

    @property
    def _id(self) -> str:
        return self._settings.identity

    async def _run(self) -> None:
        while True:
            await self._tick()
            await self._sleep(self._settings.renew_interval)

    async def _tick(self) -> None:
        now = self._clock()
        try:
            ours = await self._claim(now)
        except kube.KubeError as exc:
            log.warning("lease not renewed", extra={"fields": {"error": str(exc)}})
            if self.leading and now - self._renewed_at >= self._settings.renew_deadline:
                await self._step_down("renewal deadline passed")
            return
        if ours:
            await self._step_up(now)
        else:
            await self._step_down("the lease is held elsewhere")

    async def _claim(self, now: float) -> bool:
        """Acquire or renew the Lease; False while another replica holds it."""
        current = await self._get()
        for _ in range(2):  # a 409 means another replica wrote in between: read, decide again
            spec = lease.spec_of(current) if current else lease.LeaseSpec()
            if current and not (lease.held_by(spec, self._id, now) or lease.expired(spec, now)):
                return False
            duration = self._settings.lease_duration
            try:
                await self._write(current, lease.claimed(spec, self._id, now, duration=duration))
                return True
            except kube.KubeError as exc:
                if exc.status != 409:
                    raise
            current = await self._get()
        raise kube.KubeError(409, "the Lease kept changing under us")

    async def _step_up(self, now: float) -> None:
        self._renewed_at = now
        if not self.leading:
            log.info("leading", extra={"fields": {"identity": self._id}})
            LEADER.set(1)
            self._leadership.set(True)
        if not self._labelled:  # retried on every renewal until it lands
            self._labelled = await self._mark(leading=True)

    async def _step_down(self, reason: str, *, unlabel: bool = True) -> None:
        if self.leading:
            log.info("standing by", extra={"fields": {"identity": self._id, "reason": reason}})
            LEADER.set(0)
            self._leadership.set(False)
        if self._labelled and unlabel:
            # Best effort: a label left behind only sends proxies to a standby that refuses.
            await self._mark(leading=False)
        self._labelled = False

    async def _mark(self, *, leading: bool) -> bool:
        if self._settings.pod is None:
            return True
        try:
            await pod.mark(
                self._client, self._settings.pod, leading=leading, request_timeout=self._timeout
            )
        except kube.KubeError as exc:
            fields = {"pod": self._settings.pod.name, "leading": leading, "error": str(exc)}
            log.warning("leader label not written", extra={"fields": fields})
            return False
        return True

    async def _release(self) -> None:
        try:
            current = await self._get()
            spec = lease.spec_of(current) if current else lease.LeaseSpec()
            if current and lease.held_by(spec, self._id, self._clock()):
                await self._write(current, lease.released(spec, self._clock()))
                log.info("lease released", extra={"fields": {"identity": self._id}})
        except kube.KubeError as exc:
            # The Lease then expires on its own: the successor waits one lease duration.
            log.warning("lease not released", extra={"fields": {"error": str(exc)}})

    @property
    def _timeout(self) -> float:
        return self._settings.renew_interval

    async def _get(self) -> kube.JSON | None:
        try:
            return await asyncio.to_thread(
                kube.request, self._client, "GET", self._settings.path, timeout=self._timeout
            )
        except kube.KubeError as exc:
            if exc.status == 404:
                return None
            raise

    async def _write(self, current: kube.JSON | None, spec: lease.LeaseSpec) -> None:
        """Create the Lease, or patch it guarded by the resourceVersion we read (409 if stale).

        A merge patch, not an update: spec 000 grants the controller get, create and patch on
        Leases. Carrying the resourceVersion makes the API server refuse a stale patch.
        """
        settings = self._settings
        if current is None:
            metadata = {"name": settings.name, "namespace": settings.namespace}
            body = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": metadata}
            collection = settings.path.rsplit("/", 1)[0]
            await self._request("POST", collection, {**body, "spec": spec}, "application/json")
            return
        version = current["metadata"]["resourceVersion"]
        body = {"metadata": {"resourceVersion": version}, "spec": spec}
        await self._request("PATCH", settings.path, body, kube.MERGE_PATCH)

    async def _request(self, method: str, path: str, body: kube.JSON, content_type: str) -> None:
        await asyncio.to_thread(
            kube.request,
            self._client,
            method,
            path,
            body=body,
            content_type=content_type,
            timeout=self._timeout,
        )
