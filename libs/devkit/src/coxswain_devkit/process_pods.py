"""Pods standing for the processes the stack runs itself, and the kubelet endpoint of their logs.

The stack runs the API emulator, the load balancer, the node agent, the echo backends, the
identity service, the controller and the shared proxy as plain processes on 127.0.0.1: tests
reach them there, kill them and wait for their log lines. Only dedicated proxies are pods the
node agent runs. So that `kubectl get pods` and `kubectl logs` cover every service all the same,
the stack registers a node of its own, `devkit-stack`, and one Pod bound to it per process: one
container named for the role, `podIP` 127.0.0.1, Running and Ready while the process runs, then
terminated with its exit code. The Node advertises a kubelet endpoint (the node agent's log
server, `node.logs.KubeletServer`, on an event loop in a thread of its own) serving what each
process wrote on stderr, so the emulator's `pods/<name>/log` reaches it as it reaches the agent's
pods: `--follow`, `--tail`, `--since`, `--timestamps` and `--limit-bytes` work (`--previous` has
nothing to show: a process is never restarted).

These Pods are records, not instructions: nothing restarts a process, and deleting its Pod stops
nothing. They carry the annotation `coxswain-devkit/process` with the command line.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import queue
import shlex
import threading
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import IO, Any

import kubernetes
import urllib3  # pants: no-infer-dep  (the kubernetes client's own transport: it comes with it)

from coxswain_devkit.node.logs import KubeletServer, LogBuffer
from coxswain_devkit.processes import ServiceProcess

__all__ = ["NODE", "PROCESS_ANNOTATION", "ProcessNode", "RecordedProcess"]

log = logging.getLogger("coxswain_devkit.stack")

NODE = "devkit-stack"
PROCESS_ANNOTATION = "coxswain-devkit/process"
Obj = dict[str, Any]
Sink = Callable[[bytes | None], None]  # a line of stderr; None once it has ended
_API_ERRORS = (kubernetes.client.exceptions.ApiException, urllib3.exceptions.HTTPError, OSError)


class RecordedProcess(ServiceProcess):
    """A `ServiceProcess` whose raw stderr lines also go to a sink, once one is attached (the
    lines written before are replayed to it), so its Pod's log holds them from the first."""

    def __init__(self, argv: Sequence[str], *, env: Mapping[str, str] | None = None) -> None:
        super().__init__(argv, env=env)
        self._tee_lock = threading.Lock()
        self._backlog: list[bytes] = []
        self._ended = False
        self._sink: Sink | None = None

    def attach(self, sink: Sink) -> None:
        with self._tee_lock:
            for raw in self._backlog:
                sink(raw)
            self._backlog.clear()
            if self._ended:
                sink(None)
            self._sink = sink

    def _append(self, raw: bytes) -> None:
        super()._append(raw)
        self._tee(raw)

    def _read(self, stream: IO[bytes]) -> None:
        super()._read(stream)
        self._tee(None)

    def _tee(self, raw: bytes | None) -> None:
        with self._tee_lock:
            if self._sink is not None:
                self._sink(raw)
            elif raw is None:
                self._ended = True
            else:
                self._backlog.append(raw)


