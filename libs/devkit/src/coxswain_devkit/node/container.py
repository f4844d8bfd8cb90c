"""One container of a running pod: its process, restarts with back-off, readiness, and output.

The kubelet's part for one container, with `restartPolicy: Always` (the only policy a
Deployment's pods have): before each start the launch is prepared afresh (environment, flags),
so a ConfigMap that appears later lets a waiting container start; a process that exits is
started again after a back-off that doubles from `backoff_base` up to `backoff_cap` and resets
once an instance has run for a while, with `CrashLoopBackOff` shown meanwhile and the exit in
`lastState`. While the process runs, its readiness probe is polled every `probe_interval`.

The process gets its own session (so a signal meant for the agent does not reach it twice) and
dies with the agent. Stopping it is the kubelet's: SIGTERM to the process, then SIGKILL to its
whole session after the grace period, and SIGKILL to anything it left behind in that session,
as tearing down a container's cgroup would.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import logging
import os
import signal
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import aiohttp

from coxswain_devkit.apiserver.meta import timestamp
from coxswain_devkit.node.env import CannotRun
from coxswain_devkit.node.launch import Launch, Probe
from coxswain_devkit.node.logs import LogBuffer
from coxswain_service import tasks

__all__ = ["Container", "Settings"]

log = logging.getLogger("coxswain_devkit.node")

Obj = dict[str, Any]
LINE_LIMIT = 1024 * 1024  # a longer output line is cut
PROBE_TIMEOUT = aiohttp.ClientTimeout(total=1.0)

# prctl(PR_SET_PDEATHSIG) resolved here, in the parent: between fork and exec the child may only
# make async-signal-safe calls, and loading libc there (dlopen) can deadlock on a loader lock
# another thread of the agent held at the fork, leaving the child hung before it ever ran.
_PR_SET_PDEATHSIG = 1
_PRCTL = ctypes.CDLL(None, use_errno=True).prctl if sys.platform.startswith("linux") else None


def _die_with_agent() -> None:
    """In the child, before exec: SIGTERM when the agent's thread that started it ends."""
    if _PRCTL is not None:
        _PRCTL(_PR_SET_PDEATHSIG, signal.SIGTERM)


@dataclass(frozen=True, slots=True)
class Settings:
    probe_interval: float = 0.5  # seconds between readiness probes
    backoff_base: float = 1.0  # the first restart's delay; it doubles per consecutive crash
    backoff_cap: float = 30.0  # the longest delay; an instance that ran 2x this resets it
    stop_grace: float = 10.0  # SIGTERM to SIGKILL, at most (terminationGracePeriodSeconds caps)


def _now() -> str:
    return timestamp(time.time)


async def _probe_once(session: aiohttp.ClientSession, probe: Probe) -> bool:
    try:
        if probe.kind == "tcp":
            # asyncio.timeout, not wait_for: 3.11's wait_for can swallow the probe's cancellation.
            async with asyncio.timeout(PROBE_TIMEOUT.total):
                _, writer = await asyncio.open_connection(probe.host, probe.port)
            writer.close()
            return True
        url = f"{probe.scheme.lower()}://{probe.host}:{probe.port}{probe.path}"
        async with session.get(url, ssl=False) as response:
            return 200 <= response.status < 400
    except (OSError, aiohttp.ClientError, TimeoutError):
        return False


