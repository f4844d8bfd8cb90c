"""The pages' common shape: read the controller's API for one user, render one template, and
turn a controller error into a page (never a traceback).

`Pages` is what every page handler is a method of: `api` reads `/api/v1` with the right token
(the UI's own, or the signed-in user's cookie: `SignIn` when there is none), `render` fills in
what the layout needs (the nav, the refresh interval, the controller's URL), and `page` wraps a
handler so that an `ApiError` becomes the error page with the controller's status (401, 403,
404, 503, or 502 when it cannot be reached), its reason, its message and what to do.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from fastapi import Request
from fastapi.responses import RedirectResponse, Response
from fastapi.templating import Jinja2Templates

from coxswain_ui import views
from coxswain_ui.client import ApiError, ControllerClient

__all__ = ["NAV", "TOKEN_COOKIE", "Handler", "Pages", "SignIn"]

TOKEN_COOKIE = "coxswain_ui_token"  # noqa: S105 (a cookie name)
NAV = (
    ("/", "Overview"),
    ("/fleet", "Fleet"),
    ("/gateways", "Gateways"),
    ("/routes", "Routes"),
    ("/problems", "Problems"),
    ("/events", "Events"),
    ("/explain", "Explain"),
    ("/manifests", "Manifests"),
    ("/logs", "Logs"),
)

Handler = Callable[[Request], Awaitable[Response]]


class SignIn(Exception):
    """No token for this user yet: send them to /login."""


class Pages:
    def __init__(
        self, client: ControllerClient, templates: Jinja2Templates, *, refresh: int
    ) -> None:
        self.client = client
        self.templates = templates
        self.refresh = refresh

    def token(self, request: Request) -> str | None:
        if self.client.has_own_token:
            return None
        token = request.cookies.get(TOKEN_COOKIE, "")
        if not token:
            raise SignIn
        return token

    async def api(self, request: Request, path: str, **kwargs: Any) -> Any:
        return await self.client.get(path, token=self.token(request), **kwargs)

    def render(
        self,
        request: Request,
        template: str,
        title: str,
        section: str,
        *,
        status: int = 200,
        live: bool = True,
        **context: Any,
    ) -> Response:
        context.update(
            title=title,
            section=section,
            nav=NAV,
            refresh=self.refresh if live else 0,
            controller_url=self.client.url,
            signed_in=not self.client.has_own_token and bool(request.cookies.get(TOKEN_COOKIE)),
        )
        return self.templates.TemplateResponse(request, template, context, status_code=status)

    def page(self, section: str, body: Handler) -> Handler:
        """`body` with controller errors shown as the error page, and sign-in when needed."""

        async def handler(request: Request) -> Response:
            try:
                return await body(request)
            except SignIn:
                return RedirectResponse("/login", status_code=303)
            except ApiError as err:
                if err.status == 401 and not self.client.has_own_token:
                    return RedirectResponse("/login?expired=1", status_code=303)
                title = "Controller error" if err.status != 404 else "Not found"
                return self.render(
                    request,
                    "error.html",
                    title,
                    section,
                    status=err.status,
                    error=views.error_view(err),
                )

        return handler

    async def optional(self, request: Request, path: str) -> tuple[Any, str]:
        """A document the page can do without (the overview's parts): (it or None, why)."""
        try:
            return await self.api(request, path), ""
        except ApiError as err:
            if err.status == 401 and not self.client.has_own_token:
                raise
            return None, f"{err.status} {err.reason}: {err.message}"
