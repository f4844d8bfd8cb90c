"""The devkit node running a Coxswain image as a pod: the real proxy, its spec 000 mounts as files.

Covers a Deployment of `.../coxswain-proxy:<tag>` mounting a projected ServiceAccount token
(audience coxswain-discovery) and the trust-bundle ConfigMap at spec 000's paths: the process
really runs `coxswain-proxy serve` with the materialised files passed through `--token-path` and
`--trust-bundle-path`, listens on its pod IP (admin included) and names itself after the pod; the
token file authenticates through TokenReview as the pod's ServiceAccount, bound to the pod; the
bundle file holds the ConfigMap's certificate. With no discovery endpoint the proxy's /readyz is
503, so the pod is Running but not Ready; a readinessProbe on /healthz makes it Ready. The proxy
with a controller and an identity service is the e2e suite's.
"""

from __future__ import annotations

import asyncio
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from coxswain_devkit import kube as k
from coxswain_devkit.node import NodeAgent
from coxswain_devkit.node.conftest import DEPLOYMENTS, app_pods, container_pid, ready, ready_pods
from coxswain_devkit.pki import CertificateAuthority
from coxswain_devkit.waiting import eventually

Obj = dict[str, Any]
IMAGE = "registry.example/coxswain/coxswain-proxy:0.1.0"
SECRETS = "/var/run/secrets/coxswain"


def _proxy(name: str, probe: Obj | None = None) -> Obj:
    container: Obj = {
        "name": "proxy",
        "image": IMAGE,
        "args": ["serve", "--shared", "--workers", "1"],
        "ports": [{"name": "admin", "containerPort": 9092}],
        "volumeMounts": [
            {"name": "discovery-token", "mountPath": f"{SECRETS}/discovery-token"},
            {"name": "trust-bundle", "mountPath": f"{SECRETS}/trust-bundle", "readOnly": True},
        ],
    }
    if probe is not None:
        container["readinessProbe"] = probe
    token = {"audience": "coxswain-discovery", "expirationSeconds": 3600, "path": "token"}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {
                    "serviceAccountName": "coxswain-proxy",
                    "containers": [container],
                    "volumes": [
                        {
                            "name": "discovery-token",
                            "projected": {"sources": [{"serviceAccountToken": token}]},
                        },
                        {"name": "trust-bundle", "configMap": {"name": "coxswain-discovery-trust"}},
                    ],
                },
            },
        },
    }


def _argv(pid: int) -> list[str]:
    return Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0")[:-1]


def _after(argv: list[str], flag: str) -> str:
    return argv[argv.index(flag) + 1]


def _get(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return int(response.status)
    except urllib.error.HTTPError as err:
        return err.code
    except urllib.error.URLError:
        return 0  # not listening (yet)


async def _status(url: str) -> int:
    return await asyncio.to_thread(_get, url)


async def test_a_proxy_pod_runs_with_its_mounts_as_files(kube: k.Kube, agent: NodeAgent) -> None:
    ca = CertificateAuthority.create("test CA", days=1)
    bundle = ca.certificate_pem.decode()
    await kube.create(
        k.path("serviceaccounts", "default"), {"metadata": {"name": "coxswain-proxy"}}
    )
    config_map = {"metadata": {"name": "coxswain-discovery-trust"}, "data": {"ca.crt": bundle}}
    await kube.create(k.path("configmaps", "default"), config_map)
    await kube.create(DEPLOYMENTS, _proxy("shared"))

    async def running() -> Obj | None:
        pods = await app_pods(kube, "shared")
        return pods[0] if pods and (pods[0].get("status") or {}).get("phase") == "Running" else None

    pod = await eventually(running, what="the proxy pod to run")
    ip, name = pod["status"]["podIP"], pod["metadata"]["name"]
    argv = await asyncio.to_thread(_argv, container_pid(pod))
    assert argv[1:6] == ["-m", "coxswain_proxy", "serve", "--shared", "--workers"]
    assert (_after(argv, "--listen-address"), _after(argv, "--admin-address")) == (ip, ip)
    assert _after(argv, "--node-id") == name
    token, trust = Path(_after(argv, "--token-path")), Path(_after(argv, "--trust-bundle-path"))
    assert (token.name, trust.name) == ("token", "ca.crt")
    assert await asyncio.to_thread(trust.read_text) == bundle
    review = await kube.create(
        k.path("tokenreviews", group="authentication.k8s.io"),
        {
            "spec": {
                "token": await asyncio.to_thread(token.read_text),
                "audiences": ["coxswain-discovery"],
            }
        },
    )
    assert review["status"]["authenticated"] is True
    assert review["status"]["user"]["username"] == "system:serviceaccount:default:coxswain-proxy"
    healthy = await eventually(
        lambda: _status(f"http://{ip}:9092/healthz"), what="the proxy's admin server"
    )
    assert healthy == 200
    assert await _status(f"http://{ip}:9092/readyz") == 503, "no snapshot without a controller"
    (pod,) = await app_pods(kube, "shared")
    assert pod["status"]["phase"] == "Running" and not ready(pod)

    await kube.create(
        DEPLOYMENTS, _proxy("probed", {"httpGet": {"path": "/healthz", "port": "admin"}})
    )
    (probed,) = await ready_pods(kube, "probed", 1)
    assert probed["status"]["podIP"] != ip
