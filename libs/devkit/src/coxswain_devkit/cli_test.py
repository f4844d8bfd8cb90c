"""`coxswain-devkit` as a process: the emulator, the echo backend, the node and the LB.

Covers `apiserver --port 0 --gateway-api experimental --manifests DIR --kubeconfig-out PATH`
(prints the kubeconfig path, logs "apiserver listening" with its port, serves the bundled and
loaded CRDs to kubectl, stops cleanly on SIGTERM), `echo --port 0` (logs "echo listening" and
answers), `grpc-call` against an echo's gRPC port (the method, authority, metadata and pod it saw
as JSON; an unimplemented method's status on stderr, exit 1), and `node` with `lb` beside the
emulator: a Deployment and a LoadBalancer Service applied with kubectl are reachable through the
Service's address, `kubectl logs` reads the pod's output, and both stop cleanly on SIGTERM, taking
the pod's process with them; a node killed with SIGKILL takes its pods' processes with it too (the
kernel's parent-death signal). The emulator's, the node's and the load balancer's behaviour is
tested in their own directories.
"""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

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


def test_grpc_call_prints_what_the_grpc_echo_saw() -> None:
    devkit = [sys.executable, "-m", "coxswain_devkit"]
    argv = [*devkit, "echo", "--port", "0", "--grpc-port", "0", "--namespace", "ns", "--pod", "g"]
    with ServiceProcess(argv) as proc:
        target = f"127.0.0.1:{proc.wait_for_msg('grpc echo listening')['port']}"
        call = [*devkit, "grpc-call", target, "--authority", "grpc.example", "-H", "X-User: ann"]
        done = subprocess.run(call, capture_output=True, text=True, timeout=60, check=False)
        assert done.returncode == 0, done.stderr
        seen = json.loads(done.stdout)
        assert seen["method"] == "/gateway_api_conformance.echo_basic.grpcecho.GrpcEcho/Echo"
        assert (seen["authority"], seen["namespace"], seen["pod"]) == ("grpc.example", "ns", "g")
        assert seen["headers"]["x-user"] == ["ann"]
        three = [*call[:-2], "--method", "EchoThree"]
        failed = subprocess.run(three, capture_output=True, text=True, timeout=60, check=False)
        assert failed.returncode == 1 and "UNIMPLEMENTED" in failed.stderr
        assert proc.stop() == 0


CLUSTER_APP = """
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: default}
spec:
  replicas: 1
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - name: echo
        image: ghcr.io/coxswain/coxswain-devkit-echo:dev
        args: [--port, "8080"]
        ports: [{name: http, containerPort: 8080}]
---
apiVersion: v1
kind: Service
metadata: {name: web, namespace: default}
spec:
  type: LoadBalancer
  selector: {app: web}
  ports: [{name: http, port: 8090, targetPort: http}]
"""


def _until(check: Any, what: str) -> Any:
    deadline = time.monotonic() + 60
    while not (result := check()):
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)
    return result


def test_node_and_lb_processes_run_an_app_reachable_through_its_address(tmp_path: Path) -> None:
    devkit = [sys.executable, "-m", "coxswain_devkit"]
    kubeconfig = tmp_path / "kubeconfig"
    api = ServiceProcess([*devkit, "apiserver", "--port", "0", "--kubeconfig-out", str(kubeconfig)])
    with api:
        url = f"http://127.0.0.1:{api.wait_for_msg('apiserver listening')['port']}"
        run = "devkit=" + shlex.join(devkit)
        node = ServiceProcess([*devkit, "node", "--api-server", url, "--run", run]).start()
        lb = ServiceProcess([*devkit, "lb", "--api-server", url]).start()
        with node, lb:
            node.wait_for_msg("node agent started")
            lb.wait_for_msg("load balancer started")
            kubectl = ["/usr/bin/kubectl", "--kubeconfig", str(kubeconfig)]
            kubectl += ["--cache-dir", str(tmp_path / "cache")]
            app = tmp_path / "app.yaml"
            app.write_text(CLUSTER_APP)
            subprocess.run([*kubectl, "apply", "--validate=false", "-f", str(app)], check=True)

            def get(*args: str) -> str:
                done = subprocess.run([*kubectl, *args], capture_output=True, text=True, check=True)
                return done.stdout.strip()

            ingress = "jsonpath={.status.loadBalancer.ingress[0].ip}"
            ip = _until(lambda: get("get", "svc", "web", "-o", ingress), "the Service's address")
            pod = _until(lambda: _echo(f"http://{ip}:8090/"), "the pod through its address")["pod"]
            assert pod.startswith("web-")
            assert "echo listening" in get("logs", pod)
            pod_ip = get("get", "pod", pod, "-o", "jsonpath={.status.podIP}")
            assert _echo(f"http://{pod_ip}:8080/") is not None
            assert node.stop() == 0
            assert _echo(f"http://{pod_ip}:8080/") is None, "the pod's process went with the node"
            assert lb.stop() == 0
        assert api.stop() == 0


def _echo(url: str) -> dict[str, Any] | None:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            found: dict[str, Any] = json.loads(response.read())
            return found
    except OSError:
        return None


def test_a_killed_node_takes_its_pods_processes_with_it(tmp_path: Path) -> None:
    devkit = [sys.executable, "-m", "coxswain_devkit"]
    kubeconfig = tmp_path / "kubeconfig"
    api = ServiceProcess([*devkit, "apiserver", "--port", "0", "--kubeconfig-out", str(kubeconfig)])
    with api:
        url = f"http://127.0.0.1:{api.wait_for_msg('apiserver listening')['port']}"
        with ServiceProcess([*devkit, "node", "--api-server", url]) as node:
            node.wait_for_msg("node agent started")
            app = tmp_path / "app.yaml"
            app.write_text(CLUSTER_APP.split("---")[0])
            kubectl = ["/usr/bin/kubectl", "--kubeconfig", str(kubeconfig)]
            kubectl += ["--cache-dir", str(tmp_path / "cache")]
            subprocess.run([*kubectl, "apply", "--validate=false", "-f", str(app)], check=True)
            pod_ip = node.wait_for_msg("pod started")["ip"]
            _until(lambda: _echo(f"http://{pod_ip}:8080/"), "the pod to answer")
            node.kill()
            _until(lambda: _echo(f"http://{pod_ip}:8080/") is None, "the pod's process to die")
        assert api.stop() == 0
