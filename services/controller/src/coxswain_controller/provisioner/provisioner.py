"""The provisioner: makes each Gateway's desired objects exist, leader only.

Where it sits: after each publish the leader submits the pass's `provision` (translation's
desired objects, spec 001's "renders the desired Deployment / Service / ServiceAccount"); this
loop reconciles the latest submission on its own task, so provisioning never delays a publish.
Each pass compares every desired object with the one the watch cache holds (plan.in_sync): an
object in sync costs no request at all, so a pass that changes nothing writes nothing. One that
differs is read fresh, compared again (the cache may lag our own writes), and created or
replaced with the read's resourceVersion; a 409 reads again and retries, as the status writer
does. Leadership is confirmed before every write.

Order (spec 002: "Switching a Gateway between modes provisions the new objects before it prunes
the old"): a Gateway's objects are applied in the order translation lists them, and only when
all of them are in place are its objects that are no longer desired deleted; objects of
Gateways no longer provisioned at all go last. What fails is a Warning Event on the Gateway
naming the object and the API server's answer, and the pass is tried again after a backoff.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from prometheus_client import Counter

from coxswain_controller.kube import api as kube
from coxswain_controller.provisioner import plan, resources
from coxswain_controller.status.events import EventRecorder
from coxswain_controller.translate.provision.model import GatewayProvision, ObjectKey, Provisioned
from coxswain_controller.translate.result import Event

log = logging.getLogger(__name__)

__all__ = ["Actual", "Provisioner", "Report"]

CONFLICT_RETRIES = 5
RETRY_SECONDS = (1.0, 2.0, 5.0, 10.0, 30.0, 60.0)
FAILED_REASON = "ProvisioningFailed"

WRITES = Counter(
    "coxswain_provisioner_writes_total",
    "Provisioned objects created, replaced or deleted, by kind and verb.",
    ["kind", "verb"],
)
FAILURES = Counter(
    "coxswain_provisioner_failures_total",
    "Provisioning writes the API server refused (or that could not be made), by kind.",
    ["kind"],
)

# Kind -> (namespace, name) -> object: the watch cache's view of what exists.
Actual = Mapping[str, Mapping[tuple[str, str], Mapping[str, Any]]]


@dataclass(slots=True)
class Report:
    """What one pass did (tests and logs read it)."""

    created: list[ObjectKey] = field(default_factory=list)
    updated: list[ObjectKey] = field(default_factory=list)
    deleted: list[ObjectKey] = field(default_factory=list)
    failed: list[ObjectKey] = field(default_factory=list)
    requests: int = 0  # API requests made, reads included
    writes_in_order: list[tuple[str, ObjectKey]] = field(default_factory=list)  # (verb, object)
    stopped: bool = False  # leadership was lost part way

    @property
    def writes(self) -> int:
        return len(self.created) + len(self.updated) + len(self.deleted)


class _Refused(Exception):
    """An object that is not ours to write (someone else's of the same name)."""


class _NotLeader(Exception):
    """Leadership was lost: stop writing."""


class Provisioner:
    def __init__(
        self,
        api_client: Any,
        *,
        actual: Callable[[], Actual],
        controller_name: str,
        confirm_leader: Callable[[], Awaitable[bool]],
        events: EventRecorder | None = None,
        retry_seconds: tuple[float, ...] = RETRY_SECONDS,
    ) -> None:
        self._client = api_client
        self._retry_seconds = retry_seconds
        self._actual = actual
        self._managed = resources.managed_labels(controller_name)
        self._confirm = confirm_leader
        self._events = events
        self._wanted: tuple[GatewayProvision, ...] | None = None
        # Object -> (fingerprint, resourceVersion) this controller last left it at: a live object
        # the compare cannot tell in sync (a value the server normalised) costs one write, then
        # none while it stays at that resourceVersion.
        self._settled: dict[ObjectKey, tuple[str, str]] = {}
        self._deleted: set[tuple[ObjectKey, str]] = set()  # (object, uid) deleted, cache lagging
        # Object -> (desired body, live object) last found in sync: translation and the cache
        # hand out the same objects while nothing changed, so a pass over them compares nothing.
        self._verified: dict[ObjectKey, tuple[Mapping[str, Any], Mapping[str, Any]]] = {}
        self._wake = asyncio.Event()
        self._failures = 0
        self._retry: asyncio.TimerHandle | None = None
        self.idle = asyncio.Event()  # set while nothing is pending (tests wait on it)
        self.idle.set()

    def submit(self, provision: tuple[GatewayProvision, ...]) -> None:
        """The latest desired state; an older one not yet reconciled is replaced."""
        self._wanted = provision
        self.idle.clear()
        self._wake.set()

    def forget(self) -> None:
        """A new leadership term: check everything afresh and report failures again."""
        self._settled.clear()
        self._deleted.clear()
        self._verified.clear()
        if self._events is not None:
            self._events.new_term()

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            await self._wake.wait()
            self._wake.clear()
            wanted = self._wanted
            if wanted is None:
                continue
            report = await self.reconcile(wanted)
            if report.failed:
                delay = self._retry_seconds[min(self._failures, len(self._retry_seconds) - 1)]
                self._failures += 1
                self._retry = loop.call_later(delay, self._wake.set)
            else:
                self._failures = 0
            if not self._wake.is_set() and not report.failed:
                self.idle.set()

    async def reconcile(self, provision: Iterable[GatewayProvision]) -> Report:
        """One pass over `provision`: apply, then prune."""
        entries = tuple(provision)
        report = Report()
        actual = self._actual()
        desired = {o.key for e in entries for o in e.objects} | {k for e in entries for k in e.keep}
        complete: set[str] = set()  # Gateways (uid) whose objects are all in place
        try:
            for entry in entries:
                if not entry.hold and await self._apply_all(entry, actual, report):
                    complete.add(entry.uid)
            held = {e.uid for e in entries} - complete
            await self._prune(actual, desired, held, report)
        except _NotLeader:
            report.stopped = True
        self._verified = {k: v for k, v in self._verified.items() if k in desired}
        self._log(report)
        return report

    async def _apply_all(self, entry: GatewayProvision, actual: Actual, report: Report) -> bool:
        ok = True
        for obj in entry.objects:
            ok = await self._apply(entry, obj, actual, report) and ok
        return ok

    async def _apply(
        self, entry: GatewayProvision, obj: Provisioned, actual: Actual, report: Report
    ) -> bool:
        live = actual.get(obj.key.kind, {}).get((obj.key.namespace, obj.key.name))
        if live is not None and self._in_sync(obj, live):
            return True
        refusal = plan.foreign(live, obj.body, self._managed) if live is not None else ""
        if refusal:  # someone else's object by that name: not even read again
            await self._failed(entry, obj.key, "not replaced", refusal, report)
            return False
        for _ in range(CONFLICT_RETRIES):
            try:
                await self._write(obj, report)
                return True
            except _Refused as exc:
                await self._failed(entry, obj.key, "not replaced", str(exc), report)
                return False
            except kube.KubeError as exc:
                if exc.status == 409:
                    continue  # raced another writer, or our create raced the cache: read again
                await self._failed(entry, obj.key, "not written", _why(exc), report)
                return False
        await self._failed(entry, obj.key, "not written", "conflicts on every retry", report)
        return False

    def _in_sync(self, obj: Provisioned, live: Mapping[str, Any]) -> bool:
        verified = self._verified.get(obj.key)
        if verified is not None and verified[0] is obj.body and verified[1] is live:
            return True  # the very objects last found in sync: nothing can differ
        if plan.in_sync(obj.body, live, obj.digest):
            self._verified[obj.key] = (obj.body, live)
            return True
        settled = (obj.digest, _version(live))
        return self._settled.get(obj.key) == settled

    async def _write(self, obj: Provisioned, report: Report) -> None:
        key = obj.key
        fresh = await self._get(key, report)
        if fresh is None:
            await self._create(obj, report)
            return
        refusal = plan.foreign(fresh, obj.body, self._managed)
        if refusal:
            raise _Refused(refusal)
        if plan.in_sync(obj.body, fresh, obj.digest):
            self._settled[key] = (obj.digest, _version(fresh))
            return
        if plan.needs_recreate(obj.body, fresh):
            await self._delete(key, _uid(fresh), report)
            await self._create(obj, report)
            return
        await self._confirm_leader()
        body = plan.updated(obj.body, fresh, obj.digest)
        written = await self._request(report, "PUT", resources.path(key), body=body)
        self._settled[key] = (obj.digest, _version(written))
        report.updated.append(key)
        report.writes_in_order.append(("update", key))
        WRITES.labels(kind=key.kind, verb="update").inc()

    async def _create(self, obj: Provisioned, report: Report) -> None:
        await self._confirm_leader()
        collection = resources.path(obj.key, collection=True)
        written = await self._request(
            report, "POST", collection, body=plan.created(obj.body, obj.digest)
        )
        self._settled[obj.key] = (obj.digest, _version(written))
        report.created.append(obj.key)
        report.writes_in_order.append(("create", obj.key))
        WRITES.labels(kind=obj.key.kind, verb="create").inc()

    async def _prune(
        self, actual: Actual, desired: set[ObjectKey], held: set[str], report: Report
    ) -> None:
        """Delete this controller's objects nothing desires, unless their Gateway is held (not
        Accepted, or its new objects are not all in place yet)."""
        for kind in resources.KINDS:
            for (namespace, name), obj in sorted(actual.get(kind, {}).items()):
                owner = resources.gateway_owner(obj, self._managed)
                key = ObjectKey(kind, namespace, name)
                uid = _uid(obj)
                if owner is None or owner in held or key in desired:
                    continue
                if (key, uid) in self._deleted:
                    continue  # deleted already; the cache has not seen it go yet
                await self._delete(key, uid, report)
        self._deleted &= {
            (ObjectKey(kind, *key), _uid(obj))
            for kind in resources.KINDS
            for key, obj in actual.get(kind, {}).items()
        }

    async def _delete(self, key: ObjectKey, uid: str, report: Report) -> None:
        await self._confirm_leader()
        # Preconditions: only the object that was read, never one created since in its place.
        body = {"propagationPolicy": "Background", "preconditions": {"uid": uid} if uid else {}}
        try:
            await self._request(report, "DELETE", resources.path(key), body=body)
        except kube.KubeError as exc:
            if exc.status not in (404, 409):  # gone already, or replaced by another object
                FAILURES.labels(kind=key.kind).inc()
                log.warning(
                    "provisioned object not deleted",
                    extra={"fields": {"object": str(key), "status": exc.status}},
                )
                report.failed.append(key)
                return
        self._deleted.add((key, uid))
        self._settled.pop(key, None)
        self._verified.pop(key, None)
        report.deleted.append(key)
        report.writes_in_order.append(("delete", key))
        WRITES.labels(kind=key.kind, verb="delete").inc()

    async def _get(self, key: ObjectKey, report: Report) -> dict[str, Any] | None:
        try:
            return await self._request(report, "GET", resources.path(key))
        except kube.KubeError as exc:
            if exc.status == 404:
                return None
            raise

    async def _request(self, report: Report, method: str, path: str, **kw: Any) -> dict[str, Any]:
        report.requests += 1
        return await asyncio.to_thread(kube.request, self._client, method, path, **kw)

    async def _confirm_leader(self) -> None:
        if not await self._confirm():
            raise _NotLeader()

    async def _failed(
        self, entry: GatewayProvision, key: ObjectKey, what: str, why: str, report: Report
    ) -> None:
        FAILURES.labels(kind=key.kind).inc()
        report.failed.append(key)
        message = f"{key} {what}: {why}"
        log.warning(
            "provisioning failed",
            extra={"fields": {"gateway": str(entry.gateway), "error": message}},
        )
        if self._events is not None:
            event = Event(entry.gateway, entry.uid, "Warning", FAILED_REASON, message)
            await self._events.record([event])

    def _log(self, report: Report) -> None:
        if report.writes or report.failed:
            fields = {
                "created": len(report.created),
                "updated": len(report.updated),
                "deleted": len(report.deleted),
                "failed": len(report.failed),
            }
            log.info("provisioned", extra={"fields": fields})


def _uid(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("uid", ""))


def _version(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("resourceVersion", ""))


def _why(exc: kube.KubeError) -> str:
    return f"{exc.status or 'unreachable'} {exc.message}"
