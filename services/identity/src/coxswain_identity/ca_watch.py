"""Follows the CA Secret: list, then watch from the list's resourceVersion, in a thread of its own.

The client blocks, so the watch runs in a worker thread and hands every state of the Secret
(its data, or None once it is gone) to a callback; `service` hops that onto the event loop. A
watch that ends (server timeout) resumes from the last resourceVersion seen; 410 Gone or any
error relists after a short backoff. `stop()` shuts the open response down so the thread ends at
once rather than at the server's timeout.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Iterator
from typing import Any

from kubernetes.watch.watch import iter_resp_lines

from coxswain_identity import kube
from coxswain_identity.ca import ObjectRef

log = logging.getLogger(__name__)

SecretData = dict[str, str] | None
# The watch's server-side timeout: a silent connection is replaced this often.
WATCH_TIMEOUT_SECONDS = 60
RETRY_SECONDS = (0.5, 1.0, 2.0, 4.0, 8.0)


class Relist(Exception):
    """The watch cannot resume from its resourceVersion (410 Gone)."""


class SecretWatcher:
    """Calls `on_change(data)` from its thread for the Secret's first state and every change."""

    def __init__(self, core: Any, ref: ObjectRef, on_change: Callable[[SecretData], None]) -> None:
        self._core = core
        self._ref = ref
        self._on_change = on_change
        self._stopped = threading.Event()
        self._lock = threading.Lock()
        self._response: Any = None
        self._thread = threading.Thread(target=self._run, name=f"watch-{ref}", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        self._stopped.set()
        with self._lock:
            if self._response is not None:
                self._response.shutdown()
        if self._thread.is_alive():
            self._thread.join(timeout)

    def _run(self) -> None:
        failures = 0
        while not self._stopped.is_set():
            try:
                version = self._list()
                failures = 0
                while not self._stopped.is_set():
                    version = self._watch(version)
            except Relist:
                continue
            except Exception as exc:  # noqa: BLE001 - any failure: log, back off, relist
                if self._stopped.is_set():
                    return
                delay = RETRY_SECONDS[min(failures, len(RETRY_SECONDS) - 1)]
                failures += 1
                log.warning(
                    "CA Secret watch failed; relisting",
                    extra={"fields": {"secret": str(self._ref), "error": str(exc), "retry": delay}},
                )
                self._stopped.wait(delay)

    def _selector(self) -> dict[str, Any]:
        return {"field_selector": f"metadata.name={self._ref.name}", "_preload_content": False}

    def _list(self) -> str:
        response = kube.blocking(
            self._core.list_namespaced_secret, self._ref.namespace, **self._selector()
        )
        body = json.loads(response.data)
        items = body.get("items") or []
        self._on_change((items[0].get("data") or {}) if items else None)
        return str(body["metadata"]["resourceVersion"])

    def _watch(self, version: str) -> str:
        response = kube.blocking(
            self._core.list_namespaced_secret,
            self._ref.namespace,
            watch=True,
            resource_version=version,
            allow_watch_bookmarks=True,
            timeout_seconds=WATCH_TIMEOUT_SECONDS,
            _request_timeout=(kube.REQUEST_TIMEOUT_SECONDS, WATCH_TIMEOUT_SECONDS + 10),
            **self._selector(),
        )
        with self._lock:
            self._response = response
        if self._stopped.is_set():
            response.shutdown()
        try:
            for event in self._events(response):
                version = self._apply(event, version)
        finally:
            with self._lock:
                self._response = None
            response.release_conn()
        return version

    def _events(self, response: Any) -> Iterator[dict[str, Any]]:
        for line in iter_resp_lines(response):
            if line:
                yield json.loads(line)

    def _apply(self, event: dict[str, Any], version: str) -> str:
        kind, obj = event.get("type"), event.get("object") or {}
        if kind == "ERROR":
            if obj.get("code") == 410:
                raise Relist()
            raise RuntimeError(f"watch error: {obj.get('message')}")
        if kind in ("ADDED", "MODIFIED"):
            self._on_change(obj.get("data") or {})
        elif kind == "DELETED":
            self._on_change(None)
        return str(obj.get("metadata", {}).get("resourceVersion") or version)
