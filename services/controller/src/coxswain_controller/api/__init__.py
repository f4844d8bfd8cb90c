"""The controller's read-only operator API, `/api/v1/...`, served by the admin server.

`health(parts)` adds the subsystems to the admin server's open `/api/v1/health`; `routes(...)`
are every other endpoint, each behind `access.Access` (a TokenReview'd bearer token,
authorised for its area). The schema of every answer is in docs/operations.md ("API").
Nothing here writes anything, and none of it is on the request path of traffic.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

from coxswain_controller.api import fleet, logs, manifests, problems, routing
from coxswain_controller.api.access import Access, Settings
from coxswain_controller.api.context import Parts, error, send
from coxswain_controller.api.explain import Explainer, Question
from coxswain_controller.api.health import health
from coxswain_controller.api.migration import Migration

__all__ = ["Access", "Settings", "health", "routes"]

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def routes(parts: Parts, access: Access) -> list[web.AbstractRouteDef]:
    explainer = Explainer(parts)
    migration = Migration(parts)
    departures = fleet.Departures(parts.nodes)

    async def fleet_all(_: web.Request) -> web.Response:
        return send(fleet.fleet(parts, departures))

    async def proxy_routes(request: web.Request) -> web.Response:
        return fleet.proxy_routes(parts, request.match_info["name"])

    async def gateways(_: web.Request) -> web.Response:
        return send(routing.gateways(parts))

    async def gateway(request: web.Request) -> web.Response:
        ns, name = request.match_info["namespace"], request.match_info["name"]
        found = routing.gateway(parts, ns, name)
        if found is None:
            return error(404, "NotFound", f"no Gateway {ns}/{name} in the last pass")
        return send(found)

    async def route_list(_: web.Request) -> web.Response:
        return send(routing.routes(parts))

    async def problem_list(_: web.Request) -> web.Response:
        return send(problems.problems(parts))

    async def event_list(_: web.Request) -> web.Response:
        return send(problems.events(parts))

    async def manifest(request: web.Request) -> web.Response:
        info = request.match_info
        return manifests.manifest(parts, info["kind"], info["namespace"], info["name"])

    async def explain_get(request: web.Request) -> web.Response:
        headers: dict[str, str] = {}
        for item in request.query.getall("header", []):
            name, sep, value = item.partition(":")
            if not sep:
                return error(400, "BadRequest", f"header {item!r} is not Name:Value")
            headers[name.strip()] = value.strip()
        return _explain(explainer, dict(request.query), headers)

    async def explain_post(request: web.Request) -> web.Response:
        try:
            body = await request.json()
        except (json.JSONDecodeError, UnicodeDecodeError):
            return error(400, "BadRequest", "the body is not JSON")
        if not isinstance(body, dict) or not isinstance(body.get("headers", {}), dict):
            return error(400, "BadRequest", "the body is a JSON object; headers an object")
        return _explain(explainer, body, body.get("headers", {}))

    async def pod_logs(request: web.Request) -> web.Response:
        return await logs.logs(parts, request)

    g = access.guard
    return [
        web.get("/api/v1/fleet", g("fleet", fleet_all)),
        web.get("/api/v1/fleet/proxies/{name}/routes", g("fleet", proxy_routes)),
        web.get("/api/v1/routing/gateways", g("routing", gateways)),
        web.get("/api/v1/routing/gateways/{namespace}/{name}", g("routing", gateway)),
        web.get("/api/v1/routing/routes", g("routing", route_list)),
        web.get("/api/v1/problems", g("routing", problem_list)),
        web.get("/api/v1/events", g("routing", event_list)),
        web.get("/api/v1/migration/ingresses", g("routing", migration.answer)),
        web.get("/api/v1/migration/ingresses/{namespace}/{name}", g("routing", migration.answer)),
        web.get("/api/v1/manifests/{kind}/{namespace}/{name}", g("manifests", manifest)),
        web.get("/api/v1/explain", g("explain", explain_get)),
        web.post("/api/v1/explain", g("explain", explain_post)),
        web.get("/api/v1/pods/{namespace}/{name}/logs", g("logs", pod_logs)),
    ]


def _explain(explainer: Explainer, data: dict[str, Any], headers: Any) -> web.Response:
    try:
        question = Question.parse(data, headers)
    except (TypeError, ValueError):
        return error(400, "BadRequest", "port must be a number")
    return explainer.answer(question)
