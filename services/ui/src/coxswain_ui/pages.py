"""The pages: each one reads the controller's API and renders a template.

Where it sits: the FastAPI app mounts `router(...)`; every handler here is a method that
fetches the JSON it needs (`rendering.Pages.api`), hands it to its template (`templates/`,
Jinja autoescaping every value) and answers HTML; `rendering` turns controller errors into
error pages. The read-only pages come first, then the three with forms (Explain, manifests,
logs), which take their questions as GET parameters so every answer has a URL. Nothing here
writes anything.

Who reads: with `--controller-token-file` the UI's own token, for everyone who can reach the
UI (so it binds to loopback by default, or sits behind an authenticating proxy); without it,
each user signs in with their own Kubernetes token (`signin`).
"""

from __future__ import annotations

import asyncio
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, Response
from fastapi.templating import Jinja2Templates

from coxswain_ui import signin, views
from coxswain_ui.client import ApiError, ControllerClient
from coxswain_ui.rendering import Pages

__all__ = ["router"]

DEFAULT_TAIL = 200
# Errors a form page shows as the whole page (the form cannot help); others beside the form.
_PAGE_ERRORS = (401, 403, 502, 503)


class _Browse(Pages):
    async def overview(self, request: Request) -> Response:
        parts = ("health", "fleet", "routing/gateways", "problems")
        found = await asyncio.gather(*(self.optional(request, f"/{p}") for p in parts))
        (health, e1), (fleet, e2), (gws, e3), (problems, e4) = found
        return self.render(
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

    async def fleet(self, request: Request) -> Response:
        found = await self.api(request, "/fleet")
        return self.render(request, "fleet.html", "Fleet", "/fleet", fleet=found)

    async def proxy(self, request: Request) -> Response:
        name = request.path_params["name"]
        everyone = await self.api(request, "/fleet")
        found = next((p for p in everyone["proxies"] if p["nodeId"] == name), None)
        gone = next((p for p in everyone["disconnected"] if p["nodeId"] == name), None)
        table, table_error = None, ""
        try:
            table = await self.api(request, f"/fleet/proxies/{name}/routes")
        except ApiError as err:
            if err.status != 404:
                raise
            table_error = f"{err.reason}: {err.message}"
        return self.render(
            request,
            "proxy.html",
            f"Proxy {name}",
            "/fleet",
            status=404 if found is None and gone is None else 200,
            proxy=found,
            gone=gone,
            table=table,
            table_error=table_error,
        )

    async def gateways(self, request: Request) -> Response:
        found = (await self.api(request, "/routing/gateways"))["gateways"]
        return self.render(request, "gateways.html", "Gateways", "/gateways", gateways=found)

    async def gateway(self, request: Request) -> Response:
        ns, name = request.path_params["namespace"], request.path_params["name"]
        found = await self.api(request, f"/routing/gateways/{ns}/{name}")
        return self.render(request, "gateway.html", f"Gateway {ns}/{name}", "/gateways", g=found)

    async def routes(self, request: Request) -> Response:
        found = (await self.api(request, "/routing/routes"))["routes"]
        return self.render(request, "routes.html", "Routes", "/routes", routes=found)

    async def route(self, request: Request) -> Response:
        kind, ns, name = (request.path_params[k] for k in ("kind", "namespace", "name"))
        found = (await self.api(request, "/routing/routes"))["routes"]
        wanted = (kind, ns, name)
        one = next((r for r in found if (r["kind"], r["namespace"], r["name"]) == wanted), None)
        if one is None:
            raise ApiError(404, "NotFound", f"the controller translated no {kind} {ns}/{name}")
        return self.render(request, "route.html", f"{kind} {ns}/{name}", "/routes", r=one)

    async def problems(self, request: Request) -> Response:
        found = (await self.api(request, "/problems"))["problems"]
        return self.render(request, "problems.html", "Problems", "/problems", problems=found)

    async def events(self, request: Request) -> Response:
        found = (await self.api(request, "/events"))["events"]
        return self.render(request, "events.html", "Events", "/events", events=found)

    # ------------------------------------------------------------ the pages with forms

    async def explain(self, request: Request) -> Response:
        form = views.ExplainForm.from_query(request.query_params)
        gws, fleet = await asyncio.gather(
            self.api(request, "/routing/gateways"), self.api(request, "/fleet")
        )
        context: dict[str, Any] = {
            "q": form,
            "methods": views.METHODS,
            "gateway_choices": [f"{g['namespace']}/{g['name']}" for g in gws["gateways"]],
            "proxy_choices": [p["nodeId"] for p in fleet["proxies"]],
            "answer": None,
            "message": "",
        }
        status = 200
        if request.query_params.get("go"):
            try:
                question = form.question()
                token = self.token(request)
                context["answer"] = await self.client.post("/explain", question, token=token)
            except ValueError as err:
                context["message"], status = str(err), 400
            except ApiError as err:
                if err.status in _PAGE_ERRORS:
                    raise
                context["message"], status = f"{err.reason}: {err.message}", err.status
        return self.render(
            request, "explain.html", "Explain", "/explain", status=status, live=False, **context
        )

    async def manifest(self, request: Request) -> Response:
        given = {**request.query_params, **request.path_params}
        kind, name = given.get("kind", "").strip(), given.get("name", "").strip()
        ns = given.get("namespace", "").strip() or "_"
        context: dict[str, Any] = {"kind": kind, "namespace": ns, "name": name}
        context.update(kinds=views.KINDS, yaml_text="", message="")
        status = 200
        if kind and name:
            try:
                obj = await self.api(request, f"/manifests/{kind}/{ns}/{name}")
                context["yaml_text"] = views.manifest_yaml(kind, obj)
            except ApiError as err:
                if err.status != 404:
                    raise
                context["message"], status = f"{err.reason}: {err.message}", 404
        title = f"{kind} {ns}/{name}" if kind and name else "Manifests"
        return self.render(
            request, "manifest.html", title, "/manifests", status=status, live=False, **context
        )

    async def logs(self, request: Request) -> Response:
        q = request.query_params
        ns, pod = q.get("namespace", "").strip(), q.get("pod", "").strip()
        container = q.get("container", "").strip()
        tail = q.get("tail", "").strip() or str(DEFAULT_TAIL)
        context: dict[str, Any] = {"namespace": ns, "pod": pod, "container": container}
        context.update(tail=tail, lines=None, message="")
        status = 200
        if ns and pod:
            params = {"tailLines": tail, **({"container": container} if container else {})}
            try:
                found = await self.api(request, f"/pods/{ns}/{pod}/logs", params=params)
                context["lines"] = found["lines"]
            except ApiError as err:
                if err.status in _PAGE_ERRORS:
                    raise
                context["message"], status = f"{err.reason}: {err.message}", err.status
        title = f"Logs of {ns}/{pod}" if ns and pod else "Logs"
        return self.render(
            request, "logs.html", title, "/logs", status=status, live=bool(pod), **context
        )


def router(client: ControllerClient, templates: Jinja2Templates, *, refresh: int) -> APIRouter:
    pages = _Browse(client, templates, refresh=refresh)
    routes = APIRouter(default_response_class=HTMLResponse)
    for path, section, body in (
        ("/", "/", pages.overview),
        ("/fleet", "/fleet", pages.fleet),
        ("/fleet/{name}", "/fleet", pages.proxy),
        ("/gateways", "/gateways", pages.gateways),
        ("/gateways/{namespace}/{name}", "/gateways", pages.gateway),
        ("/routes", "/routes", pages.routes),
        ("/routes/{kind}/{namespace}/{name}", "/routes", pages.route),
        ("/problems", "/problems", pages.problems),
        ("/events", "/events", pages.events),
        ("/explain", "/explain", pages.explain),
        ("/manifests", "/manifests", pages.manifest),
        ("/manifests/{kind}/{namespace}/{name}", "/manifests", pages.manifest),
        ("/logs", "/logs", pages.logs),
    ):
        routes.add_api_route(path, pages.page(section, body), methods=["GET"])
    signin.add_routes(routes, pages)
    return routes
