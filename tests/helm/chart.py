"""The chart as the tests see it: `helm` run on deploy/helm/coxswain, its output as objects.

`CASES` is the matrix of values every chart test runs over: the defaults; a dedicated-only
cluster (the shared pool at 0 replicas, a class whose parameters ask for dedicated proxies);
ClusterIP VIP Services; Ingress-only (no Gateway API served); and unprivileged Ingress ports with
the UI's own token (and the UI on a privileged port). `render` runs `helm template` (with
`--api-versions` standing in for a cluster that serves the Gateway API) and returns a
`Rendered`, which finds objects, containers and their flags.
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from helm import tools

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "deploy" / "helm" / "coxswain"
CRDS = ROOT / "deploy" / "crds"
NAMESPACE = "coxswain-system"
RELEASE = "coxswain"
# What `.Capabilities.APIVersions.Has` sees in a cluster with the Gateway API CRDs.
GATEWAY_API = "gateway.networking.k8s.io/v1/GatewayClass"

Obj = dict[str, Any]


@dataclass(frozen=True)
class Case:
    values: dict[str, Any] = field(default_factory=dict)
    gateway_api: bool = True  # whether the cluster serves the Gateway API


CASES: dict[str, Case] = {
    "defaults": Case(),
    "dedicated-only": Case(
        {"proxy": {"shared": {"replicas": 0}}, "gatewayClass": {"parameters": {"replicas": 2}}}
    ),
    "clusterip-vips": Case({"proxy": {"shared": {"vipServiceType": "ClusterIP"}}}),
    "ingress-only": Case(gateway_api=False),
    "unprivileged-ports-ui-token": Case(
        {
            "proxy": {"shared": {"ingress": {"httpPort": 8080, "httpsPort": 8443}}},
            "ui": {"token": {"enabled": True}, "port": 80},
        }
    ),
}


def helm(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    """Run helm with its caches and configuration in a directory of their own."""
    with tempfile.TemporaryDirectory() as home:
        env = {
            **os.environ,
            "HELM_CACHE_HOME": f"{home}/cache",
            "HELM_CONFIG_HOME": f"{home}/config",
            "HELM_DATA_HOME": f"{home}/data",
        }
        done = subprocess.run(
            [str(tools.helm()), *args],
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
            check=False,
        )
    if check:
        assert done.returncode == 0, done.stderr
    return done


def values_file(values: dict[str, Any], directory: Path) -> Path:
    path = directory / "values.json"  # JSON is YAML
    path.write_text(json.dumps(values))
    return path


def template_args(case: Case, directory: Path, *extra: str) -> list[str]:
    args = [RELEASE, str(CHART), "--namespace", NAMESPACE]
    args += ["--values", str(values_file(case.values, directory))]
    if case.gateway_api:
        args += ["--api-versions", GATEWAY_API]
    return [*args, *extra]


def render(case: Case, *extra: str) -> Rendered:
    with tempfile.TemporaryDirectory() as directory:
        out = helm("template", *template_args(case, Path(directory), *extra)).stdout
    return Rendered([doc for doc in yaml.safe_load_all(out) if isinstance(doc, dict)])


@dataclass(frozen=True)
class Rendered:
    docs: list[Obj]

    def kinds(self) -> set[str]:
        return {doc["kind"] for doc in self.docs}

    def all(self, kind: str) -> list[Obj]:
        return [doc for doc in self.docs if doc["kind"] == kind]

    def find(self, kind: str, name: str) -> Obj | None:
        found = [doc for doc in self.all(kind) if doc["metadata"]["name"] == name]
        assert len(found) <= 1, f"two {kind} {name}"
        return found[0] if found else None

    def get(self, kind: str, name: str) -> Obj:
        found = self.find(kind, name)
        assert found is not None, f"no {kind} {name} in {sorted(self.names(kind))}"
        return found

    def names(self, kind: str) -> set[str]:
        return {doc["metadata"]["name"] for doc in self.all(kind)}

    def pods(self) -> Iterator[tuple[str, Obj]]:
        """(Deployment name, pod spec) of every Deployment."""
        for deployment in self.all("Deployment"):
            yield deployment["metadata"]["name"], deployment["spec"]["template"]["spec"]

    def container(self, deployment: str) -> Obj:
        (container,) = self.get("Deployment", deployment)["spec"]["template"]["spec"]["containers"]
        return dict(container)

    def args(self, deployment: str) -> list[str]:
        return [str(arg) for arg in self.container(deployment)["args"]]

    def flag(self, deployment: str, name: str) -> str | None:
        """The value of `--name=value` in a Deployment's container args (None if absent)."""
        prefix = f"{name}="
        values = [a[len(prefix) :] for a in self.args(deployment) if a.startswith(prefix)]
        assert len(values) <= 1, f"{name} given twice to {deployment}"
        return values[0] if values else None
