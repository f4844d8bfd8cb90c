"""The admin server every service runs beside its real work: health, readiness, metrics.

It runs on its own port with aiohttp; a service's request path never touches it.
- `/healthz`: the process answers (liveness);
- `/readyz`: 200, or 503 naming what is still awaited (`readiness.Readiness`);
- `/metrics`: the process's Prometheus registry, `coxswain_build_info` among it;
- `/api/v1/health`: the same readiness as JSON, plus whatever the service adds (`health`).
All four services take the same flags (`add_arguments`) and announce the bound port with the
same line, "admin server listening", which the devkit waits on.
"""

from __future__ import annotations

import argparse
import logging
from collections.abc import Callable, Iterable
from typing import Any

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, Gauge, generate_latest

from coxswain_service import logs
from coxswain_service.readiness import Readiness

__all__ = [
    "AdminServer",
    "add_arguments",
    "build_info",
    "LISTENING",
    "SHUTDOWN_GRACE_SECONDS",
]

log = logging.getLogger(__name__)

BUILD_INFO = Gauge(
    "coxswain_build_info", "The running build of this Coxswain service.", ["service", "version"]
)

# The line that announces the admin port (the devkit and tests wait on it).
LISTENING = "admin server listening"
# How long in-flight admin requests get on shutdown: well inside the 5 s SIGTERM budget.
SHUTDOWN_GRACE_SECONDS = 1.0

HealthExtra = Callable[[], dict[str, Any]]


def build_info(service: str, version: str) -> None:
    """Set `coxswain_build_info{service, version}` to 1."""
    BUILD_INFO.labels(service=service, version=version).set(1)


def add_arguments(parser: argparse.ArgumentParser, *, port: int) -> None:
    """The admin and logging flags every service's `serve` takes."""
    parser.add_argument("--admin-address", default="0.0.0.0", help="admin listen address")
    parser.add_argument(
        "--admin-port", type=int, default=port, help=f"admin port (0: any; default {port})"
    )
    parser.add_argument("--log-level", default="info", choices=logs.LEVELS)


class AdminServer:
    """The aiohttp admin application of one service, started and stopped as a unit."""

    def __init__(
        self,
        *,
        service: str,
        version: str,
        readiness: Readiness,
        health: HealthExtra | None = None,
        routes: Iterable[web.AbstractRouteDef] = (),
    ) -> None:
        self.service = service
        self.version = version
        self.readiness = readiness
        self._health = health
        self._routes = list(routes)
        self._runner: web.AppRunner | None = None
        build_info(service, version)

    def application(self) -> web.Application:
        app = web.Application()
        app.router.add_get("/healthz", self._healthz)
        app.router.add_get("/readyz", self._readyz)
        app.router.add_get("/metrics", self._metrics)
        app.router.add_get("/api/v1/health", self._api_health)
        app.router.add_routes(self._routes)
        return app

    async def start(self, host: str, port: int) -> list[tuple[str, int]]:
        """Bind and serve; return the bound (address, port) pairs, each logged as `LISTENING`."""
        runner = web.AppRunner(
            self.application(),
            handle_signals=False,
            access_log=None,
            shutdown_timeout=SHUTDOWN_GRACE_SECONDS,
        )
        await runner.setup()
        self._runner = runner
        await web.TCPSite(runner, host, port).start()
        bound = [(str(sock[0]), int(sock[1])) for sock in runner.addresses]
        for address, bound_port in bound:
            fields = {"service": self.service, "address": address, "port": bound_port}
            log.info(LISTENING, extra={"fields": fields})
        return bound

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def _healthz(self, _: web.Request) -> web.Response:
        return web.Response(text="ok\n")

    async def _readyz(self, _: web.Request) -> web.Response:
        status, text = self.readiness.readyz()
        return web.Response(status=status, text=text)

    async def _metrics(self, _: web.Request) -> web.Response:
        body = generate_latest(REGISTRY)
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})

    async def _api_health(self, _: web.Request) -> web.Response:
        document = self.readiness.health(service=self.service, version=self.version)
        if self._health is not None:
            document.update(self._health())
        return web.json_response(document)
