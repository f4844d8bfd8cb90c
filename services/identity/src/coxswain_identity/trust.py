"""Publishes the trust bundle: ConfigMap `coxswain-discovery-trust`, key `ca.crt`.

Proxies mount it (spec 000: "the public trust-bundle ConfigMap at
/var/run/secrets/coxswain/trust-bundle/ca.crt"), so it must follow the CA. Every replica
publishes the same bundle; each writes only when the ConfigMap differs, so replicas agreeing
cost one read each. A write that loses a race (409) re-reads and compares again.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from coxswain_identity import errors, kube
from coxswain_identity.ca import ObjectRef

log = logging.getLogger(__name__)

TRUST_CONFIGMAP = "coxswain-discovery-trust"
TRUST_KEY = "ca.crt"
ATTEMPTS = 5
RETRY_SECONDS = (0.5, 1.0, 2.0, 5.0, 10.0)


def publish(core: Any, ref: ObjectRef, bundle: str) -> bool:
    """Blocking: make the ConfigMap hold `bundle`; True if it had to be written."""
    for _ in range(ATTEMPTS):
        try:
            return _publish_once(core, ref, bundle)
        except kube.ApiException as exc:
            if kube.status_of(exc) != 409:
                raise errors.Unavailable(f"writing {ref}: {exc.status} {exc.reason}") from exc
    raise errors.Unavailable(f"writing {ref}: conflicts {ATTEMPTS} times in a row")


def _publish_once(core: Any, ref: ObjectRef, bundle: str) -> bool:
    try:
        current = kube.blocking(core.read_namespaced_config_map, ref.name, ref.namespace)
    except kube.ApiException as exc:
        if kube.status_of(exc) != 404:
            raise
        body = {
            "metadata": {"name": ref.name, "namespace": ref.namespace},
            "data": {TRUST_KEY: bundle},
        }
        kube.blocking(core.create_namespaced_config_map, ref.namespace, body)
        return True
    if (current.data or {}).get(TRUST_KEY) == bundle:
        return False
    current.data = {**(current.data or {}), TRUST_KEY: bundle}
    # The read's resourceVersion rides along: a concurrent writer makes this a 409, not a loss.
    kube.blocking(core.replace_namespaced_config_map, ref.name, ref.namespace, current)
    return True


class Publisher:
    """Keeps the ConfigMap on the latest bundle, retrying until the API server takes it."""

    def __init__(self, core: Any, ref: ObjectRef) -> None:
        self._core = core
        self._ref = ref
        self._bundle: str | None = None
        self._changed = asyncio.Event()

    def want(self, bundle: str) -> None:
        self._bundle = bundle
        self._changed.set()

    async def run(self) -> None:
        failures = 0
        while True:
            await self._changed.wait()
            self._changed.clear()
            bundle = self._bundle
            assert bundle is not None
            try:
                written = await asyncio.to_thread(publish, self._core, self._ref, bundle)
            except errors.Unavailable as exc:
                failures = await self._retry_later(exc, failures)
                continue
            failures = 0
            if written:
                log.info("trust bundle published", extra={"fields": {"configmap": str(self._ref)}})

    async def _retry_later(self, exc: Exception, failures: int) -> int:
        delay = RETRY_SECONDS[min(failures, len(RETRY_SECONDS) - 1)]
        log.warning(
            "trust bundle not published; retrying",
            extra={"fields": {"configmap": str(self._ref), "error": str(exc), "retry": delay}},
        )
        self._changed.set()
        await asyncio.sleep(delay)
        return failures + 1
