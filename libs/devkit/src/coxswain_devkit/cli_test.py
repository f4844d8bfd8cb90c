"""`coxswain-devkit` as a process: the API emulator with manifests, and the echo backend.

Covers `apiserver --port 0 --gateway-api experimental --manifests DIR --kubeconfig-out PATH`
(prints the kubeconfig path, logs "apiserver listening" with its port, serves the bundled and
loaded CRDs to kubectl, stops cleanly on SIGTERM) and `echo --port 0` (logs "echo listening" and
answers). The emulator's behaviour itself is tested in apiserver/.
"""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.request
from pathlib import Path

import yaml

from coxswain_devkit.crds import STANDARD
from coxswain_devkit.processes import ServiceProcess

CRDS = Path(__file__).parent / "crds"


def test_apiserver_process_serves_its_manifests_to_kubectl(tmp_path: Path) -> None:
    manifests = tmp_path / "manifests"
    manifests.mkdir()
    (manifests / "crds.yaml").write_text((CRDS / STANDARD).read_text())
    (manifests / "ns.yaml").write_text("apiVersion: v1\nkind: Namespace\nmetadata: {name: demo}\n")
    kubeconfig = tmp_path / "kubeconfig"
    argv = [
        sys.executable,
        "-m",
        "coxswain_devkit",
        "apiserver",
        "--port",
        "0",
        "--gateway-api",
        "experimental",
        "--manifests",
        str(manifests),
    ]
    with ServiceProcess([*argv, "--kubeconfig-out", str(kubeconfig)]) as proc:
        port = proc.wait_for_msg("apiserver listening")["port"]
        proc.wait_for_msg("kubeconfig written")
        server = yaml.safe_load(kubeconfig.read_text())["clusters"][0]["cluster"]["server"]
        assert server == f"http://127.0.0.1:{port}"
        kubectl = [
            "/usr/bin/kubectl",
            "--kubeconfig",
            str(kubeconfig),
            "--cache-dir",
            str(tmp_path / "cache"),
        ]
        done = subprocess.run(
            [*kubectl, "get", "crd,ns", "-o", "name"],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        assert (
            "customresourcedefinition.apiextensions.k8s.io/httproutes.gateway.networking.k8s.io"
            in done.stdout
        )
        assert (
            "customresourcedefinition.apiextensions.k8s.io/tlsroutes.gateway.networking.k8s.io"
            in done.stdout
        )
        assert "namespace/demo" in done.stdout
        assert proc.stop() == 0


def test_echo_process_answers(tmp_path: Path) -> None:
    argv = [
        sys.executable,
        "-m",
        "coxswain_devkit",
        "echo",
        "--port",
        "0",
        "--namespace",
        "ns",
        "--pod",
        "p",
    ]
    with ServiceProcess(argv) as proc:
        port = proc.wait_for_msg("echo listening")["port"]
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/x", timeout=10) as response:
            seen = json.loads(response.read())
        assert (seen["path"], seen["namespace"], seen["pod"]) == ("/x", "ns", "p")
        assert proc.stop() == 0
