"""The pages over HTTP, against a stand-in controller API on 127.0.0.1 (aiohttp, canned answers
in the documented shapes, checking the bearer token it is sent).

Covers: every page renders and links to the others; values are escaped; a Secret's data never
shows; each controller error (401, 403, 404, 503, unreachable) is a clear page with its status,
never a traceback; the Explain form's checks and its question to the API; sign-in with a user's
own token (cookie flags) when the UI has none of its own; the security headers. The real
controller and a real browser are in tests/e2e/ui_test.py.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import socket
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import uvicorn
from aiohttp import web

from coxswain_service.readiness import Readiness
from coxswain_ui import app
from coxswain_ui.client import ControllerClient

TOKEN = "ui-token"
HOSTILE = "<script>alert(1)</script>"
CONDITION_OK = {"type": "Accepted", "status": True, "reason": "Accepted", "message": ""}
BROKEN = {
    "where": "parent gw",
    "type": "ResolvedRefs",
    "status": False,
    "reason": "BackendNotFound",
    "message": "Service shop/missing not found",
}
ROUTE_ID: dict[str, Any] = {"kind": "HTTPRoute", "namespace": "shop", "name": "web", "ruleIndex": 0}
RULE = {
    "route": ROUTE_ID,
    "matches": [{"path": {"type": "PathPrefix", "value": "/"}, "method": "", "headers": []}],
    "filters": [],
    "backends": [
        {
            "weight": 3,
            "endpoints": "endpoints/shop/web/80",
            "unresolvedReason": "",
            "endpointsServed": [{"address": "10.0.0.1", "port": 8080, "ready": True}],
        }
    ],
}
GATEWAY = {
    "namespace": "shop",
    "name": "gw",
    "generation": 2,
    "scope": "SharedPool",
    "conditions": [CONDITION_OK, {**CONDITION_OK, "type": "Programmed", "reason": "Programmed"}],
    "addresses": [{"type": "IPAddress", "value": "127.0.200.1"}],
    "listeners": [
        {
            "name": "http",
            "port": 80,
            "bindPort": 20000,
            "protocol": "HTTP",
            "hostname": None,
            "supportedKinds": ["HTTPRoute"],
            "attachedRoutes": 1,
            "conditions": [CONDITION_OK],
        }
    ],
    "convergence": {"generation": 2, "seenAt": "2025-01-01T00:00:00.000Z", "converged": True,
                    "durationMs": 42.5},
    "routes": [{"kind": "HTTPRoute", "namespace": "shop", "name": "web", "sectionName": None,
                "port": None, "conditions": [CONDITION_OK]}],
    "hosts": [{"bindPort": 20000, "listenerPort": 80, "host": "shop.example.com",
               "rules": [RULE]}],
}  # fmt: skip
PROXY = {
    "nodeId": "proxy-1",
    "identity": "ns/coxswain-system/sa/coxswain-proxy",
    "scope": "SharedPool",
    "acked": {"version": "abcdef0123456789", "seq": 4},
    "lag": {"seqs": 0, "ms": 0, "upToDate": True},
    "bound": [{"port": 20000, "protocol": "HTTP"}],
    "connectedAt": "2025-01-01T00:00:00.000Z",
    "lastNack": None,
}
GONE = {
    "nodeId": "proxy-0",
    "identity": "ns/coxswain-system/sa/coxswain-proxy",
    "scope": "SharedPool",
    "acked": {"version": "0123", "seq": 2},
    "connectedAt": "2025-01-01T00:00:00.000Z",
    "disconnectedAt": "2025-01-01T00:01:00.000Z",
}
ROUTES = [
    {"kind": "HTTPRoute", "namespace": "shop", "name": "web", "generation": 1,
     "parents": [{"parentRef": {"name": "gw"}, "conditions": [CONDITION_OK]}],
     "addresses": [], "events": []},
    {"kind": "HTTPRoute", "namespace": "shop", "name": HOSTILE, "generation": 1,
     "parents": [{"parentRef": {"name": "gw"}, "conditions": [BROKEN]}], "addresses": [],
     "events": [{"type": "Warning", "reason": "BackendNotFound", "message": "missing"}]},
]  # fmt: skip
EXPLAINED = {
    "scope": "SharedPool",
    "version": "abcdef0123456789",
    "seq": 4,
    "listener": [{"name": "http", "protocol": "HTTP"}],
    "bindPort": 20000,
    "path": "/api",
    "outcome": {"status": 200, "reason": "", "host": "shop.example.com", "matchIndex": 0,
                "route": RULE["route"], "backends": [{"weight": 3, "endpoints": "e",
                                                      "unresolvedReason": ""}]},
    "candidates": [
        {"route": RULE["route"], "matchIndex": 0, "host": "shop.example.com",
         "verdict": "selected"},
        {"route": {**ROUTE_ID, "name": "api"}, "matchIndex": 0, "host": "shop.example.com",
         "verdict": "method: matches POST, the request is GET"},
    ],
}  # fmt: skip


@dataclass
class FakeController:
    """Canned answers; `fail` makes every guarded path answer that status instead."""

    url: str = ""
    fail: int = 0
    asked: list[Any] = field(default_factory=list)
    tokens: set[str] = field(default_factory=lambda: {TOKEN})

    def documents(self) -> dict[str, Any]:
        return {
            "/api/v1/fleet": {"seq": 4, "proxies": [PROXY], "disconnected": [GONE]},
            "/api/v1/fleet/proxies/proxy-1/routes": {
                "nodeId": "proxy-1", "scope": "SharedPool", "version": "abcdef", "seq": 4,
                "publishedAt": "2025-01-01T00:00:00.000Z",
                "ports": [{"port": 20000, "tls": None, "streams": [],
                           "hosts": [{"host": "shop.example.com", "table": "gateway/shop/gw",
                                      "listenerPort": 80, "rules": [RULE]}]}],
            },
            "/api/v1/routing/gateways": {"gateways": [GATEWAY]},
            "/api/v1/routing/gateways/shop/gw": GATEWAY,
            "/api/v1/routing/routes": {"routes": ROUTES},
            "/api/v1/problems": {"problems": [
                {"object": {"kind": "HTTPRoute", "namespace": "shop", "name": HOSTILE},
                 "generation": 1, "conditions": [BROKEN], "events": []}]},
            "/api/v1/events": {"events": [
                {"object": {"kind": "HTTPRoute", "namespace": "shop", "name": "web"},
                 "type": "Warning", "reason": "BackendNotFound", "message": "missing"}]},
            "/api/v1/manifests/Service/shop/web": {
                "apiVersion": "v1", "kind": "Service",
                "metadata": {"name": "web", "namespace": "shop"}, "spec": {"ports": []}},
            "/api/v1/manifests/Secret/shop/cert": {
                "apiVersion": "v1", "kind": "Secret", "metadata": {"name": "cert"},
                "data": {"tls.key": "c2VjcmV0LWtleQ=="}},
            "/api/v1/pods/demo/web-0/logs": {"namespace": "demo", "name": "web-0",
                                             "container": None, "lines": ["one", HOSTILE]},
        }  # fmt: skip

    async def handle(self, request: web.Request) -> web.StreamResponse:
        if request.path == "/api/v1/health":
            return web.json_response(
                {"service": "controller", "version": "9.9", "ready": True, "notReady": [],
                 "subsystems": {"leadership": {"state": "leader", "leader": True}}}
            )  # fmt: skip
        if request.headers.get("Authorization", "").removeprefix("Bearer ") not in self.tokens:
            return _error(401, "Unauthorized", "the token was not accepted")
        if self.fail:
            return _error(self.fail, "Forbidden" if self.fail == 403 else "Down", "nope")
        if request.path == "/api/v1/explain":
            self.asked.append(await request.json())
            return web.json_response(EXPLAINED)
        found = self.documents().get(request.path)
        if found is None:
            return _error(404, "NotFound", f"nothing at {request.path}")
        return web.json_response(found)


def _error(status: int, reason: str, message: str) -> web.Response:
    body = {"error": {"status": status, "reason": reason, "message": message}}
    return web.json_response(body, status=status)


@pytest.fixture
async def controller() -> AsyncIterator[FakeController]:
    fake = FakeController()
    server = web.Application()
    server.router.add_route("*", "/{tail:.*}", fake.handle)
    runner = web.AppRunner(server)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    fake.url = f"http://127.0.0.1:{port}"
    try:
        yield fake
    finally:
        await runner.cleanup()


@dataclass
class Ui:
    url: str
    http: aiohttp.ClientSession

    async def get(self, path: str, **kwargs: Any) -> tuple[int, str]:
        async with self.http.get(self.url + path, allow_redirects=False, **kwargs) as response:
            return response.status, await response.text()


@contextlib.asynccontextmanager
async def _serve(client: ControllerClient) -> AsyncIterator[Ui]:
    config = uvicorn.Config(
        app.create(Readiness(), client, refresh=0), log_config=None, access_log=False
    )
    server = uvicorn.Server(config)
    sock = socket.create_server(("127.0.0.1", 0))
    serving = asyncio.ensure_future(server.serve(sockets=[sock]))
    http = aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True))  # 127.0.0.1
    try:
        while not server.started:  # noqa: ASYNC110 (uvicorn offers no event)
            await asyncio.sleep(0.01)
        yield Ui(f"http://127.0.0.1:{sock.getsockname()[1]}", http)
    finally:
        await http.close()
        server.should_exit = True
        await serving
        await client.close()
        sock.close()


@pytest.fixture
async def ui(controller: FakeController, tmp_path: Path) -> AsyncIterator[Ui]:
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n")
    async with _serve(ControllerClient(controller.url, token_file=token_file)) as running:
        yield running


PAGES = [
    ("/", "Overview", ["BackendNotFound", "Connected proxies", "42.5 ms", "leader"]),
    ("/fleet", "Fleet", ["proxy-1", "Connected, up to date", "proxy-0", "Disconnected"]),
    ("/fleet/proxy-1", "Proxy proxy-1", ["Port 20000", "shop.example.com", "10.0.0.1:8080"]),
    ("/gateways", "Gateways", ["shop/gw", "127.0.200.1", "42.5 ms"]),
    ("/gateways/shop/gw", "Gateway shop/gw", ["Listeners", "20000", "HTTPRoute shop/web"]),
    ("/routes", "Routes", ["HTTPRoute shop/web", "BackendNotFound"]),
    ("/routes/HTTPRoute/shop/web", "HTTPRoute shop/web", ["Gateway shop/gw", "Accepted"]),
    ("/problems", "Problems", ["BackendNotFound", "Service shop/missing not found"]),
    ("/events", "Events", ["Warning", "missing"]),
    ("/explain", "Explain", ['<label for="host">Host</label>', "shop/gw", "proxy-1"]),
    ("/manifests/Service/shop/web", "Service shop/web", ["kind: Service", "name: web"]),
    ("/manifests", "Manifests", ['<label for="kind">Kind</label>']),
    ("/logs?namespace=demo&pod=web-0", "Logs of demo/web-0", ["one"]),
]


@pytest.mark.parametrize(("path", "title", "shown"), [pytest.param(*p, id=p[0]) for p in PAGES])
async def test_every_page_renders_with_the_nav_and_what_it_shows(
    ui: Ui, path: str, title: str, shown: list[str]
) -> None:
    status, html = await ui.get(path)
    assert status == 200, html
    assert f"<h1>{_escaped(title)}</h1>" in html
    assert 'href="#main"' in html and '<nav aria-label="Main">' in html
    for href in ("/fleet", "/gateways", "/routes", "/problems", "/events", "/explain"):
        assert f'href="{href}"' in html
    for text in shown:
        assert text in html, text


def _escaped(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


async def test_values_from_the_controller_are_escaped(ui: Ui) -> None:
    for path in ("/problems", "/routes", "/logs?namespace=demo&pod=web-0"):
        _, html = await ui.get(path)
        assert HOSTILE not in html, path
        assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html, path


async def test_a_secret_never_shows_its_data(ui: Ui) -> None:
    status, html = await ui.get("/manifests/Secret/shop/cert")
    assert status == 200
    assert "name: cert" in html
    assert "c2VjcmV0LWtleQ==" not in html and "tls.key" not in html


@pytest.mark.parametrize(
    ("fail", "headline"),
    [
        pytest.param(403, "does not allow this token", id="403-forbidden"),
        pytest.param(503, "cannot answer this right now", id="503-unavailable"),
    ],
)
async def test_controller_errors_are_clear_pages(
    ui: Ui, controller: FakeController, fail: int, headline: str
) -> None:
    controller.fail = fail
    status, html = await ui.get("/fleet")
    assert status == fail
    assert headline in html and 'role="alert"' in html and "Traceback" not in html
    # The overview still renders what it can, and says what it could not read.
    status, html = await ui.get("/")
    assert status == 200 and "Not readable" in html and "leader" in html


async def test_a_refused_token_and_a_missing_object(ui: Ui, controller: FakeController) -> None:
    controller.tokens = {"another"}
    status, html = await ui.get("/problems")
    assert status == 401 and "did not accept the UI&#39;s token" in html
    controller.tokens = {TOKEN}
    status, html = await ui.get("/gateways/shop/none")
    assert status == 404 and "nothing at /api/v1/routing/gateways/shop/none" in html
    status, html = await ui.get("/manifests/Service/shop/none")
    assert status == 404 and "NotFound" in html


async def test_an_unreachable_controller(tmp_path: Path) -> None:
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN)
    async with _serve(ControllerClient("http://127.0.0.1:9", token_file=token_file)) as ui:
        status, html = await ui.get("/gateways")
        assert status == 502 and "cannot be reached" in html


async def test_explain_asks_the_api_and_shows_every_candidate(
    ui: Ui, controller: FakeController
) -> None:
    query = {
        "gateway": "shop/gw", "port": "80", "host": "shop.example.com", "method": "get",
        "path": "/api", "query": "a=1", "headers": "X-Canary: on\r\nX-Other:  2", "go": "1",
    }  # fmt: skip
    status, html = await ui.get("/explain", params=query)
    assert status == 200, html
    assert controller.asked == [
        {"gateway": "shop/gw", "port": 80, "host": "shop.example.com", "method": "GET",
         "path": "/api", "query": "a=1", "headers": {"X-Canary": "on", "X-Other": "2"}}
    ]  # fmt: skip
    assert "Winner" in html and "selected (the winner)" in html
    assert "method: matches POST, the request is GET" in html
    assert '<option value="shop/gw" selected>' in html


@pytest.mark.parametrize(
    ("query", "message"),
    [
        pytest.param({"port": "80"}, "Choose either a Gateway or a proxy", id="no-target"),
        pytest.param({"gateway": "shop/gw", "proxy": "p"}, "Choose either", id="both-targets"),
        pytest.param({"gateway": "shop/gw", "port": "x"}, "must be a number", id="port-nan"),
        pytest.param({"gateway": "shop/gw", "port": "0"}, "between 1 and 65535", id="port-0"),
        pytest.param(
            {"gateway": "shop/gw", "port": "80", "headers": "nocolon"},
            "Header line 1",
            id="bad-header",
        ),
    ],
)
async def test_explain_form_checks(
    ui: Ui, controller: FakeController, query: dict[str, str], message: str
) -> None:
    status, html = await ui.get("/explain", params={**query, "go": "1"})
    assert status == 400 and message in html
    assert controller.asked == []


async def test_security_headers(ui: Ui) -> None:
    async with ui.http.get(ui.url + "/fleet") as response:
        csp = response.headers["Content-Security-Policy"]
        assert "script-src 'self'" in csp and "frame-ancestors 'none'" in csp
        assert response.headers["X-Content-Type-Options"] == "nosniff"
    async with ui.http.get(ui.url + "/static/live.js") as response:
        assert response.status == 200 and "data-refresh" in await response.text()


async def test_signing_in_with_a_users_own_token(controller: FakeController) -> None:
    async with _serve(ControllerClient(controller.url)) as ui:
        status, _ = await ui.get("/fleet")
        assert status == 303  # to /login
        status, html = await ui.get("/login")
        assert status == 200 and '<label for="token">' in html
        async with ui.http.post(
            ui.url + "/login", data={"token": "wrong"}, allow_redirects=False
        ) as response:
            assert response.status == 401 and "refused that token" in await response.text()
        async with ui.http.post(
            ui.url + "/login", data={"token": TOKEN}, allow_redirects=False
        ) as response:
            assert response.status == 303
            cookie = response.headers["Set-Cookie"]
        assert re.search(r"HttpOnly", cookie, re.I) and re.search(r"SameSite=strict", cookie, re.I)
        status, html = await ui.get("/fleet")
        assert status == 200 and "proxy-1" in html and "Sign out" in html
        controller.tokens = set()  # the token stops working: back to sign-in
        status, _ = await ui.get("/fleet")
        assert status == 303
