"""The operator UI in a real browser (Debian's Chromium, driven by Playwright) against the whole
stack: every service from its PEX file, the UI reading the controller's API with its own
ServiceAccount token, as in the demo.

Covers: every page renders (each one screenshotted into docs/ui/, which docs/ui.md shows), and
reads without JavaScript; the skip link and the form labels work from the keyboard; Explain
answers a real query as the proxy really routes it (the winner's backend is the pod that
answers, and the other route lost for the method); a broken route appears on Problems with its
reason while the page is open (live refresh); a proxy that disconnects is shown as
disconnected. Chromium is installed with apt-get when /usr/bin/chromium is missing (these
tests run as root); if that fails the tests fail, they never skip.
"""

from __future__ import annotations

import http.client
import json
import os
import shutil
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import kubernetes
import pytest
from playwright.sync_api import BrowserContext, Page, Playwright, sync_playwright

from coxswain_devkit.stack import Launcher, Stack, StackPorts
from coxswain_devkit.waiting import until

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
SHOTS = Path("docs/ui")
NS = "shop"
GROUP, VERSION = "gateway.networking.k8s.io", "v1"
WAIT = 60.0  # a generous deadline for anything the stack does; polled, never slept out
PAGE_MS = 30_000


def eventually(predicate: Callable[[], Any], what: str, timeout: float = WAIT) -> Any:
    return until(predicate, what, within=timeout, tolerate=(OSError, http.client.HTTPException))


# ------------------------------------------------------------------ the browser


def _chromium() -> Path:
    """Debian's Chromium, installed now if it is missing (the tests run as root)."""
    if CHROMIUM.exists():
        return CHROMIUM
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    env["PATH"] = env.get("PATH", "") + ":/usr/sbin:/usr/bin:/sbin:/bin"
    apt = shutil.which("apt-get", path=env["PATH"])
    if apt is None:
        pytest.fail("no /usr/bin/chromium and no apt-get to install it with")
    for argv in ([apt, "update"], [apt, "install", "-y", "--no-install-recommends", "chromium"]):
        done = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            pytest.fail(f"{' '.join(argv)} failed ({done.returncode}):\n{done.stderr[-4000:]}")
    if not CHROMIUM.exists():
        pytest.fail("apt-get installed chromium, but /usr/bin/chromium is not there")
    return CHROMIUM


@pytest.fixture(scope="module")
def playwright() -> Iterator[Playwright]:
    with sync_playwright() as driver:
        yield driver


def _context(playwright: Playwright, profile: Path, *, javascript: bool = True) -> BrowserContext:
    # Test runners may start tests without HOME; Chromium wants one it can write.
    env: dict[str, str | float | bool] = {
        **os.environ,
        "HOME": os.environ.get("HOME") or str(profile),
    }
    return playwright.chromium.launch_persistent_context(
        str(profile),  # a fresh user-data-dir
        executable_path=str(_chromium()),
        headless=True,
        args=CHROMIUM_ARGS,
        env=env,
        java_script_enabled=javascript,
        viewport={"width": 1280, "height": 900},
    )


@pytest.fixture(scope="module")
def browser(playwright: Playwright, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Page]:
    context = _context(playwright, tmp_path_factory.mktemp("chromium-profile"))
    try:
        page = context.new_page()
        page.set_default_timeout(PAGE_MS)
        yield page
    finally:
        context.close()


# ------------------------------------------------------------------ the stack


def _objects() -> list[dict[str, Any]]:
    def route(name: str, rule: dict[str, Any]) -> dict[str, Any]:
        return {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "HTTPRoute",
            "metadata": {"name": name, "namespace": NS},
            "spec": {
                "parentRefs": [{"name": "gw"}],
                "hostnames": ["shop.example"],
                "rules": [rule],
            },
        }

    def service(name: str) -> dict[str, Any]:
        return {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": name, "namespace": NS},
            "spec": {"ports": [{"name": "http", "port": 80}]},
        }

    return [
        service("one"),
        service("two"),
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "type": "kubernetes.io/tls",
            "metadata": {"name": "cert", "namespace": NS},
            "data": {"tls.crt": "Y2VydGlmaWNhdGU=", "tls.key": "dG9wLXNlY3JldC1rZXk="},
        },
        {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "GatewayClass",
            "metadata": {"name": "coxswain"},
            "spec": {"controllerName": "coxswain-labs.dev/gateway-controller"},
        },
        {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "Gateway",
            "metadata": {"name": "gw", "namespace": NS},
            "spec": {
                "gatewayClassName": "coxswain",
                "listeners": [{"name": "http", "port": 80, "protocol": "HTTP"}],
            },
        },
        route("web", {"backendRefs": [{"name": "one", "port": 80}]}),
        route(
            "api",
            {
                "matches": [{"path": {"type": "PathPrefix", "value": "/api"}, "method": "POST"}],
                "backendRefs": [{"name": "two", "port": 80}],
            },
        ),
    ]