class Container:
    def __init__(
        self,
        spec: Obj,
        *,
        prepare: Callable[[], Awaitable[Launch]],
        settings: Settings,
        on_change: Callable[[], None],
    ) -> None:
        self.name = str(spec.get("name", ""))
        self.image = str(spec.get("image", ""))
        self._prepare = prepare
        self._settings = settings
        self._on_change = on_change
        self.restart_count = 0
        self.ready = False
        self.state: Obj = {"waiting": {"reason": "ContainerCreating"}}
        self.last_state: Obj = {}
        self.logs = LogBuffer()
        self.previous: LogBuffer | None = None
        self._process: asyncio.subprocess.Process | None = None
        self._instances = 0
        self._stopping = False
        self._task: asyncio.Task[None] | None = None

    @property
    def instances(self) -> int:
        """How many times its process has been started."""
        return self._instances

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    def start(self) -> None:
        self._task = tasks.spawn(self._supervise(), name=f"container {self.name}", may_end=True)

    async def stop(self, grace: float) -> None:
        self._stopping = True
        process = self._process
        if process is not None and process.returncode is None:
            process.send_signal(signal.SIGTERM)
            try:
                async with asyncio.timeout(min(grace, self._settings.stop_grace)):
                    await process.wait()
            except TimeoutError:
                log.warning("container ignored SIGTERM", extra={"fields": {"pid": process.pid}})
        if process is not None:
            _kill_session(process.pid)
            await process.wait()
        if self._task is not None:
            await tasks.cancel(self._task)
        self.logs.close()

    def status(self) -> Obj:
        status: Obj = {
            "name": self.name,
            "image": self.image,
            "imageID": "",
            "ready": self.ready,
            "started": "running" in self.state,
            "restartCount": self.restart_count,
            "state": self.state,
            "lastState": self.last_state,
        }
        if self._process is not None:
            status["containerID"] = f"devkit://{self._process.pid}"
        return status

    def _changed(self, **fields: Any) -> None:
        for name, value in fields.items():
            setattr(self, name, value)
        self._on_change()

    async def _supervise(self) -> None:
        crashes = 0
        while not self._stopping:
            began = time.monotonic()
            try:
                await self._run_once()
            except CannotRun as err:
                self._changed(state={"waiting": {"reason": err.reason, "message": err.message}})
            if self._stopping:
                return
            if time.monotonic() - began > 2 * self._settings.backoff_cap:
                crashes = 0
            delay = min(self._settings.backoff_base * 2**crashes, self._settings.backoff_cap)
            crashes += 1
            if "terminated" in self.state:
                message = f"back-off {delay:g}s restarting failed container={self.name}"
                self._changed(state={"waiting": {"reason": "CrashLoopBackOff", "message": message}})
            await asyncio.sleep(delay)

    async def _run_once(self) -> None:
        launch = await self._prepare()
        try:
            process = await asyncio.create_subprocess_exec(
                *launch.argv,
                env=dict(launch.env),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=_die_with_agent,
                limit=LINE_LIMIT,
            )
        except OSError as err:
            raise CannotRun("RunContainerError", f"{launch.argv[0]}: {err}") from err
        if self._instances:
            self.restart_count += 1
        self._instances += 1
        self._process = process
        started = _now()
        self._changed(state={"running": {"startedAt": started}})
        prober = tasks.spawn(self._probe(launch.probe), name=f"probe {self.name}", may_end=True)
        try:
            await self._read(process)
            code = await process.wait()
        finally:
            await tasks.cancel(prober)
        self._exited(code, started)

    def _exited(self, code: int, started: str) -> None:
        self.logs.close()
        self.previous, self.logs = self.logs, LogBuffer()
        reason = "Completed" if code == 0 else "Error"
        if code < 0:
            reason, code = "Error", 128 - code  # killed by a signal: 128+n, as a shell reports
        terminated = {
            "exitCode": code,
            "reason": reason,
            "startedAt": started,
            "finishedAt": _now(),
        }
        log.info(
            "container exited",
            extra={
                "fields": {"container": self.name, "exit_code": code, "stopping": self._stopping}
            },
        )
        self._changed(
            ready=False, state={"terminated": terminated}, last_state={"terminated": terminated}
        )

    async def _read(self, process: asyncio.subprocess.Process) -> None:
        assert process.stdout is not None
        while True:
            try:
                line = await process.stdout.readline()
            except ValueError:
                line = b"[devkit node: a line longer than 1 MiB was cut]\n"
            if not line:
                return
            self.logs.append(line)

    async def _probe(self, probe: Probe | None) -> None:
        if probe is None:
            self._changed(ready=True)
            return
        async with aiohttp.ClientSession(timeout=PROBE_TIMEOUT) as session:
            while True:
                ready = await _probe_once(session, probe)
                if ready != self.ready:
                    self._changed(ready=ready)
                await asyncio.sleep(self._settings.probe_interval)


def _kill_session(pid: int) -> None:
    """SIGKILL every process left in the container's session (its process group)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)
