"""The rendered chart applied with kubectl to the devkit API emulator, as an install would.

Covers, for every case of `chart.CASES`: the chart's CRDs applied and Established first (as
Helm installs its crds/ directory), then every object kubectl can apply to the emulator created,
read back as rendered (the Deployments' containers, the Services' selectors and ports), and a
second apply leaving everything unchanged (an upgrade to the same values changes nothing); a
changed value (the shared pool's replicas) is applied as a change. With the Gateway API CRDs
installed first where the case says the cluster serves them.
Applied with kubectl's schema validation on (the emulator serves OpenAPI), every kind the chart
renders included (PodDisruptionBudgets too). Leaves out running the Deployments: that is the
install e2e's (tests/e2e/install_test.py).
"""

from __future__ import annotations

import json
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from coxswain_devkit import crds
from coxswain_devkit.apiserver import ThreadedApiServer
from helm import chart

KUBECTL = "/usr/bin/kubectl"
Obj = dict[str, Any]


class Kubectl:
    def __init__(self, api: ThreadedApiServer, directory: Path) -> None:
        kubeconfig = api.call(lambda s: s.write_kubeconfig(directory / "kubeconfig"))
        self._base = [KUBECTL, "--kubeconfig", str(kubeconfig)]
        self._base += ["--cache-dir", str(directory / "cache")]

    def __call__(self, *args: str) -> str:
        done = subprocess.run(
            [*self._base, *args], capture_output=True, text=True, timeout=120, check=False
        )
        assert done.returncode == 0, done.stderr
        return done.stdout

    def apply(self, docs: list[Obj], directory: Path) -> str:
        path = directory / "manifests.yaml"
        path.write_text(yaml.safe_dump_all(docs))
        return self("apply", "-f", str(path))


@pytest.fixture
def workdir() -> Iterator[Path]:
    with tempfile.TemporaryDirectory() as directory:
        yield Path(directory)


def _served_kinds(kubectl: Kubectl) -> set[tuple[str, str]]:
    """(group, kind) of every kind the emulator's discovery lists."""
    listed = kubectl("api-resources", "-o", "wide", "--no-headers")
    served = set()
    for line in listed.splitlines():
        fields = line.split()
        # NAME [SHORTNAMES] APIVERSION NAMESPACED KIND VERBS...: the apiVersion is the field
        # before the true/false one.
        at = next(i for i, f in enumerate(fields) if f in ("true", "false"))
        group = fields[at - 1].rpartition("/")[0]
        served.add((group, fields[at + 1]))
    return served


def _group(doc: Obj) -> str:
    return str(doc["apiVersion"]).rpartition("/")[0]


def _install(case: chart.Case, api: ThreadedApiServer, workdir: Path) -> tuple[Kubectl, list[Obj]]:
    kubectl = Kubectl(api, workdir)
    if case.gateway_api:  # a cluster that serves the Gateway API, installed beforehand
        kubectl("apply", "-f", str(Path(crds.__file__).parent / crds.STANDARD))
    docs = chart.render(case, "--include-crds").docs
    definitions = [d for d in docs if d["kind"] == "CustomResourceDefinition"]
    kubectl.apply(definitions, workdir)
    kubectl("wait", "--for=condition=Established", "crd", "--all", "--timeout=60s")
    namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": chart.NAMESPACE}}
    kubectl.apply([namespace], workdir)
    served = _served_kinds(kubectl)
    rest = [d for d in docs if d["kind"] != "CustomResourceDefinition"]
    not_served = {d["kind"] for d in rest if (_group(d), d["kind"]) not in served}
    assert not not_served, f"the emulator serves no {sorted(not_served)}"
    return kubectl, rest


def _name(doc: Obj) -> str:
    return f"{doc['kind']}/{doc['metadata'].get('namespace', '')}/{doc['metadata']['name']}"


def _read(kubectl: Kubectl, doc: Obj) -> Obj:
    kind = f"{doc['kind'].lower()}.{_group(doc)}".rstrip(".")
    where = ["-n", doc["metadata"]["namespace"]] if "namespace" in doc["metadata"] else []
    return dict(json.loads(kubectl("get", kind, doc["metadata"]["name"], *where, "-o", "json")))


@pytest.mark.parametrize("case", list(chart.CASES))
def test_the_rendered_chart_applies(case: str, workdir: Path) -> None:
    with ThreadedApiServer() as api:
        kubectl, docs = _install(chart.CASES[case], api, workdir)
        out = kubectl.apply(docs, workdir)
        for doc in docs:
            assert f"/{doc['metadata']['name']} created" in out, (doc["kind"], out)
            live = _read(kubectl, doc)
            if doc["kind"] == "Deployment":
                template = live["spec"]["template"]
                assert (
                    template["spec"]["containers"] == doc["spec"]["template"]["spec"]["containers"]
                )
                assert (
                    template["metadata"]["labels"] == doc["spec"]["template"]["metadata"]["labels"]
                )
            if doc["kind"] == "Service":
                assert live["spec"]["selector"] == doc["spec"]["selector"]
                assert [p["port"] for p in live["spec"]["ports"]] == [
                    p["port"] for p in doc["spec"]["ports"]
                ]
        versions = {_name(doc): _read(kubectl, doc)["metadata"]["resourceVersion"] for doc in docs}
        again = kubectl.apply(docs, workdir)
        # A PodDisruptionBudget's selector is `patchStrategy: replace`, so kubectl's
        # client-side apply always sends it and says "configured", against any API server;
        # the object is not written again all the same.
        budgets = [doc for doc in docs if doc["kind"] == "PodDisruptionBudget"]
        assert again.count(" unchanged") == len(docs) - len(budgets), again
        for doc in docs:
            assert _read(kubectl, doc)["metadata"]["resourceVersion"] == versions[_name(doc)]


def test_a_changed_value_is_applied_as_a_change(workdir: Path) -> None:
    with ThreadedApiServer() as api:
        kubectl, docs = _install(chart.CASES["defaults"], api, workdir)
        kubectl.apply(docs, workdir)
        scaled = chart.Case({"proxy": {"shared": {"replicas": 3}}})
        applied = {(d["kind"], _group(d)) for d in docs}
        upgraded = [d for d in chart.render(scaled).docs if (d["kind"], _group(d)) in applied]
        out = kubectl.apply(upgraded, workdir)
        assert "deployment.apps/coxswain-proxy configured" in out
        assert "deployment.apps/coxswain-controller unchanged" in out
        deployments = {d["metadata"]["name"]: d for d in upgraded if d["kind"] == "Deployment"}
        proxy = deployments["coxswain-proxy"]
        assert _read(kubectl, proxy)["spec"]["replicas"] == 3
