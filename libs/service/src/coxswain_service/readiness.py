"""What a service still waits for before it can do its work, and what an operator must see.

Readiness is a set of named things awaited, so `/readyz` says exactly why a service is not
ready. Warnings do not make a service unready (a proxy whose discovery stopped on a wire-version
mismatch still serves its last good snapshot) but are shown beside the answer. The HTTP bodies
are made here so that the aiohttp admin server and the UI's FastAPI app answer alike.
"""

from __future__ import annotations

from typing import Any

__all__ = ["Readiness"]


class Readiness:
    def __init__(self) -> None:
        self._awaited: dict[str, str] = {}
        self._warnings: dict[str, str] = {}

    def await_(self, key: str, reason: str) -> None:
        self._awaited[key] = reason

    def satisfy(self, key: str) -> None:
        self._awaited.pop(key, None)

    def warn(self, key: str, warning: str) -> None:
        self._warnings[key] = warning

    def clear_warning(self, key: str) -> None:
        self._warnings.pop(key, None)

    @property
    def reasons(self) -> list[str]:
        return list(self._awaited.values())

    @property
    def warnings(self) -> list[str]:
        return list(self._warnings.values())

    @property
    def ready(self) -> bool:
        return not self._awaited

    def readyz(self) -> tuple[int, str]:
        """`/readyz`'s status and plain-text body."""
        notes = "".join(f"warning: {w}\n" for w in self._warnings.values())
        if self._awaited:
            return 503, "not ready: " + "; ".join(self._awaited.values()) + "\n" + notes
        return 200, "ok\n" + notes

    def health(self, *, service: str, version: str) -> dict[str, Any]:
        """`/api/v1/health`'s readiness part (a service may add its subsystems beside it)."""
        return {
            "service": service,
            "version": version,
            "ready": self.ready,
            "notReady": self.reasons,
            "warnings": self.warnings,
        }
