"""Plain HTTP/1.1 requests to a Gateway's address, one at a time or paced in the background.

For the end-to-end tests and the benchmarks, which measure what a client would notice: whether
a request was answered with 200, and while a Gateway is being changed, how many were not and in
how many separate outages. Each request opens a new connection, so each one is routed afresh by
the load balancer in front (a kept-alive connection would hide a backend that went away).
"""

from __future__ import annotations

import http.client
import json
import threading
import time
from types import TracebackType
from typing import Any

__all__ = ["FAILURES", "Address", "Traffic", "get", "pod"]

Address = tuple[str, int]  # (IP, port)
FAILURES = (OSError, http.client.HTTPException)  # what a request that got no answer raises


def get(address: Address, host: str, path: str = "/") -> tuple[int, dict[str, Any]]:
    """The status and JSON body (the echo backend's) of `GET path` with `Host: host`."""
    conn = http.client.HTTPConnection(*address, timeout=10)
    try:
        conn.request("GET", path, headers={"Host": host})
        response = conn.getresponse()
        body = response.read()
        try:
            return response.status, dict(json.loads(body)) if body else {}
        except ValueError:
            return response.status, {"raw": body.decode(errors="replace")}
    finally:
        conn.close()


def pod(address: Address, host: str, path: str = "/") -> str | None:
    """The echo pod that answered with 200, else None."""
    status, body = get(address, host, path)
    return str(body.get("pod")) if status == 200 else None


class Traffic:
    """A request `interval` seconds after the last one ended, from a background thread, until
    the `with` block ends; every failure is kept with the time it happened. Paced, so a count of
    failures measures how long requests failed rather than how fast a failure comes back."""

    def __init__(self, address: Address, host: str, *, interval: float = 0.01) -> None:
        self.address, self.host, self.interval = address, host, interval
        self.failures: list[tuple[float, str]] = []  # (monotonic time, what went wrong)
        self.outcomes: list[bool] = []  # each request's, in order: True if it got a 200
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="traffic", daemon=True)

    @property
    def sent(self) -> int:
        return len(self.outcomes)

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                status, _ = get(self.address, self.host)
                error = "" if status == 200 else str(status)
            except FAILURES as err:
                error = repr(err)
            if error:
                self.failures.append((time.monotonic(), error))
            self.outcomes.append(not error)

    def outages(self) -> int:
        """How many separate runs of failed requests there were."""
        previous = [True, *self.outcomes]
        return sum(
            1 for ok, before in zip(self.outcomes, previous, strict=False) if before and not ok
        )

    def summary(self) -> str:
        if not self.failures:
            return f"0 of {self.sent} failed"
        window = self.failures[-1][0] - self.failures[0][0]
        kinds = sorted({error for _, error in self.failures})
        return (
            f"{len(self.failures)} of {self.sent} failed in {self.outages()} outage(s) over "
            f"{window:.2f}s: {kinds}"
        )

    def __enter__(self) -> Traffic:
        self._thread.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._stop.set()
        self._thread.join()
