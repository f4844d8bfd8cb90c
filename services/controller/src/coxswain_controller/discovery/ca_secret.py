"""The discovery CA from its Secret (`kubernetes.io/tls`, the one the identity service uses).

The controller mints its discovery serving certificate from the CA the identity service signs
SVIDs with, so proxies trust both through one bundle. At start it waits for the Secret (in
`auto` mode the identity service creates it), retrying with backoff and saying so on /readyz.
"""

from __future__ import annotations

import asyncio
import base64
import logging
from typing import Any

from coxswain_controller.discovery.credentials import CertificateAuthority
from coxswain_controller.kube import api as kube

log = logging.getLogger(__name__)

__all__ = ["wait_for_ca"]

RETRY_CAP_SECONDS = 5.0


def _read(client: Any, namespace: str, name: str) -> CertificateAuthority | None:
    try:
        secret = kube.request(client, "GET", f"/api/v1/namespaces/{namespace}/secrets/{name}")
    except kube.KubeError as err:
        if err.status == 404:
            return None
        raise
    data = secret.get("data") or {}
    if "tls.crt" not in data or "tls.key" not in data:
        return None
    return CertificateAuthority(
        base64.b64decode(data["tls.crt"]), base64.b64decode(data["tls.key"])
    )


async def wait_for_ca(client: Any, namespace: str, name: str) -> CertificateAuthority:
    delay = 0.25
    while True:
        try:
            ca = await asyncio.to_thread(_read, client, namespace, name)
        except kube.KubeError as err:
            log.warning(
                "CA secret unreadable",
                extra={"fields": {"secret": f"{namespace}/{name}", "error": str(err)}},
            )
            ca = None
        if ca is not None:
            return ca
        await asyncio.sleep(delay)
        delay = min(delay * 2, RETRY_CAP_SECONDS)
