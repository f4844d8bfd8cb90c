"""The data plane's tests run on uvloop, the loop production runs on: its transports differ
from asyncio's in ways that matter (they are not `asyncio.Transport` subclasses)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping

import uvloop


def pytest_asyncio_loop_factories() -> Mapping[str, Callable[[], asyncio.AbstractEventLoop]]:
    return {"uvloop": uvloop.new_event_loop}