@dataclass
class Running:
    stack: Stack
    ui: str  # the pages' URL, ending in /
    custom: Any  # CustomObjectsApi against the emulator
    port: int  # the shared proxy's bind port for gw's HTTP listener

    def open(self, page: Page, path: str) -> Page:
        response = page.goto(self.ui.rstrip("/") + path)
        assert response is not None and response.status == 200, (path, response)
        return page


def _create(client: Any, custom: Any, obj: dict[str, Any]) -> None:
    group, _, version = obj["apiVersion"].rpartition("/")
    if group != GROUP:
        kubernetes.utils.create_from_dict(client, obj)
        return
    plural = {"GatewayClass": "gatewayclasses", "Gateway": "gateways"}.get(obj["kind"])
    if obj["kind"] == "GatewayClass":
        custom.create_cluster_custom_object(group, version, plural, obj)
        return
    ns = obj["metadata"]["namespace"]
    custom.create_namespaced_custom_object(group, version, ns, plural or "httproutes", obj)


def _programmed(custom: Any) -> bool:
    gw = custom.get_namespaced_custom_object(GROUP, VERSION, NS, "gateways", "gw")
    conditions = (gw.get("status") or {}).get("conditions") or []
    return any(c["type"] == "Programmed" and c["status"] == "True" for c in conditions)


@pytest.fixture(scope="module")
def running(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Running]:
    namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}}
    stack = Stack(
        Launcher.pex_files(Path(".")),
        tmp_path_factory.mktemp("stack"),
        echo_services=[(NS, "one"), (NS, "two")],
        ports=StackPorts.free(),
        extra_objects=[namespace],
    )
    try:
        stack.start()
        ui = stack.start_ui()
        client = stack.client()
        custom = kubernetes.client.CustomObjectsApi(client)
        for obj in _objects():
            _create(client, custom, obj)
        eventually(lambda: _programmed(custom), "Gateway shop/gw Programmed")
        port = stack.bind_ports(NS, "gw")["http"]
        eventually(lambda: _request(port, "GET", "/")[0] == 200, "traffic through the proxy")
        yield Running(stack, ui, custom, port)
        client.close()
    finally:
        statuses = stack.stop()
    assert all(code == 0 for code in statuses.values()), statuses


def _request(port: int, method: str, path: str) -> tuple[int, dict[str, Any]]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request(method, path, body=b"" if method == "POST" else None,
                     headers={"Host": "shop.example"})  # fmt: skip
        response = conn.getresponse()
        body = response.read()
        return response.status, json.loads(body) if body else {}
    finally:
        conn.close()


def _shot(page: Page, name: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=True)


# ------------------------------------------------------------------ the scenarios

PAGES = [
    ("overview", "/", "Overview", "Connected proxies"),
    ("fleet", "/fleet", "Fleet", "Connected, up to date"),
    ("proxy", "/fleet/proxy", "Proxy proxy", "Host shop.example"),
    ("gateways", "/gateways", "Gateways", "shop/gw"),
    ("gateway", "/gateways/shop/gw", "Gateway shop/gw", "Attached routes"),
    ("routes", "/routes", "Routes", "HTTPRoute shop/api"),
    ("route", "/routes/HTTPRoute/shop/web", "HTTPRoute shop/web", "Gateway shop/gw"),
    ("problems", "/problems", "Problems", ""),
    ("events", "/events", "Events", ""),
    ("explain", "/explain", "Explain", "Where the request arrives"),
    ("manifest", "/manifests/Service/shop/one", "Service shop/one", "kind: Service"),
    (
        "logs",
        "/logs?namespace=coxswain-system&pod=coxswain-controller&tail=40",
        "Logs of coxswain-system/coxswain-controller",
        '"msg"',
    ),
]


def test_every_page_renders_and_links_to_the_others(running: Running, browser: Page) -> None:
    for name, path, title, shown in PAGES:
        page = running.open(browser, path)
        assert page.locator("h1").inner_text() == title, path
        assert page.locator("nav[aria-label=Main] a").count() == 9, path
        if shown:
            page.get_by_text(shown).first.wait_for()
        _shot(page, name)
    # The nav leads everywhere: follow it from the overview to the Gateways and on to one.
    page = running.open(browser, "/")
    page.get_by_role("link", name="Gateways", exact=True).click()
    page.get_by_role("link", name="shop/gw").first.click()
    assert page.locator("h1").inner_text() == "Gateway shop/gw"
    assert page.get_by_text("127.0.200.").count() >= 1  # its load balancer address


