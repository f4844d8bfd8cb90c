"""One watch per Secret that basic auth or an Ingress's TLS annotations name (auth-tls-secret,
proxy-ssl-secret), started and stopped as the references change.

Where it sits: spec 000 has the controller read "Secret (kubernetes.io/tls)", which it lists and
watches across the cluster; an htpasswd Secret is usually Opaque. Watching every Secret would
hold all of the cluster's credentials in memory, so the controller reads only those an Ingress
or CoxswainPolicy names (`references`): each one alone, in its namespace, by name
(`kinds.referenced_secret`), through the same `reflector.Reflector` as every kind, into the
cache's one Secret table that translation reads.

`follow` is the cache's follow hook: after each event it asks `references` whether the named
set changed, starts a reflector for each Secret newly named (its `Started` holds the cache's
`changed` until the Secret's first list, bounded by `WatchSettings.hold_seconds`), and stops
the reflector of each Secret no longer named (its `Stopped` takes the Secret out of the cache).
A blocked watch holds a thread, so these watches have their own pool, apart from the kinds'.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from prometheus_client import Gauge

from coxswain_controller.sources import cache, kinds, references, reflector
from coxswain_controller.sources.reflector import WatchSettings
from coxswain_service import tasks

log = logging.getLogger(__name__)

__all__ = ["SecretWatches"]

WATCHED = Gauge(
    "coxswain_controller_referenced_secrets",
    "Secrets watched by name because basic auth or TLS annotations name them (beyond the TLS "
    "Secrets).",
)

# Threads are made as watches need them; past this many watches, the rest wait for a thread.
MAX_WATCHES = 256


class SecretWatches:
    def __init__(
        self,
        client: Any,
        *,
        emit: Callable[[cache.Event], None],
        settings: WatchSettings,
        ingress_controller: str,
    ) -> None:
        self._client = client
        self._emit = emit
        self._settings = settings
        self._references = references.References(ingress_controller)
        self._executor = ThreadPoolExecutor(MAX_WATCHES + 4, thread_name_prefix="coxswain-secret")
        self._running: dict[cache.Key, tuple[reflector.Reflector, asyncio.Task[None]]] = {}
        self._timers: dict[cache.Key, asyncio.TimerHandle] = {}
        self._stopped: set[asyncio.Task[None]] = set()  # cancelled, still unwinding

    @property
    def watched(self) -> dict[cache.Key, reflector.Reflector]:
        """The running watches by the (namespace, name) of their Secret."""
        return {key: entry[0] for key, entry in self._running.items()}

    def follow(self, event: cache.Event, tables: references.Tables) -> list[cache.Event]:
        """The cache's follow hook: Started and Stopped for the Secrets named or no longer."""
        if not self._references.update(event, tables):
            return []
        wanted = self._references.wanted
        found: list[cache.Event] = [
            self._stop(key) for key in sorted(self._running.keys() - wanted)
        ]
        found += [self._start(key) for key in sorted(wanted - self._running.keys())]
        WATCHED.set(len(self._running))
        if len(self._running) > MAX_WATCHES:
            log.warning(
                "more Secrets named than watch threads; some wait for a thread",
                extra={"fields": {"named": len(self._running), "threads": MAX_WATCHES}},
            )
        return found

    def _start(self, key: cache.Key) -> cache.Event:
        kind = kinds.referenced_secret(*key)
        watcher = reflector.Reflector(
            self._client, kind, self._emit, executor=self._executor, settings=self._settings
        )
        task = tasks.spawn(watcher.run(), name=f"reflector-secret-{key[0]}-{key[1]}")
        self._running[key] = (watcher, task)
        loop = asyncio.get_running_loop()
        released = cache.Released(kind)
        self._timers[key] = loop.call_later(self._settings.hold_seconds, self._emit, released)
        log.info("secret watch started", extra={"fields": {"secret": "/".join(key)}})
        return cache.Started(kind, hold=True)

    def _stop(self, key: cache.Key) -> cache.Event:
        watcher, task = self._running.pop(key)
        self._timers.pop(key).cancel()
        # Cancelled before its next step, the reflector emits nothing more: Stopped comes last.
        task.cancel()
        self._stopped.add(task)
        task.add_done_callback(self._stopped.discard)
        log.info("secret watch stopped", extra={"fields": {"secret": "/".join(key)}})
        return cache.Stopped(watcher.kind)

    async def stop(self) -> None:
        for timer in self._timers.values():
            timer.cancel()
        await tasks.cancel(*(task for _, task in self._running.values()), *self._stopped)
        self._running.clear()
        # Not cancel_futures: the queued work is the cancelled reflectors closing their streams.
        await asyncio.to_thread(self._executor.shutdown, wait=True)
