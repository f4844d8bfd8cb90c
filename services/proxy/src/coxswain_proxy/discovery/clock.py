"""Time as a collaborator, so SVID renewal and backoff can run on a fast-forwarded clock in tests.

`now()` is wall-clock seconds since the epoch because certificates speak that time; `sleep()`
is how every delay in the discovery client is waited.
"""

from __future__ import annotations

import asyncio
import time
from typing import Protocol


class Clock(Protocol):
    def now(self) -> float: ...

    async def sleep(self, seconds: float) -> None: ...


class SystemClock:
    """The real clock."""

    def now(self) -> float:
        return time.time()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(max(0.0, seconds))
