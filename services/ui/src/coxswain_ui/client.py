"""The UI's one way out: the controller's `/api/v1`, read with a bearer token.

Where it sits: every page handler asks this client for the JSON it renders; nothing else in the
UI opens a connection. The token is either the UI's own (`--controller-token-file`, re-read
whenever the file changes, so a rotated projected token is picked up) or the signed-in user's,
passed per call. Every failure becomes one `ApiError` carrying the HTTP status and the
controller's own `reason` and `message` (its error shape is `{"error": {...}}`), so a page can
say plainly what went wrong: 401 (the token was refused), 403 (not allowed), 404, 503, or the
controller not reachable at all (status 502, reason `Unreachable`).
"""

from __future__ import annotations

import os
import ssl
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp

__all__ = ["ApiError", "ControllerClient"]

TIMEOUT_SECONDS = 10.0


class ApiError(Exception):
    """A controller answer other than 200, or no answer."""

    def __init__(self, status: int, reason: str, message: str) -> None:
        super().__init__(f"{status} {reason}: {message}")
        self.status = status
        self.reason = reason
        self.message = message


@dataclass
class _TokenFile:
    path: Path
    _mtime: float = -1.0
    _token: str = ""

    def read(self) -> str:
        try:
            mtime = os.stat(self.path).st_mtime
            if mtime != self._mtime:
                self._token, self._mtime = self.path.read_text().strip(), mtime
        except OSError as err:
            raise ApiError(500, "NoToken", f"cannot read the UI's token file: {err}") from err
        return self._token


class ControllerClient:
    def __init__(
        self, url: str, *, token_file: Path | None = None, ca_file: Path | None = None
    ) -> None:
        self.url = url.rstrip("/")
        self._token_file = _TokenFile(token_file) if token_file is not None else None
        self._ssl: ssl.SSLContext | None = None
        if ca_file is not None:
            self._ssl = ssl.create_default_context(cafile=str(ca_file))
        self._session: aiohttp.ClientSession | None = None

    @property
    def has_own_token(self) -> bool:
        """Whether the UI reads with its own credential (else each user signs in)."""
        return self._token_file is not None

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    def _http(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            timeout = aiohttp.ClientTimeout(total=TIMEOUT_SECONDS)
            self._session = aiohttp.ClientSession(timeout=timeout)
        return self._session

    def _headers(self, token: str | None) -> dict[str, str]:
        if token is None and self._token_file is not None:
            token = self._token_file.read()
        return {"Authorization": f"Bearer {token}"} if token else {}

    async def get(self, path: str, *, token: str | None = None, params: Any = None) -> Any:
        """The JSON at `/api/v1{path}`; `ApiError` for anything else."""
        return await self._call("GET", path, token=token, params=params)

    async def post(self, path: str, body: Any, *, token: str | None = None) -> Any:
        return await self._call("POST", path, token=token, body=body)

    async def _call(
        self, method: str, path: str, *, token: str | None, params: Any = None, body: Any = None
    ) -> Any:
        url = f"{self.url}/api/v1{path}"
        try:
            async with self._http().request(
                method,
                url,
                params=params,
                json=body,
                headers=self._headers(token),
                ssl=self._ssl if self._ssl is not None else True,
            ) as response:
                try:
                    document = await response.json(content_type=None)
                except ValueError:
                    document = None
                if response.status != 200:
                    raise _error(response.status, document)
                return document
        except (aiohttp.ClientError, TimeoutError) as err:
            raise ApiError(
                502, "Unreachable", f"the controller at {self.url} did not answer: {err!r}"
            ) from err


def _error(status: int, document: Any) -> ApiError:
    found = document.get("error") if isinstance(document, dict) else None
    if isinstance(found, dict):
        return ApiError(status, str(found.get("reason", "")), str(found.get("message", "")))
    return ApiError(status, "Error", f"the controller answered {status}")
