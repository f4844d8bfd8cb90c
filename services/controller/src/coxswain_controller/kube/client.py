"""The `kubernetes` ApiClient the controller uses, from flags or the pod's environment."""

from __future__ import annotations

import os
from pathlib import Path

import kubernetes

__all__ = ["api_client"]

# One connection per open watch, plus writes: the default pool (4) would make urllib3 discard
# connections and log "pool is full" under normal load.
CONNECTION_POOL = 32


def api_client(
    *, api_server: str | None, kubeconfig: Path | None
) -> kubernetes.client.ApiClient | None:
    """An ApiClient from `--api-server`, `--kubeconfig`, or in-cluster config; None without any."""
    config = kubernetes.client.Configuration()
    if api_server:
        config.host = api_server
    elif kubeconfig is not None:
        kubernetes.config.load_kube_config(config_file=str(kubeconfig), client_configuration=config)
    elif os.environ.get("KUBERNETES_SERVICE_HOST"):
        kubernetes.config.load_incluster_config(client_configuration=config)
    else:
        return None
    config.connection_pool_maxsize = CONNECTION_POOL
    return kubernetes.client.ApiClient(config)
