"""One kind's reflector: list, then watch from the list's resourceVersion, forever.

Convention 6 ("list, then watch from the list's resourceVersion; relist on 410; reconnect on
silence"), the loop client-go's reflector runs:

- a list (paged) replaces the kind's objects in the cache and gives the resourceVersion to
  watch from; a watch that ends or goes silent resumes from the last resourceVersion seen
  (events and BOOKMARKs both move it), so a reconnect costs no relist;
- 410 Gone, as the watch request's status or as an ERROR event, means that resourceVersion left
  the server's window: relist;
- any other failure waits a jittered, growing backoff and tries the same step again; a 403
  (RBAC refuses the list or the watch) is also reported (`on_access`) with the verb and the
  server's message, so readiness names what the role lacks, and cleared once the step succeeds.

The client blocks, so every request and every read of the stream runs on the supervisor's
worker threads; the loop itself only decides. Cancelling `run` aborts the open stream, which
wakes the thread blocked reading it.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Callable
from concurrent.futures import Executor
from dataclasses import dataclass, field
from typing import Any, TypeVar

from prometheus_client import Counter

from coxswain_controller.kube import api as kube
from coxswain_controller.kube.api import JSON
from coxswain_controller.sources import backoff, cache, kinds

log = logging.getLogger(__name__)

T = TypeVar("T")

WATCH_RESTARTS = Counter(
    "coxswain_controller_watch_restarts_total",
    "Watches restarted, by kind and why (closed, silence, expired, error).",
    ["kind", "reason"],
)


@dataclass(frozen=True, slots=True)
class WatchSettings:
    # The server ends each watch after about this long (jittered so kinds do not reconnect
    # together); the reflector resumes from its resourceVersion.
    timeout_seconds: int = 300
    # No byte (event or BOOKMARK) for this long: the connection is presumed dead and reopened.
    silence_seconds: float = 90.0
    request_timeout: float = 30.0  # any list page or discovery request
    page_size: int = 500  # objects per list page
    # How long changes wait for the first list of a Secret basic auth has just named (the
    # cache's hold), so that the pass seeing the reference sees the Secret too.
    hold_seconds: float = 2.0
    backoff: backoff.Policy = field(default_factory=backoff.Policy)


class Expired(Exception):
    """The resourceVersion is older than the server keeps: relist."""


# (kind, why it is refused, or None once it is allowed again)
AccessReport = Callable[[kinds.Kind, str | None], None]
FORBIDDEN = 403


class Reflector:
    def __init__(
        self,
        client: Any,
        kind: kinds.Kind,
        emit: Callable[[cache.Event], None],
        *,
        executor: Executor,
        settings: WatchSettings,
        on_access: AccessReport | None = None,
    ) -> None:
        self.kind = kind
        self._on_access = on_access
        self.refused = ""  # the last 403's reason while it stands
        self._client = client
        self._emit = emit
        self._executor = executor
        self._settings = settings
        self._backoff = backoff.Backoff(settings.backoff)
        self.resource_version = ""  # "" until listed, and again when a relist is due

    async def run(self) -> None:
        while True:
            step = self._watch if self.resource_version else self._list
            try:
                await step()
            except Expired as exc:
                self._restart("expired", exc)
                self.resource_version = ""
            except kube.Silent as exc:
                self._restart("silence", exc)
            except kube.KubeError as exc:
                self._restart("error", exc)
                if exc.status == FORBIDDEN:
                    verb = "watch" if step == self._watch else "list"
                    self._access(f"forbidden to {verb} {self._resource()}: {exc.message}")
                await asyncio.sleep(self._backoff.next())

    def _resource(self) -> str:
        group = self.kind.group
        return f"{self.kind.plural}.{group}" if group else self.kind.plural

    def _access(self, refused: str) -> None:
        """Report a refusal, or ("") that the kind is readable again; only changes."""
        if refused == self.refused:
            return
        self.refused = refused
        if self._on_access is not None:
            self._on_access(self.kind, refused or None)

    def _restart(self, reason: str, exc: Exception | None) -> None:
        WATCH_RESTARTS.labels(kind=self.kind.name, reason=reason).inc()
        fields = {"kind": self.kind.label, "reason": reason, "error": str(exc or "")}
        level = logging.WARNING if reason == "error" else logging.DEBUG
        log.log(level, "watch restarting", extra={"fields": fields})

    async def _blocking(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, lambda: fn(*args, **kwargs))

    async def _list(self) -> None:
        items: list[JSON] = []
        token = ""
        while True:
            page = await self._page(token)
            items.extend(self._typed(obj) for obj in page.get("items") or ())
            token = page.get("metadata", {}).get("continue", "")
            if not token:
                break
        version = str(page.get("metadata", {}).get("resourceVersion", ""))
        self._emit(cache.Listed(self.kind, tuple(items), version))
        self.resource_version = version
        self._backoff.reset()
        self._access("")

    async def _page(self, token: str) -> JSON:
        query = [("limit", str(self._settings.page_size)), *self._selector()]
        if token:
            query.append(("continue", token))
        try:
            return await self._blocking(
                kube.request,
                self._client,
                "GET",
                self.kind.path,
                query=query,
                timeout=self._settings.request_timeout,
            )
        except kube.KubeError as exc:
            if exc.status == 410:  # the continue token expired mid-list
                raise Expired(str(exc)) from exc
            raise

    def _typed(self, obj: JSON) -> JSON:
        # List items come without kind and apiVersion; watch events carry them. Same shape.
        return {"apiVersion": self.kind.api_version, "kind": self.kind.name, **obj}

    def _selector(self) -> list[tuple[str, str]]:
        found = [("fieldSelector", self.kind.field_selector)] if self.kind.field_selector else []
        if self.kind.label_selector:
            found.append(("labelSelector", self.kind.label_selector))
        return found

    async def _watch(self) -> None:
        stream = await self._open()
        ended = False
        try:
            while (event := await self._blocking(stream.next_event)) is not None:
                self._on_event(event)
            ended = True
        finally:
            if not ended:  # cancelled, or a bad event: wake the thread still reading
                stream.abort()
            self._executor.submit(stream.close)
        self._restart("closed", None)

    async def _open(self) -> kube.WatchStream:
        timeout = int(self._settings.timeout_seconds * random.uniform(1.0, 1.2))  # noqa: S311
        query = [
            ("watch", "true"),
            ("allowWatchBookmarks", "true"),
            ("resourceVersion", self.resource_version),
            ("timeoutSeconds", str(timeout)),
            *self._selector(),
        ]
        try:
            stream = await self._blocking(
                kube.open_watch,
                self._client,
                self.kind.path,
                query=query,
                silence=self._settings.silence_seconds,
            )
        except kube.KubeError as exc:
            if exc.status == 410:
                raise Expired(str(exc)) from exc
            raise
        self._backoff.reset()
        self._access("")
        return stream

    def _on_event(self, event: JSON) -> None:
        kind, obj = event.get("type"), event.get("object") or {}
        if kind == "ERROR":
            code = int(obj.get("code") or 0)
            if code == 410:
                raise Expired(str(obj.get("message", "")))
            raise kube.KubeError(code, str(obj.get("message", "watch ERROR event")))
        version = str(obj.get("metadata", {}).get("resourceVersion", ""))
        if kind == "BOOKMARK":
            self._emit(cache.Progressed(self.kind, version))
        elif kind in ("ADDED", "MODIFIED", "DELETED"):
            self._emit(cache.Changed(self.kind, kind, obj, version))
        else:
            return
        self.resource_version = version or self.resource_version
