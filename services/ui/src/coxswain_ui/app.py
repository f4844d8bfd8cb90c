"""The UI's FastAPI application: the pages, their static files, health, readiness, metrics.

The UI is ready once it has reached the controller's API, since every page it serves is read
from there; until then /readyz says which controller it is waiting for. The answers are the
shared `coxswain_service.readiness` ones, so the page port and the admin port say the same.
Templates and static files are package data (`templates/`, `static/`, a `resources` target in
the BUILD), loaded through the package so the PEX carries them. Jinja autoescapes every value
it renders; every answer carries a Content-Security-Policy that allows only this origin's
script and style (no inline script), and may not be framed.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import jinja2
from fastapi import FastAPI, Request, Response
from fastapi.responses import PlainTextResponse
from fastapi.staticfiles import StaticFiles
from fastapi.templating import Jinja2Templates
from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, generate_latest

from coxswain_service.readiness import Readiness
from coxswain_ui import pages, views
from coxswain_ui._version import __version__
from coxswain_ui.client import ControllerClient

__all__ = ["SECURITY_HEADERS", "create", "templates"]

SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
        "connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
}


def templates() -> Jinja2Templates:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("coxswain_ui", "templates"),
        autoescape=True,  # every template, whatever its name
        undefined=jinja2.ChainableUndefined,
    )
    env.filters.update(views.FILTERS)
    env.tests.update(views.TESTS)
    return Jinja2Templates(env=env)


def create(
    readiness: Readiness, client: ControllerClient | None = None, *, refresh: int = 5
) -> FastAPI:
    app = FastAPI(title="Coxswain", version=__version__, docs_url=None, redoc_url=None)
    app.openapi_url = None

    @app.middleware("http")
    async def security_headers(
        request: Request, call_next: Callable[[Request], Awaitable[Response]]
    ) -> Response:
        response = await call_next(request)
        for name, value in SECURITY_HEADERS.items():
            response.headers.setdefault(name, value)
        if request.url.path not in ("/healthz", "/readyz", "/metrics"):
            response.headers.setdefault("Cache-Control", "no-store")
        return response

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

    if client is not None:
        app.mount("/static", StaticFiles(packages=[("coxswain_ui", "static")]), name="static")
        app.include_router(pages.router(client, templates(), refresh=refresh))
    return app