@dataclass
class _Registered:
    process: RecordedProcess
    container: str
    buffer: LogBuffer
    started: str = field(default_factory=lambda: _now())
    uid: str = ""  # its Pod's, once created: a later process of the same name gets a new Pod


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class ProcessNode:
    """The node `devkit-stack`: a Pod per registered process, and their logs for `kubectl`."""

    def __init__(self, api_url: str) -> None:
        self._api_url = api_url
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name=NODE, daemon=True)
        self._server = KubeletServer(self._lookup)
        self._pods: dict[tuple[str, str], _Registered] = {}
        self._writes: queue.Queue[Callable[[], None] | None] = queue.Queue()
        self._writer = threading.Thread(target=self._write_forever, name=f"{NODE}-status")
        self._started = False

    def start(self) -> ProcessNode:
        self._thread.start()
        self._writer.start()
        self._started = True
        self._call(self._server.start())
        self._register_node()
        return self

    def close(self) -> None:
        """Finish the status writes already queued, then stop serving logs."""
        if not self._started:
            return
        self._started = False
        self._writes.put(None)
        self._writer.join(10.0)
        self._call(self._server.stop())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5.0)
        self._loop.close()

    def register(
        self,
        process: RecordedProcess,
        *,
        namespace: str,
        pod: str,
        container: str,
        labels: Mapping[str, str] | None = None,
    ) -> None:
        """Create the Pod standing for a started process and start serving its log."""
        buffer: LogBuffer = self._call(_new_buffer())
        entry = _Registered(process, container, buffer)
        self._pods[(namespace, pod)] = entry
        self._create_pod(namespace, pod, entry, dict(labels or {}))

        def sink(raw: bytes | None) -> None:
            # Once closed, the stack stopped serving logs: nobody reads them any more.
            with contextlib.suppress(RuntimeError):
                self._loop.call_soon_threadsafe(self._line, namespace, pod, entry, raw)

        process.attach(sink)

    # ------------------------------------------------------------------ logs

    def _line(self, namespace: str, pod: str, entry: _Registered, raw: bytes | None) -> None:
        if raw is not None:
            entry.buffer.append(raw)
            return
        entry.buffer.close()
        self._writes.put(lambda: self._write_exit(namespace, pod, entry))

    def _lookup(self, namespace: str, pod: str, container: str, previous: bool) -> LogBuffer | str:
        entry = self._pods.get((namespace, pod))
        if entry is None:
            return f'pod "{pod}" is not a process on node "{NODE}"'
        if previous:
            return f'previous terminated container "{container}" in pod "{pod}" not found'
        return entry.buffer

    # ------------------------------------------------------------------ the API objects

    def _client(self) -> kubernetes.client.ApiClient:
        configuration = kubernetes.client.Configuration(host=self._api_url)
        configuration.retries = 0  # at teardown the API server may be gone: give up at once
        return kubernetes.client.ApiClient(configuration)

    def _register_node(self) -> None:
        body = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": NODE}}
        with self._client() as client:
            core: Any = kubernetes.client.CoreV1Api(client)
            node = _json(core.create_node(body, _preload_content=False))
            node["status"] = {
                "addresses": [
                    {"type": "InternalIP", "address": "127.0.0.1"},
                    {"type": "Hostname", "address": NODE},
                ],
                "daemonEndpoints": {"kubeletEndpoint": {"Port": self._server.port}},
                "conditions": [_condition("Ready", True, "KubeletReady", "the stack's processes")],
            }
            core.replace_node_status(NODE, node, _preload_content=False)

    def _create_pod(self, namespace: str, name: str, entry: _Registered, labels: Obj) -> None:
        argv = entry.process.argv
        body = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": name,
                "namespace": namespace,
                "labels": {"app.kubernetes.io/managed-by": "coxswain-devkit-stack", **labels},
                "annotations": {PROCESS_ANNOTATION: shlex.join(argv)},
            },
            "spec": {
                "nodeName": NODE,
                "restartPolicy": "Never",
                "containers": [
                    {"name": entry.container, "image": f"devkit-process/{entry.container}"}
                ],
            },
        }
        with self._client() as client:
            core: Any = kubernetes.client.CoreV1Api(client)
            try:
                created = core.create_namespaced_pod(namespace, body, _preload_content=False)
            except kubernetes.client.exceptions.ApiException as err:
                if err.status != 409:
                    raise
                # An earlier process of the same name (a restarted controller): its Pod goes.
                core.delete_namespaced_pod(name, namespace, _preload_content=False)
                created = core.create_namespaced_pod(namespace, body, _preload_content=False)
            pod = _json(created)
            entry.uid = pod["metadata"]["uid"]
            pod["status"] = _status(entry, {"running": {"startedAt": entry.started}}, ready=True)
            core.replace_namespaced_pod_status(name, namespace, pod, _preload_content=False)

    def _write_exit(self, namespace: str, name: str, entry: _Registered) -> None:
        code = entry.process.wait(timeout=10.0)
        code = 128 - code if code < 0 else code  # killed by signal N: 128 + N, as a runtime says
        terminated = {
            "exitCode": code,
            "reason": "Completed" if code == 0 else "Error",
            "startedAt": entry.started,
            "finishedAt": _now(),
        }
        with self._client() as client:
            core: Any = kubernetes.client.CoreV1Api(client)
            pod = _json(core.read_namespaced_pod(name, namespace, _preload_content=False))
            if pod["metadata"]["uid"] != entry.uid:
                return  # another process's Pod by now
            pod["status"] = _status(entry, {"terminated": terminated}, ready=False)
            pod["status"]["phase"] = "Succeeded" if code == 0 else "Failed"
            core.replace_namespaced_pod_status(name, namespace, pod, _preload_content=False)

    def _write_forever(self) -> None:
        while (write := self._writes.get()) is not None:
            try:
                write()
            except _API_ERRORS as err:  # the API server may be gone already (it stops last)
                log.debug("process pod status not written", extra={"fields": {"error": str(err)}})
            except Exception:  # a status write is best effort: never lose the others for it
                log.exception("process pod status write failed")

    def _call(self, coroutine: Any) -> Any:
        future: Future[Any] = asyncio.run_coroutine_threadsafe(coroutine, self._loop)
        return future.result(10.0)


async def _new_buffer() -> LogBuffer:
    return LogBuffer()


def _json(response: Any) -> Obj:
    return dict(json.loads(response.data))


def _condition(kind: str, status: bool, reason: str = "", message: str = "") -> Obj:
    condition = {"type": kind, "status": str(status), "lastTransitionTime": _now()}
    return {**condition, **({"reason": reason, "message": message} if reason else {})}


def _status(entry: _Registered, state: Obj, *, ready: bool) -> Obj:
    pid = entry.process.pid
    return {
        "phase": "Running",
        "conditions": [
            _condition("Initialized", True),
            _condition("Ready", ready),
            _condition("ContainersReady", ready),
            _condition("PodScheduled", True),
        ],
        "hostIP": "127.0.0.1",
        "hostIPs": [{"ip": "127.0.0.1"}],
        "podIP": "127.0.0.1",
        "podIPs": [{"ip": "127.0.0.1"}],
        "startTime": entry.started,
        "containerStatuses": [
            {
                "name": entry.container,
                "image": f"devkit-process/{entry.container}",
                "imageID": "",
                "containerID": f"devkit://{pid}",
                "ready": ready,
                "started": ready,
                "restartCount": 0,
                "state": state,
            }
        ],
        "qosClass": "BestEffort",
    }
