"""`coxswain-ui serve` in process: the pages' port and the shared admin port both answer
/healthz and /readyz from the same readiness (waiting for the controller, named), and SIGTERM
stops both. Leaves out the pages themselves, which their own issue covers."""

from __future__ import annotations

import asyncio
import logging
import os
import signal

import aiohttp
import pytest

from coxswain_service import admin, signals
from coxswain_ui import cli


async def _port_of(caplog: pytest.LogCaptureFixture, msg: str) -> int:
    while True:
        for record in caplog.records:
            if record.getMessage() == msg:
                return int(getattr(record, "fields", {})["port"])
        await asyncio.sleep(0.01)


async def _get(url: str) -> tuple[int, str]:
    async with aiohttp.ClientSession() as session, session.get(url) as response:
        return response.status, await response.text()


async def test_pages_port_and_admin_port_share_readiness(caplog: pytest.LogCaptureFixture) -> None:
    argv = [
        "serve",
        "--address", "127.0.0.1", "--port", "0",
        "--admin-address", "127.0.0.1", "--admin-port", "0",
        "--controller-url", "http://127.0.0.1:9",
    ]  # fmt: skip
    args = cli._parser().parse_args(argv)
    loop = asyncio.get_running_loop()
    with caplog.at_level(logging.INFO):
        serving = asyncio.ensure_future(cli.serve(args))
        try:
            pages = await asyncio.wait_for(_port_of(caplog, "ui listening"), 30)
            admin_port = await asyncio.wait_for(_port_of(caplog, admin.LISTENING), 30)
            expected = (503, "not ready: controller API at http://127.0.0.1:9 not reached yet\n")
            for port in (pages, admin_port):
                assert await _get(f"http://127.0.0.1:{port}/healthz") == (200, "ok\n")
                assert await _get(f"http://127.0.0.1:{port}/readyz") == expected
            os.kill(os.getpid(), signal.SIGTERM)
            await asyncio.wait_for(serving, 30)
        finally:
            serving.cancel()
            for sig in signals.STOP_SIGNALS:
                loop.remove_signal_handler(sig)
