"""The UI's FastAPI application: health, readiness and metrics beside the pages.

The UI is ready once it has reached the controller's API, since every page it serves is read
from there; until then /readyz says which controller it is waiting for.
"""

from __future__ import annotations

from fastapi import FastAPI, Response
from fastapi.responses import PlainTextResponse
from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, Gauge, generate_latest

from coxswain_ui._version import __version__

BUILD_INFO = Gauge(
    "coxswain_build_info", "The running build of this Coxswain service.", ["service", "version"]
)
BUILD_INFO.labels(service="ui", version=__version__).set(1)


class Readiness:
    """What the UI still waits for before its pages can show anything."""

    def __init__(self) -> None:
        self._awaited: dict[str, str] = {}

    def await_(self, key: str, reason: str) -> None:
        self._awaited[key] = reason

    def satisfy(self, key: str) -> None:
        self._awaited.pop(key, None)

    @property
    def reasons(self) -> list[str]:
        return list(self._awaited.values())


def create(readiness: Readiness) -> FastAPI:
    app = FastAPI(title="Coxswain", version=__version__, docs_url=None, redoc_url=None)

    @app.get("/healthz", response_class=PlainTextResponse)
    async def healthz() -> str:
        return "ok\n"

    @app.get("/readyz", response_class=PlainTextResponse)
    async def readyz(response: Response) -> str:
        reasons = readiness.reasons
        if reasons:
            response.status_code = 503
            return "not ready: " + "; ".join(reasons) + "\n"
        return "ok\n"

    @app.get("/metrics")
    async def metrics() -> Response:
        return Response(generate_latest(REGISTRY), media_type=CONTENT_TYPE_LATEST)

    return app
