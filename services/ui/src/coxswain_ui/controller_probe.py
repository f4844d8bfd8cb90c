"""Watches whether the controller's API answers, and keeps the UI's readiness in step with it."""

from __future__ import annotations

import asyncio
import logging
import ssl
from pathlib import Path

import aiohttp

from coxswain_service.readiness import Readiness

log = logging.getLogger(__name__)

PROBE_INTERVAL_SECONDS = 2.0


async def _reachable(
    session: aiohttp.ClientSession, url: str, context: ssl.SSLContext | bool
) -> bool:
    try:
        async with session.get(url, ssl=context) as response:
            return response.status == 200
    except (aiohttp.ClientError, TimeoutError):
        return False


async def watch(controller_url: str, readiness: Readiness, *, ca_file: Path | None = None) -> None:
    url = controller_url.rstrip("/") + "/healthz"
    reason = f"controller API at {controller_url} not reached yet"
    timeout = aiohttp.ClientTimeout(total=PROBE_INTERVAL_SECONDS)
    was_reachable = False
    context: ssl.SSLContext | bool = True
    if ca_file is not None:
        context = ssl.create_default_context(cafile=str(ca_file))
    async with aiohttp.ClientSession(timeout=timeout) as session:
        while True:
            reachable = await _reachable(session, url, context)
            if reachable:
                readiness.satisfy("controller")
            else:
                readiness.await_("controller", reason)
            if reachable != was_reachable:
                log.info(
                    "controller reachability changed",
                    extra={"fields": {"url": url, "reachable": reachable}},
                )
                was_reachable = reachable
            await asyncio.sleep(PROBE_INTERVAL_SECONDS)
