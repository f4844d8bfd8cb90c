"""A small async Kubernetes client for the devkit's own cluster parts: the node agent and the LB.

They play the kubelet, kube-controller-manager and a cloud load balancer against the API
emulator (or any API server reachable without credentials). They live on one event loop with a
task per pod and per listener, so they cannot use the `kubernetes` client, whose calls block;
plain JSON over aiohttp is all they need. `Changes` is their informer, reduced to what a
level-triggered reconcile loop needs: it lists and watches a few collections and wakes the loop
whenever any of them changes, relisting on 410 and reconnecting after errors. The loop then
reads the collections afresh, so no cache has to be kept consistent.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncIterator, Mapping, Sequence
from types import TracebackType
from typing import Any

import aiohttp

from coxswain_service import tasks

__all__ = ["ApiError", "Changes", "Kube", "Obj", "path"]

log = logging.getLogger("coxswain_devkit.kube")

Obj = dict[str, Any]

# How long a failed watch waits before it lists again.
RETRY_SECONDS = 0.5
# Watches are ended by the server after this; the loop then resumes from its resourceVersion.
WATCH_SECONDS = 300
REQUEST_TIMEOUT = aiohttp.ClientTimeout(total=30)
MERGE_PATCH = "application/merge-patch+json"


class ApiError(Exception):
    """The API server refused a request: its HTTP code, reason and message."""

    def __init__(self, code: int, reason: str, message: str) -> None:
        super().__init__(f"{code} {reason}: {message}")
        self.code = code
        self.reason = reason
        self.message = message


def path(
    plural: str,
    namespace: str | None = None,
    name: str = "",
    subresource: str = "",
    *,
    group: str = "",
    version: str = "v1",
) -> str:
    """The URL path of a collection, an object or one of its subresources."""
    parts = ["api", "v1"] if not group else ["apis", group, version]
    if namespace is not None:
        parts += ["namespaces", namespace]
    parts += [p for p in (plural, name, subresource) if p]
    return "/" + "/".join(parts)


async def _error(response: aiohttp.ClientResponse) -> ApiError:
    text = await response.text()
    try:
        status = json.loads(text)
    except ValueError:
        status = {}
    if not isinstance(status, dict):
        status = {}
    return ApiError(
        response.status, str(status.get("reason", "")), str(status.get("message", text))
    )


class Kube:
    """JSON requests to one API server; `async with Kube(url) as kube:`."""

    def __init__(self, url: str) -> None:
        self.url = url.rstrip("/")
        self._session: aiohttp.ClientSession | None = None

    async def __aenter__(self) -> Kube:
        self._session = aiohttp.ClientSession(timeout=REQUEST_TIMEOUT)
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    async def close(self) -> None:
        session, self._session = self._session, None
        if session is not None:
            await session.close()

    @property
    def session(self) -> aiohttp.ClientSession:
        if self._session is None:
            raise RuntimeError("Kube is not open")
        return self._session

    async def request(
        self,
        method: str,
        where: str,
        body: Any = None,
        *,
        content_type: str = "application/json",
        params: Mapping[str, str] | None = None,
    ) -> Obj:
        data = None if body is None else json.dumps(body)
        headers = {"Content-Type": content_type, "Accept": "application/json"}
        async with self.session.request(
            method, self.url + where, data=data, headers=headers, params=params
        ) as response:
            if response.status >= 300:
                raise await _error(response)
            doc = await response.json(content_type=None)
            return doc if isinstance(doc, dict) else {}

    async def get(self, where: str) -> Obj | None:
        """The object, or None when it does not exist."""
        try:
            return await self.request("GET", where)
        except ApiError as err:
            if err.code == 404:
                return None
            raise

    async def items(self, where: str, *, label_selector: str = "") -> list[Obj]:
        params = {"labelSelector": label_selector} if label_selector else None
        listed = await self.request("GET", where, params=params)
        return list(listed.get("items") or [])

    async def create(self, where: str, body: Obj) -> Obj:
        return await self.request("POST", where, body)

    async def put(self, where: str, body: Obj) -> Obj:
        return await self.request("PUT", where, body)

    async def merge_patch(self, where: str, body: Obj) -> Obj:
        return await self.request("PATCH", where, body, content_type=MERGE_PATCH)

    async def delete(self, where: str) -> None:
        """Delete; an object already gone is not an error."""
        try:
            await self.request("DELETE", where)
        except ApiError as err:
            if err.code != 404:
                raise

    async def watch(self, where: str, resource_version: str) -> AsyncIterator[Obj]:
        """The events of one watch from `resource_version`, until the server ends it."""
        params = {
            "watch": "true",
            "resourceVersion": resource_version,
            "allowWatchBookmarks": "true",
            "timeoutSeconds": str(WATCH_SECONDS),
        }
        timeout = aiohttp.ClientTimeout(total=None, sock_read=WATCH_SECONDS + 30)
        async with self.session.get(self.url + where, params=params, timeout=timeout) as response:
            if response.status >= 300:
                raise await _error(response)
            async for line in response.content:
                if line.strip():
                    event = json.loads(line)
                    if isinstance(event, dict):
                        yield event


class Changes:
    """Wakes a reconcile loop when any watched collection changes (or `poke()` is called)."""

    def __init__(self, kube: Kube, collections: Sequence[str]) -> None:
        self._kube = kube
        self._collections = tuple(collections)
        self._event = asyncio.Event()
        self._tasks: list[asyncio.Task[Any]] = []

    def start(self) -> None:
        self._event.set()  # the first pass runs at once
        for where in self._collections:
            self._tasks.append(tasks.spawn(self._follow(where), name=f"watch {where}"))

    async def stop(self) -> None:
        await tasks.cancel(*self._tasks)
        self._tasks.clear()

    def poke(self) -> None:
        self._event.set()

    async def wait(self, within: float) -> None:
        """Until something changed since the last call, or `within` seconds passed."""
        # asyncio.timeout, not wait_for: 3.11's wait_for can swallow a cancellation that arrives
        # as the event is set, and a loop that waits here would then never stop.
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(within):
                await self._event.wait()
        self._event.clear()

    async def _follow(self, where: str) -> None:
        resource_version = ""
        while True:
            try:
                if not resource_version:
                    listed = await self._kube.request("GET", where)
                    resource_version = str(listed.get("metadata", {}).get("resourceVersion", ""))
                    self._event.set()
                resource_version = await self._stream(where, resource_version)
            except (aiohttp.ClientError, ApiError, TimeoutError, ValueError) as err:
                log.debug("watch failed", extra={"fields": {"path": where, "error": str(err)}})
                resource_version = ""
                await asyncio.sleep(RETRY_SECONDS)

    async def _stream(self, where: str, resource_version: str) -> str:
        """Follow one watch; the resourceVersion to resume from ("" to relist)."""
        async for event in self._kube.watch(where, resource_version):
            obj = event.get("object") or {}
            if event.get("type") == "ERROR":
                return ""  # 410 Gone (or any error): list again
            resource_version = str(obj.get("metadata", {}).get("resourceVersion", resource_version))
            if event.get("type") != "BOOKMARK":
                self._event.set()
        return resource_version
