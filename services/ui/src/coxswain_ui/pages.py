"""The pages: each one reads the controller's API (`client`) and renders a template.

Where it sits: the FastAPI app mounts `router(...)`; every handler fetches the JSON it needs,
hands it to its template (`templates/`, Jinja autoescaping every value), and answers HTML. A
controller error is never a traceback: `ApiError` becomes the error page with the controller's
status (401, 403, 404, 503, or 502 when it cannot be reached), its reason, its message and
what to do. Nothing here writes anything but the sign-in cookie.

Who reads: with `--controller-token-file` the UI's own token, for everyone who can reach the
UI (so it binds to loopback by default, or sits behind an authenticating proxy); without it,
each user signs in with their own Kubernetes token, kept in an HttpOnly, SameSite=Strict
cookie and sent only to the controller, which reviews and authorises it per request.
"""

from __future__ import annotations

import asyncio
import urllib.parse
from collections.abc import Awaitable, Callable
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from fastapi.templating import Jinja2Templates

from coxswain_ui import views
from coxswain_ui.client import ApiError, ControllerClient

__all__ = ["NAV", "TOKEN_COOKIE", "router"]

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
DEFAULT_TAIL = 200

Handler = Callable[[Request], Awaitable[Response]]


class _SignIn(Exception):
    """No token for this user yet: send them to /login."""


class _Pages:
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
            raise _SignIn
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
            except _SignIn:
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


def router(client: ControllerClient, templates: Jinja2Templates, *, refresh: int) -> APIRouter:
    pages = _Pages(client, templates, refresh=refresh)
    api, render = pages.api, pages.render
    routes = APIRouter(default_response_class=HTMLResponse)

    async def overview(request: Request) -> Response:
        parts = ("health", "fleet", "routing/gateways", "problems")
        found = await asyncio.gather(*(pages.optional(request, f"/{p}") for p in parts))
        (health, e1), (fleet, e2), (gws, e3), (problems, e4) = found
        return render(
            request,
            "overview.html",
            "Overview",
            "/",
            health=health,
            fleet=views.fleet_summary(fleet) if fleet is not None else None,
            gateways=gws["gateways"] if gws is not None else None,
            problems=problems["problems"] if problems is not None else None,
            failures={"health": e1, "fleet": e2, "gateways": e3, "problems": e4},
        )

    async def fleet(request: Request) -> Response:
        return render(request, "fleet.html", "Fleet", "/fleet", fleet=await api(request, "/fleet"))

    async def proxy(request: Request) -> Response:
        name = request.path_params["name"]
        everyone = await api(request, "/fleet")
        found = next((p for p in everyone["proxies"] if p["nodeId"] == name), None)
        gone = next((p for p in everyone["disconnected"] if p["nodeId"] == name), None)
        table, table_error = None, ""
        try:
            table = await api(request, f"/fleet/proxies/{name}/routes")
        except ApiError as err:
            if err.status != 404:
                raise
            table_error = f"{err.reason}: {err.message}"
        status = 404 if found is None and gone is None else 200
        return render(
            request,
            "proxy.html",
            f"Proxy {name}",
            "/fleet",
            status=status,
            proxy=found,
            gone=gone,
            table=table,
            table_error=table_error,
        )

    async def gateways(request: Request) -> Response:
        found = (await api(request, "/routing/gateways"))["gateways"]
        return render(request, "gateways.html", "Gateways", "/gateways", gateways=found)

    async def gateway(request: Request) -> Response:
        ns, name = request.path_params["namespace"], request.path_params["name"]
        found = await api(request, f"/routing/gateways/{ns}/{name}")
        return render(request, "gateway.html", f"Gateway {ns}/{name}", "/gateways", g=found)

    async def route_list(request: Request) -> Response:
        found = (await api(request, "/routing/routes"))["routes"]
        return render(request, "routes.html", "Routes", "/routes", routes=found)

    async def route(request: Request) -> Response:
        kind, ns, name = (request.path_params[k] for k in ("kind", "namespace", "name"))
        found = (await api(request, "/routing/routes"))["routes"]
        one = next(
            (r for r in found if (r["kind"], r["namespace"], r["name"]) == (kind, ns, name)),
            None,
        )
        if one is None:
            raise ApiError(404, "NotFound", f"the controller translated no {kind} {ns}/{name}")
        return render(request, "route.html", f"{kind} {ns}/{name}", "/routes", r=one)

    async def problems(request: Request) -> Response:
        found = (await api(request, "/problems"))["problems"]
        return render(request, "problems.html", "Problems", "/problems", problems=found)

    async def events(request: Request) -> Response:
        found = (await api(request, "/events"))["events"]
        return render(request, "events.html", "Events", "/events", events=found)

    async def explain(request: Request) -> Response:
        form = views.ExplainForm.from_query(request.query_params)
        gws, fleet_doc = await asyncio.gather(
            api(request, "/routing/gateways"), api(request, "/fleet")
        )
        context: dict[str, Any] = {
            "q": form,
            "methods": views.METHODS,
            "gateway_choices": [f"{g['namespace']}/{g['name']}" for g in gws["gateways"]],
            "proxy_choices": [p["nodeId"] for p in fleet_doc["proxies"]],
            "answer": None,
            "message": "",
        }
        status = 200
        if request.query_params.get("go"):
            try:
                question = form.question()
                context["answer"] = await client.post(
                    "/explain", question, token=pages.token(request)
                )
            except ValueError as err:
                context["message"], status = str(err), 400
            except ApiError as err:
                if err.status in (401, 403, 502, 503):
                    raise
                context["message"], status = f"{err.reason}: {err.message}", err.status
        return render(
            request, "explain.html", "Explain", "/explain", status=status, live=False, **context
        )

    async def manifest(request: Request) -> Response:
        q = request.query_params
        params = request.path_params
        kind = params.get("kind") or q.get("kind", "").strip()
        ns = params.get("namespace") or q.get("namespace", "").strip() or "_"
        name = params.get("name") or q.get("name", "").strip()
        context: dict[str, Any] = {
            "kind": kind,
            "namespace": ns,
            "name": name,
            "kinds": views.KINDS,
            "yaml_text": "",
            "message": "",
        }
        status = 200
        if kind and name:
            try:
                obj = await api(request, f"/manifests/{kind}/{ns}/{name}")
                context["yaml_text"] = views.manifest_yaml(kind, obj)
            except ApiError as err:
                if err.status != 404:
                    raise
                context["message"], status = f"{err.reason}: {err.message}", 404
        title = f"{kind} {ns}/{name}" if kind and name else "Manifests"
        return render(
            request, "manifest.html", title, "/manifests", status=status, live=False, **context
        )

    async def logs(request: Request) -> Response:
        q = request.query_params
        ns, pod = q.get("namespace", "").strip(), q.get("pod", "").strip()
        container = q.get("container", "").strip()
        tail = q.get("tail", "").strip() or str(DEFAULT_TAIL)
        context: dict[str, Any] = {
            "namespace": ns,
            "pod": pod,
            "container": container,
            "tail": tail,
            "lines": None,
            "message": "",
        }
        status = 200
        if ns and pod:
            params = {"tailLines": tail, **({"container": container} if container else {})}
            try:
                found = await api(request, f"/pods/{ns}/{pod}/logs", params=params)
                context["lines"] = found["lines"]
            except ApiError as err:
                if err.status in (401, 502, 503):
                    raise
                context["message"], status = f"{err.reason}: {err.message}", err.status
        title = f"Logs of {ns}/{pod}" if ns and pod else "Logs"
        return render(
            request, "logs.html", title, "/logs", status=status, live=bool(pod), **context
        )

    for path, section, body in (
        ("/", "/", overview),
        ("/fleet", "/fleet", fleet),
        ("/fleet/{name}", "/fleet", proxy),
        ("/gateways", "/gateways", gateways),
        ("/gateways/{namespace}/{name}", "/gateways", gateway),
        ("/routes", "/routes", route_list),
        ("/routes/{kind}/{namespace}/{name}", "/routes", route),
        ("/problems", "/problems", problems),
        ("/events", "/events", events),
        ("/explain", "/explain", explain),
        ("/manifests", "/manifests", manifest),
        ("/manifests/{kind}/{namespace}/{name}", "/manifests", manifest),
        ("/logs", "/logs", logs),
    ):
        routes.add_api_route(path, pages.page(section, body), methods=["GET"])

    _sign_in(routes, pages)
    return routes


