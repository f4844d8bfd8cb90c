"""The Kubernetes connection: how the client is configured, and how its blocking calls are made.

The official client blocks its caller, so every call goes through `call` (a worker thread) from
the event loop, or `blocking` from a thread of our own (the Secret watch). Both map a network
failure or a server-side error to `errors.Unavailable` here, once; an `ApiException` that means
something to the caller (404 not found, 409 already exists or conflict) is passed through.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, TypeVar

import kubernetes
import urllib3  # pants: no-infer-dep  (kubernetes' own transport: it comes with the client)
from kubernetes.client import ApiException

__all__ = ["ApiException", "ConfigError", "blocking", "call", "connect", "status_of"]

from coxswain_identity import errors

T = TypeVar("T")

# Bound on any single request: a hung API server must not hold an issuance (or a watch) forever.
REQUEST_TIMEOUT_SECONDS = 10.0


class ConfigError(Exception):
    """Neither --api-server, --kubeconfig nor an in-cluster configuration could be used."""


def connect(*, api_server: str | None, kubeconfig: str | None) -> Any:
    """An `ApiClient` for --api-server (tests), else --kubeconfig, else the in-cluster config."""
    try:
        if api_server:
            return kubernetes.client.ApiClient(kubernetes.client.Configuration(host=api_server))
        if kubeconfig:
            return kubernetes.config.new_client_from_config(config_file=kubeconfig)
        configuration = kubernetes.client.Configuration()
        kubernetes.config.load_incluster_config(client_configuration=configuration)
        return kubernetes.client.ApiClient(configuration)
    except (kubernetes.config.ConfigException, OSError, ValueError) as exc:
        raise ConfigError(f"no Kubernetes API configuration: {exc}") from exc


def status_of(exc: ApiException) -> int:
    return int(exc.status or 0)


def blocking(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """Call the client from a worker thread, with a timeout and our errors."""
    kwargs.setdefault("_request_timeout", REQUEST_TIMEOUT_SECONDS)
    try:
        return fn(*args, **kwargs)
    except ApiException as exc:
        # 429 and 5xx are the server's trouble, 0 is the client's own failure: retry later.
        if status_of(exc) == 0 or status_of(exc) == 429 or status_of(exc) >= 500:
            raise errors.Unavailable(f"Kubernetes API error {exc.status}: {exc.reason}") from exc
        raise
    except (urllib3.exceptions.HTTPError, OSError) as exc:
        raise errors.Unavailable(f"Kubernetes API unreachable: {exc}") from exc


async def call(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """`blocking` in a worker thread, so the event loop never waits on the API server."""
    return await asyncio.to_thread(blocking, fn, *args, **kwargs)