def test_the_gateway_converged_and_the_overview_says_how_fast(
    running: Running, browser: Page
) -> None:
    page = running.open(browser, "/")
    row = page.get_by_role("row").filter(has_text="shop/gw")
    row.wait_for()
    assert " ms" in row.inner_text() or " s" in row.inner_text()
    assert "not yet" not in row.inner_text()


def test_a_secret_shows_no_data(running: Running, browser: Page) -> None:
    page = running.open(browser, "/manifests/Secret/shop/cert")
    text = page.locator("pre").inner_text()
    assert "name: cert" in text
    assert "dG9wLXNlY3JldC1rZXk=" not in page.content() and "tls.key" not in text


def test_pages_read_without_javascript_and_from_the_keyboard(
    running: Running, playwright: Playwright, tmp_path: Path
) -> None:
    context = _context(playwright, tmp_path / "profile", javascript=False)
    try:
        page = context.new_page()
        page.set_default_timeout(PAGE_MS)
        running.open(page, "/fleet")
        assert page.get_by_text("Connected, up to date").count() >= 1
        page.keyboard.press("Tab")
        assert page.evaluate("document.activeElement.textContent") == "Skip to content"
        page.keyboard.press("Enter")
        assert page.url.endswith("#main")
        # Every field of the Explain form is found by its label.
        running.open(page, "/explain")
        for label in ("Gateway", "or proxy", "Port", "Host", "Method", "Path", "Headers"):
            assert page.get_by_label(label, exact=True).count() == 1, label
    finally:
        context.close()


def test_explain_answers_as_the_proxy_routes(running: Running, browser: Page) -> None:
    page = running.open(browser, "/explain")
    page.get_by_label("Gateway", exact=True).select_option("shop/gw")
    page.get_by_label("Port", exact=True).fill("80")
    page.get_by_label("Host", exact=True).fill("shop.example")
    page.get_by_label("Path", exact=True).fill("/api/orders")
    page.get_by_label("Method", exact=True).select_option("GET")
    page.get_by_role("button", name="Explain").click()
    winner = page.locator("#winner")
    assert "HTTPRoute shop/web" in winner.inner_text()
    lost = page.get_by_role("row").filter(has_text="HTTPRoute shop/api")
    assert "method: matches POST, the request is GET" in lost.inner_text()
    _shot(page, "explain-get")
    # The proxy really sends it to web's backend ...
    assert _request(running.port, "GET", "/api/orders")[1].get("pod") == "one-0"
    # ... and a POST to api's, which Explain says too.
    page.get_by_label("Method", exact=True).select_option("POST")
    page.get_by_role("button", name="Explain").click()
    assert "HTTPRoute shop/api" in page.locator("#winner").inner_text()
    assert "endpoints/shop/two/" in page.content()
    assert _request(running.port, "POST", "/api/orders")[1].get("pod") == "two-0"
    _shot(page, "explain")


def test_a_broken_route_appears_on_problems_with_its_reason(
    running: Running, browser: Page
) -> None:
    page = running.open(browser, "/problems")
    assert page.get_by_text("missing-backend").count() == 0
    broken = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "HTTPRoute",
        "metadata": {"name": "missing-backend", "namespace": NS},
        "spec": {
            "parentRefs": [{"name": "gw"}],
            "hostnames": ["broken.example"],
            "rules": [{"backendRefs": [{"name": "nowhere", "port": 80}]}],
        },
    }
    running.custom.create_namespaced_custom_object(GROUP, VERSION, NS, "httproutes", broken)
    # The open page refreshes itself: no reload.
    section = page.locator("section.problem").filter(has_text="HTTPRoute shop/missing-backend")
    section.wait_for(timeout=WAIT * 1000)
    text = section.inner_text()
    assert "ResolvedRefs" in text and "BackendNotFound" in text and "nowhere" in text
    _shot(page, "problems")
    # And on the route's own page, with its Warning Event.
    running.open(browser, "/routes/HTTPRoute/shop/missing-backend")
    browser.get_by_text("BackendNotFound").first.wait_for()
    _shot(browser, "route-broken")


def test_a_proxy_that_disconnects_shows_as_disconnected(running: Running, browser: Page) -> None:
    running.stack.start_proxy("proxy-b")
    page = running.open(browser, "/fleet")
    page.get_by_role("row").filter(has_text="proxy-b").filter(has_text="Connected").wait_for()
    running.stack.processes.pop("proxy-b").stop()
    gone = page.get_by_role("row").filter(has_text="proxy-b").filter(has_text="Disconnected")
    gone.wait_for(timeout=WAIT * 1000)  # the open page refreshes itself
    _shot(page, "fleet-disconnected")
    running.open(browser, "/fleet/proxy-b")
    assert "left at" in browser.locator("main").inner_text()