def _sign_in(routes: APIRouter, pages: _Pages) -> None:
    """/login and /logout, for a UI without a token of its own."""

    @routes.get("/login")
    async def login_form(request: Request) -> Response:
        if pages.client.has_own_token:
            return RedirectResponse("/", status_code=303)
        expired = request.query_params.get("expired")
        message = "The controller no longer accepts your token; sign in again." if expired else ""
        return pages.render(request, "login.html", "Sign in", "", live=False, message=message)

    @routes.post("/login")
    async def login(request: Request) -> Response:
        form = urllib.parse.parse_qs((await request.body()).decode(errors="replace"))
        token = (form.get("token") or [""])[0].strip()
        if pages.client.has_own_token:
            return RedirectResponse("/", status_code=303)
        try:
            await pages.client.get("/fleet", token=token)
        except ApiError as err:
            message = f"The controller refused that token: {err.status} {err.message}"
            if err.status == 403:  # a valid token with narrower rights may still see some pages
                message = ""
            if message:
                return pages.render(
                    request, "login.html", "Sign in", "", status=401, live=False, message=message
                )
        response = RedirectResponse("/", status_code=303)
        response.set_cookie(
            TOKEN_COOKIE,
            token,
            httponly=True,
            samesite="strict",
            secure=request.url.scheme == "https",
            path="/",
        )
        return response

    @routes.post("/logout")
    async def logout() -> Response:
        response = RedirectResponse("/login", status_code=303)
        response.delete_cookie(TOKEN_COOKIE, path="/")
        return response
