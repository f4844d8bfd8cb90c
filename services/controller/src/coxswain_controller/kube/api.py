"""Raw JSON requests through the official `kubernetes` client, the same way for every kind.

The watched objects are handed to translation exactly as the API server serves them (plain
dicts, camelCase keys), and Gateway API kinds have no generated models anyway, so this module
skips the client's model layer: `param_serialize` (which applies the configuration's auth) then
`call_api` with the body left unread. Every call here blocks; callers run them in worker threads.

Errors are mapped once, at this boundary, to `KubeError` with the HTTP status (0 when the
request never got an answer), so the reflector, the elector, the status writer and the Event
recorder branch on a number, not on urllib3's exception zoo.
"""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Iterator, Sequence
from typing import Any

import urllib3  # pants: no-infer-dep  (the kubernetes client's own transport: it comes with it)
from kubernetes.client import ApiException

__all__ = [
    "JSON",
    "KubeError",
    "Silent",
    "WatchStream",
    "object_path",
    "open_watch",
    "request",
    "request_text",
]

JSON = dict[str, Any]

# A request that gets no answer at all within this long is a failure, not a wait.
CONNECT_TIMEOUT_SECONDS = 5.0
MERGE_PATCH = "application/merge-patch+json"


class KubeError(Exception):
    """The API server refused a request (`status` is its HTTP status) or was not reached (0)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"Kubernetes API {status or 'unreachable'}: {message}")
        self.status = status
        self.message = message


class Silent(KubeError):
    """A watch stream carried not a byte for longer than its read timeout."""

    def __init__(self, message: str) -> None:
        super().__init__(0, message)


def object_path(
    group: str, version: str, plural: str, namespace: str | None, name: str, *, sub: str = ""
) -> str:
    """The URL path of one object (`group` "" for the core API), or of its `sub`resource."""
    base = f"/apis/{group}/{version}" if group else f"/api/{version}"
    scope = f"/namespaces/{namespace}" if namespace else ""
    return f"{base}{scope}/{plural}/{name}" + (f"/{sub}" if sub else "")


def _send(
    client: Any,
    method: str,
    path: str,
    *,
    query: Sequence[tuple[str, str]] = (),
    body: Any = None,
    content_type: str = "application/json",
    timeout: float | tuple[float, float],
) -> Any:
    """The urllib3 response, unread; raises `KubeError` for anything but a 2xx."""
    headers = {"Accept": "application/json", "Content-Type": content_type}
    try:
        method, url, headers, body, _ = client.param_serialize(
            method,
            path,
            query_params=list(query),
            header_params=headers,
            body=body,
            auth_settings=["BearerToken"],
        )
        response = client.call_api(
            method, url, header_params=headers, body=body, _request_timeout=timeout
        )
    except ApiException as exc:
        raise KubeError(int(exc.status or 0), str(exc.reason)) from exc
    except (urllib3.exceptions.HTTPError, OSError) as exc:
        raise KubeError(0, str(exc)) from exc
    raw = response.response
    if not 200 <= raw.status <= 299:
        message = _reason(raw)
        raw.release_conn()
        raise KubeError(raw.status, message)
    return raw


def _reason(raw: Any) -> str:
    try:
        status = json.loads(raw.data)
        return str(status.get("message") or raw.reason)
    except (ValueError, AttributeError):
        return str(raw.reason)


def request(
    client: Any,
    method: str,
    path: str,
    *,
    query: Sequence[tuple[str, str]] = (),
    body: Any = None,
    content_type: str = "application/json",
    timeout: float = 30.0,
) -> JSON:
    """One request, its JSON answer as a plain dict."""
    raw = _send(
        client,
        method,
        path,
        query=query,
        body=body,
        content_type=content_type,
        timeout=(CONNECT_TIMEOUT_SECONDS, timeout),
    )
    try:
        data: JSON = json.loads(raw.data)
    except (urllib3.exceptions.HTTPError, OSError) as exc:
        raise KubeError(0, str(exc)) from exc
    except ValueError as exc:
        raise KubeError(raw.status, f"not JSON: {exc}") from exc
    finally:
        raw.release_conn()
    return data


def request_text(
    client: Any, path: str, *, query: Sequence[tuple[str, str]] = (), timeout: float = 30.0
) -> str:
    """One GET whose answer is text, not JSON (a pod's log)."""
    raw = _send(client, "GET", path, query=query, timeout=(CONNECT_TIMEOUT_SECONDS, timeout))
    try:
        return bytes(raw.data).decode("utf-8", "replace")
    except (urllib3.exceptions.HTTPError, OSError) as exc:
        raise KubeError(0, str(exc)) from exc
    finally:
        raw.release_conn()


class WatchStream:
    """One open watch response: read event by event in a worker thread, abortable from another.

    `abort` shuts the socket down, which wakes a read blocked in a worker thread at once; the
    lock keeps `close` from pulling the connection out from under a read still unwinding.
    """

    def __init__(self, raw: Any) -> None:
        self._raw = raw
        self._lines = _lines(raw)
        self._lock = threading.Lock()

    def next_event(self) -> JSON | None:
        """The next event, or None when the server ended the stream. Blocks."""
        with self._lock:
            try:
                line = next(self._lines, None)
            except urllib3.exceptions.ReadTimeoutError as exc:
                raise Silent(str(exc)) from exc
            except (urllib3.exceptions.HTTPError, OSError) as exc:
                raise KubeError(0, f"watch stream broke: {exc}") from exc
        if line is None:
            return None
        try:
            event: JSON = json.loads(line)
        except ValueError as exc:
            raise KubeError(0, f"watch event is not JSON: {exc}") from exc
        return event

    def abort(self) -> None:
        # Already read to the end, released or gone: then nothing is blocked on it.
        with contextlib.suppress(ValueError, OSError, RuntimeError):
            self._raw.shutdown()

    def close(self) -> None:
        with self._lock:
            self._raw.close()
            self._raw.release_conn()  # hands the pool its slot back; the closed socket is dropped


def _lines(raw: Any) -> Iterator[bytes]:
    buffer = b""
    for chunk in raw.stream(amt=None, decode_content=False):
        buffer += chunk
        while b"\n" in buffer:
            line, buffer = buffer.split(b"\n", 1)
            if line.strip():
                yield line
    if buffer.strip():
        yield buffer


def open_watch(
    client: Any, path: str, *, query: Sequence[tuple[str, str]], silence: float
) -> WatchStream:
    """Start a watch; a stream with no byte for `silence` seconds raises `Silent` when read."""
    raw = _send(client, "GET", path, query=query, timeout=(CONNECT_TIMEOUT_SECONDS, silence))
    return WatchStream(raw)
