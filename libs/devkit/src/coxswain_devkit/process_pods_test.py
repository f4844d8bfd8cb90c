"""The stack's processes as Pods: `kubectl logs` reads what each wrote, its status says it ended.

A real process, a real API emulator and the real `kubernetes` client reading `pods/<name>/log`
(which the emulator proxies to the node's kubelet endpoint). Covers: lines written before the
process was registered and after, `tailLines`, the Pod's status while it runs and once it
exited, and an unknown container. Leaves out what `node.logs` tests for every node (follow,
timestamps, limits), since the same server answers.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import kubernetes
import pytest

from coxswain_devkit.apiserver import ThreadedApiServer
from coxswain_devkit.process_pods import NODE, PROCESS_ANNOTATION, ProcessNode, RecordedProcess

WAIT = 30.0
# Writes a line, then one more once `go` exists, then waits for SIGTERM.
SCRIPT = """
import os, sys, time
go = sys.argv[1]
sys.stderr.write('{"msg": "first"}\\n'); sys.stderr.flush()
while not os.path.exists(go):
    time.sleep(0.01)
sys.stderr.write('{"msg": "second"}\\n'); sys.stderr.flush()
time.sleep(120)
"""


def eventually(predicate: Callable[[], Any], what: str) -> Any:
    deadline = time.monotonic() + WAIT
    while not (found := predicate()):
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)
    return found


@dataclass
class Cluster:
    core: Any  # the kubernetes client's CoreV1Api
    node: ProcessNode


@pytest.fixture
def cluster() -> Iterator[Cluster]:
    with ThreadedApiServer() as api:
        node = ProcessNode(api.url).start()
        client: Any = kubernetes.client.ApiClient(kubernetes.client.Configuration(host=api.url))
        try:
            yield Cluster(kubernetes.client.CoreV1Api(client), node)
        finally:
            client.close()
            node.close()


def _started(tmp_path: Path) -> tuple[RecordedProcess, Path]:
    tmp_path.mkdir(exist_ok=True)
    go = tmp_path / "go"
    process = RecordedProcess([sys.executable, "-c", SCRIPT, str(go)])
    process.start()
    process.wait_for_msg("first")  # written before the Pod exists: kept for its log
    return process, go


def test_a_registered_process_has_a_running_pod_whose_log_is_its_stderr(
    cluster: Cluster, tmp_path: Path
) -> None:
    core, (process, go) = cluster.core, _started(tmp_path)
    try:
        cluster.node.register(process, namespace="default", pod="worker", container="w")
        pod = core.read_namespaced_pod("worker", "default")
        assert pod.spec.node_name == NODE
        assert PROCESS_ANNOTATION in pod.metadata.annotations
        assert pod.status.phase == "Running" and pod.status.pod_ip == "127.0.0.1"
        assert core.read_namespaced_pod_log("worker", "default") == '{"msg": "first"}\n'
        go.touch()

        def both() -> bool:
            return str(core.read_namespaced_pod_log("worker", "default")).count("\n") == 2

        eventually(both, "the second line in the log")
        tail = core.read_namespaced_pod_log("worker", "default", tail_lines=1)
        assert tail == '{"msg": "second"}\n'
    finally:
        process.stop()


def test_a_process_that_ended_is_a_terminated_pod_with_its_exit_code(
    cluster: Cluster, tmp_path: Path
) -> None:
    core, (process, _) = cluster.core, _started(tmp_path)
    cluster.node.register(process, namespace="default", pod="worker", container="w")
    process.stop()  # SIGTERM: the script does not catch it

    def ended() -> Any:
        pod = core.read_namespaced_pod("worker", "default")
        return pod.status.phase == "Failed" and pod

    pod = eventually(ended, "the Pod to say the process ended")
    (container,) = pod.status.container_statuses
    assert container.state.terminated.exit_code == 143  # 128 + SIGTERM, as a runtime reports
    assert container.ready is False
    assert core.read_namespaced_pod_log("worker", "default") == '{"msg": "first"}\n'


def test_an_unknown_container_is_refused_with_kube_apiservers_words(
    cluster: Cluster, tmp_path: Path
) -> None:
    core, (process, _) = cluster.core, _started(tmp_path)
    try:
        cluster.node.register(process, namespace="default", pod="worker", container="w")
        with pytest.raises(kubernetes.client.exceptions.ApiException) as refused:
            core.read_namespaced_pod_log("worker", "default", container="other")
        assert refused.value.status == 400
        assert "container other is not valid for pod worker" in str(refused.value.body)
    finally:
        process.stop()


def test_a_later_process_of_the_same_name_gets_a_pod_and_a_log_of_its_own(
    cluster: Cluster, tmp_path: Path
) -> None:
    core = cluster.core
    first, _ = _started(tmp_path / "a")
    cluster.node.register(first, namespace="default", pod="worker", container="w")
    old_uid = core.read_namespaced_pod("worker", "default").metadata.uid
    first.kill()  # a controller killed by a failover test, started again under its name
    second, go = _started(tmp_path / "b")
    try:
        cluster.node.register(second, namespace="default", pod="worker", container="w")
        go.touch()
        eventually(lambda: "second" in core.read_namespaced_pod_log("worker", "default"), "it")
        assert core.read_namespaced_pod_log("worker", "default").count("first") == 1
        cluster.node.close()  # the status writes queued are done: the first one's exit too
        pod = core.read_namespaced_pod("worker", "default")
        assert pod.metadata.uid != old_uid
        assert pod.status.phase == "Running"  # the first one's exit was not written onto it
    finally:
        second.stop()
