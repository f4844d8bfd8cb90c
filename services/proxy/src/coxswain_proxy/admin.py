"""The proxy's admin surface: /healthz, /readyz, /metrics, off the request path.

It runs on its own port with aiohttp; the request path never touches it. Readiness is a set of
named things still awaited, so /readyz can say exactly why the proxy is not ready. Warnings are
things an operator must see that do not make a proxy holding routing unready (discovery stopped
on a wire-version mismatch: the proxy still serves its last good snapshot).
"""

from __future__ import annotations

import logging

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, Gauge, generate_latest

from coxswain_proxy._version import __version__

log = logging.getLogger(__name__)

BUILD_INFO = Gauge(
    "coxswain_build_info", "The running build of this Coxswain service.", ["service", "version"]
)
BUILD_INFO.labels(service="proxy", version=__version__).set(1)

# How long in-flight admin requests get on shutdown: well inside the 5 s SIGTERM budget.
SHUTDOWN_GRACE_SECONDS = 1.0


class Readiness:
    """What the proxy still waits for before it can serve traffic."""

    def __init__(self) -> None:
        self._awaited: dict[str, str] = {}
        self._warnings: dict[str, str] = {}

    def await_(self, key: str, reason: str) -> None:
        self._awaited[key] = reason

    def satisfy(self, key: str) -> None:
        self._awaited.pop(key, None)

    def warn(self, key: str, warning: str) -> None:
        self._warnings[key] = warning

    def clear_warning(self, key: str) -> None:
        self._warnings.pop(key, None)

    @property
    def reasons(self) -> list[str]:
        return list(self._awaited.values())

    @property
    def warnings(self) -> list[str]:
        return list(self._warnings.values())


def _app(readiness: Readiness) -> web.Application:
    async def healthz(_: web.Request) -> web.Response:
        return web.Response(text="ok\n")

    async def readyz(_: web.Request) -> web.Response:
        reasons = readiness.reasons
        notes = "".join(f"warning: {w}\n" for w in readiness.warnings)
        if reasons:
            text = "not ready: " + "; ".join(reasons) + "\n" + notes
            return web.Response(status=503, text=text)
        return web.Response(text="ok\n" + notes)

    async def metrics(_: web.Request) -> web.Response:
        body = generate_latest(REGISTRY)
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})

    app = web.Application()
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)

    async def health(_: web.Request) -> web.Response:
        return web.json_response(
            {
                "service": "proxy",
                "version": __version__,
                "ready": not readiness.reasons,
                "notReady": readiness.reasons,
                "warnings": readiness.warnings,
            }
        )

    app.router.add_get("/metrics", metrics)
    app.router.add_get("/api/v1/health", health)
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
