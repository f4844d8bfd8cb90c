"""The admin server over a real socket: each endpoint's status and body, the build-info gauge,
the listening line, and a service's own health fields and routes. Leaves out each service's
readiness reasons, which their own tests cover."""

from __future__ import annotations

import argparse
import json
import logging
from collections.abc import AsyncIterator

import aiohttp
import pytest
from aiohttp import web

from coxswain_service import admin
from coxswain_service.readiness import Readiness


@pytest.fixture
async def served(caplog: pytest.LogCaptureFixture) -> AsyncIterator[tuple[str, Readiness]]:
    readiness = Readiness()

    async def extra(_: web.Request) -> web.Response:
        return web.json_response({"extra": True})

    server = admin.AdminServer(
        service="demo",
        version="9.9.9",
        readiness=readiness,
        health=lambda: {"subsystems": {"demo": "ok"}},
        routes=[web.get("/api/v1/extra", extra)],
    )
    with caplog.at_level(logging.INFO, logger="coxswain_service.admin"):
        bound = await server.start("127.0.0.1", 0)
    try:
        address, port = bound[0]
        listening = [r for r in caplog.records if r.getMessage() == admin.LISTENING]
        assert getattr(listening[0], "fields", {})["port"] == port
        yield f"http://{address}:{port}", readiness
    finally:
        await server.stop()


async def _get(url: str) -> tuple[int, str]:
    async with aiohttp.ClientSession() as session, session.get(url) as response:
        return response.status, await response.text()


async def test_healthz_answers_while_not_ready(served: tuple[str, Readiness]) -> None:
    base, readiness = served
    readiness.await_("source", "Ingress not listed yet")
    assert await _get(base + "/healthz") == (200, "ok\n")


async def test_readyz_names_what_is_awaited_and_shows_warnings(
    served: tuple[str, Readiness],
) -> None:
    base, readiness = served
    readiness.await_("a", "first thing")
    readiness.await_("b", "second thing")
    readiness.warn("w", "wire version mismatch")
    status, text = await _get(base + "/readyz")
    assert status == 503
    assert text == "not ready: first thing; second thing\nwarning: wire version mismatch\n"
    readiness.satisfy("a")
    readiness.satisfy("b")
    assert await _get(base + "/readyz") == (200, "ok\nwarning: wire version mismatch\n")
    readiness.clear_warning("w")
    assert await _get(base + "/readyz") == (200, "ok\n")


async def test_metrics_carry_build_info(served: tuple[str, Readiness]) -> None:
    status, text = await _get(served[0] + "/metrics")
    assert status == 200
    assert 'coxswain_build_info{service="demo",version="9.9.9"} 1.0' in text


async def test_api_health_is_readiness_plus_the_service_fields(
    served: tuple[str, Readiness],
) -> None:
    base, readiness = served
    readiness.await_("x", "x pending")
    status, text = await _get(base + "/api/v1/health")
    assert status == 200
    assert json.loads(text) == {
        "service": "demo",
        "version": "9.9.9",
        "ready": False,
        "notReady": ["x pending"],
        "warnings": [],
        "subsystems": {"demo": "ok"},
    }


async def test_a_service_adds_its_own_routes(served: tuple[str, Readiness]) -> None:
    assert await _get(served[0] + "/api/v1/extra") == (200, '{"extra": true}')


def test_every_service_takes_the_same_flags() -> None:
    parser = argparse.ArgumentParser()
    admin.add_arguments(parser, port=9099)
    args = parser.parse_args([])
    assert (args.admin_address, args.admin_port, args.log_level) == ("0.0.0.0", 9099, "info")
    args = parser.parse_args(["--admin-port", "0", "--log-level", "debug"])
    assert (args.admin_port, args.log_level) == (0, "debug")
    with pytest.raises(SystemExit):
        parser.parse_args(["--log-level", "loud"])
