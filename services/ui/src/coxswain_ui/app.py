"""The UI's FastAPI application: health, readiness and metrics beside the pages.

The UI is ready once it has reached the controller's API, since every page it serves is read
from there; until then /readyz says which controller it is waiting for. The answers are the
shared `coxswain_service.readiness` ones, so the page port and the admin port say the same.
"""

from __future__ import annotations

from fastapi import FastAPI, Response
from fastapi.responses import PlainTextResponse
from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, generate_latest

from coxswain_service.readiness import Readiness
from coxswain_ui._version import __version__


def create(readiness: Readiness) -> FastAPI:
    app = FastAPI(title="Coxswain", version=__version__, docs_url=None, redoc_url=None)

    @app.get("/healthz", response_class=PlainTextResponse)
    async def healthz() -> str:
        return "ok\n"

    @app.get("/readyz", response_class=PlainTextResponse)
    async def readyz(response: Response) -> str:
        response.status_code, text = readiness.readyz()
        return text

    @app.get("/metrics")
    async def metrics() -> Response:
        return Response(generate_latest(REGISTRY), media_type=CONTENT_TYPE_LATEST)

    return app
