"""Watch streams: newline-delimited JSON events from a resourceVersion onward.

A watch replays the store's retained changes after its resourceVersion, then waits for more. With
no resourceVersion (or "0") it first sends the current objects as ADDED, as the real server does;
with `sendInitialEvents=true` (watch-list, which kubectl 1.37's informers use) it sends them
whatever the resourceVersion and ends them with a BOOKMARK annotated `k8s.io/initial-events-end`.
A resourceVersion older than the window is answered with one ERROR event carrying a 410 Status,
the signal informers relist on. Selectors filter as the watch cache does: an object that stops
matching is sent as DELETED, one that starts matching as ADDED. BOOKMARK events (when asked for)
carry only the latest resourceVersion. A stream ends at `timeoutSeconds`, when faults close all
watches, when its resource stops being served (its CRD deleted), or when the client goes.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from coxswain_devkit.apiserver import errors, tables
from coxswain_devkit.apiserver.faults import Faults
from coxswain_devkit.apiserver.listing import present
from coxswain_devkit.apiserver.meta import Clock
from coxswain_devkit.apiserver.registry import Kind, Registry
from coxswain_devkit.apiserver.selection import Selector
from coxswain_devkit.apiserver.store import Change, Expired, Obj, Store

DEFAULT_TIMEOUT = 1800.0
# The annotation on the BOOKMARK that ends a watch-list's initial events.
INITIAL_EVENTS_END = "k8s.io/initial-events-end"


@dataclass(frozen=True, slots=True)
class WatchRequest:
    kind: Kind  # what is watched, at the version asked for
    namespace: str | None  # None for every namespace
    selector: Selector  # label and field selectors
    resource_version: str  # "" or "0": current state first; else resume after it
    bookmarks: bool  # allowWatchBookmarks
    timeout: float  # timeoutSeconds
    table: str = ""  # kubectl's printing: "" for objects, else the Table's includeObject


@dataclass(frozen=True, slots=True)
class Context:
    store: Store
    registry: Registry
    faults: Faults
    bookmark_interval: float  # seconds between BOOKMARK events
    clock: Clock  # for the ages in kubectl's tables


def _event(kind: Kind, change: Change, selector: Selector) -> tuple[str, Obj] | None:
    """The event this change is for a watcher with `selector`, if any."""
    now = change.type != "DELETED" and selector.matches(change.obj)
    before = change.prev is not None and selector.matches(change.prev)
    if now and before:
        return ("MODIFIED", change.obj)
    if now:
        return ("ADDED", change.obj)
    if before:
        return ("DELETED", change.obj)
    return None


def _relevant(request: WatchRequest, change: Change) -> bool:
    if change.key.resource != request.kind.resource:
        return False
    return request.namespace in (None, change.key.namespace)


class Stream:
    def __init__(
        self, ctx: Context, request: WatchRequest, http: web.Request, response: web.StreamResponse
    ) -> None:
        self._ctx = ctx
        self._request = request
        self._http = http
        self._response = response
        self._epoch = ctx.faults.watch_epoch
        loop = asyncio.get_running_loop()
        self._deadline = loop.time() + request.timeout
        self._next_bookmark = loop.time() + ctx.bookmark_interval

    async def send(self, event_type: str, obj: Any) -> None:
        await self._ctx.faults.running()
        if self._request.table and event_type in ("ADDED", "MODIFIED", "DELETED"):
            obj = tables.table(
                obj,
                include_object=self._request.table,
                now=self._ctx.clock(),
                printer=self._request.kind.printer_columns,
            )
        line = json.dumps({"type": event_type, "object": obj}, separators=(",", ":")) + "\n"
        await self._response.write(line.encode())

    async def run(self) -> None:
        store, request = self._ctx.store, self._request
        cursor = store.resource_version
        # KEP-3157 (watch-list, kubectl 1.37's informers): with sendInitialEvents=true the
        # current state comes first whatever the resourceVersion ("NotOlderThan" it), then a
        # BOOKMARK annotated k8s.io/initial-events-end, then changes from that state on.
        initial = self._http.query.get("sendInitialEvents", "").lower() == "true"
        if initial or request.resource_version in ("", "0"):
            for obj in store.items(request.kind.resource, request.namespace):
                if request.selector.matches(obj):
                    await self.send("ADDED", present(request.kind, obj))
            if initial:
                await self._bookmark(cursor, {INITIAL_EVENTS_END: "true"})
        else:
            cursor = int(request.resource_version)
        while True:
            try:
                changes = store.changes_after(cursor)
            except Expired as err:
                await self.send("ERROR", errors.expired(str(err)).status())
                return
            for change in changes:
                await self._deliver(change)
            cursor = max(cursor, store.resource_version) if not changes else changes[-1].rv
            if self._over():
                return
            await self._maybe_bookmark(cursor)
            await store.wait(cursor, self._until_next())

    async def _deliver(self, change: Change) -> None:
        if not _relevant(self._request, change):
            return
        event = _event(self._request.kind, change, self._request.selector)
        if event is not None:
            await self.send(event[0], present(self._request.kind, event[1]))

    async def _maybe_bookmark(self, cursor: int) -> None:
        loop = asyncio.get_running_loop()
        if not self._request.bookmarks or loop.time() < self._next_bookmark:
            return
        self._next_bookmark = loop.time() + self._ctx.bookmark_interval
        await self._bookmark(cursor)

    async def _bookmark(self, cursor: int, annotations: dict[str, str] | None = None) -> None:
        kind = self._request.kind
        metadata: dict[str, Any] = {"resourceVersion": str(cursor)}
        if annotations:
            metadata["annotations"] = annotations
        await self.send(
            "BOOKMARK", {"kind": kind.kind, "apiVersion": kind.api_version, "metadata": metadata}
        )

    def _until_next(self) -> float:
        now = asyncio.get_running_loop().time()
        until = self._deadline - now
        if self._request.bookmarks:
            until = min(until, self._next_bookmark - now)
        return max(until, 0.0)

    def _over(self) -> bool:
        kind = self._request.kind
        transport = self._http.transport
        return (
            transport is None
            or transport.is_closing()
            or asyncio.get_running_loop().time() >= self._deadline
            or self._ctx.faults.watch_epoch != self._epoch
            or self._ctx.registry.lookup(kind.group, kind.version, kind.plural) is None
        )


async def serve(ctx: Context, request: WatchRequest, http: web.Request) -> web.StreamResponse:
    response = web.StreamResponse(
        headers={"Content-Type": "application/json", "Cache-Control": "no-cache"}
    )
    response.enable_chunked_encoding()
    await response.prepare(http)
    await ctx.faults.watch_opened()
    try:
        await Stream(ctx, request, http, response).run()
        await response.write_eof()
    except (ConnectionResetError, ConnectionError):
        pass  # the client went away: nothing left to tell it
    finally:
        await ctx.faults.watch_opened(-1)
    return response
