"""Waiting for a cluster to get somewhere: poll a check until it holds, with a generous bound.

The node agent and the load balancer act in the background, so a test (or the demo) that
applied a Deployment waits until its Pods are Ready rather than sleeping. The bound only turns a
hang into a failure that says what was awaited and what was last seen; it asserts no speed.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

__all__ = ["NotYet", "eventually", "until"]

T = TypeVar("T")

POLL_SECONDS = 0.05


class NotYet(AssertionError):
    """What was awaited did not happen within the bound (a failed expectation, to pytest)."""


async def eventually(
    check: Callable[[], Awaitable[T | None]], *, what: str, within: float = 60.0
) -> T:
    """The first truthy result of `check()`, polled until `within` seconds have passed."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    last: T | None = None
    while True:
        last = await check()
        if last:
            return last
        if loop.time() > deadline:
            raise NotYet(f"{what}: not within {within}s (last seen: {last!r})")
        await asyncio.sleep(POLL_SECONDS)


def until(
    check: Callable[[], T | None],
    what: str,
    *,
    within: float = 60.0,
    tolerate: tuple[type[BaseException], ...] = (OSError,),
    every: float = 0.1,
) -> T:
    """`eventually` for callers without an event loop (the e2e tests, which talk to processes
    over sockets): the first truthy result of `check()`, polled every `every` seconds. An
    exception of `tolerate` (a service not listening yet) counts as not yet and is what the
    failure reports as last seen."""
    deadline = time.monotonic() + within
    last: object = None
    while True:
        try:
            found = check()
        except tolerate as err:
            found, last = None, err
        else:
            last = found
        if found:
            return found
        if time.monotonic() > deadline:
            raise NotYet(f"{what}: not within {within}s (last seen: {last!r})")
        time.sleep(every)
