"""The identity's admin surface: /healthz, /readyz, /metrics, off the request path.

It runs on its own port with aiohttp; the request path never touches it. Readiness is a set of
named things still awaited, so /readyz can say exactly why the identity is not ready.
"""

from __future__ import annotations

import logging

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, Gauge, generate_latest

from coxswain_identity._version import __version__

log = logging.getLogger(__name__)

BUILD_INFO = Gauge(
    "coxswain_build_info", "The running build of this Coxswain service.", ["service", "version"]
)
BUILD_INFO.labels(service="identity", version=__version__).set(1)

# How long in-flight admin requests get on shutdown: well inside the 5 s SIGTERM budget.
SHUTDOWN_GRACE_SECONDS = 1.0


class Readiness:
    """What the identity still waits for before it can serve traffic."""

    def __init__(self) -> None:
        self._awaited: dict[str, str] = {}

    def await_(self, key: str, reason: str) -> None:
        self._awaited[key] = reason

    def satisfy(self, key: str) -> None:
        self._awaited.pop(key, None)

    @property
    def reasons(self) -> list[str]:
        return list(self._awaited.values())


def _app(readiness: Readiness) -> web.Application:
    async def healthz(_: web.Request) -> web.Response:
        return web.Response(text="ok\n")

    async def readyz(_: web.Request) -> web.Response:
        reasons = readiness.reasons
        if reasons:
            return web.Response(status=503, text="not ready: " + "; ".join(reasons) + "\n")
        return web.Response(text="ok\n")

    async def metrics(_: web.Request) -> web.Response:
        body = generate_latest(REGISTRY)
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})

    app = web.Application()
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)
    app.router.add_get("/metrics", metrics)
    return app


async def start(host: str, port: int, readiness: Readiness) -> web.AppRunner:
    runner = web.AppRunner(
        _app(readiness),
        handle_signals=False,
        access_log=None,
        shutdown_timeout=SHUTDOWN_GRACE_SECONDS,
    )
    await runner.setup()
    site = web.TCPSite(runner, host, port)
    await site.start()
    for sock in runner.addresses:
        log.info("admin server listening", extra={"fields": {"address": sock[0], "port": sock[1]}})
    return runner
