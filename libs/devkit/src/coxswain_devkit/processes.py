"""Coxswain services as real OS processes, for tests, benchmarks and the demo.

A service logs one JSON object per line on stderr; a `ServiceProcess` collects those lines so a
caller can wait for one ("admin server listening", with the port the OS chose) instead of
sleeping. `stop()` sends SIGTERM and reports the exit status, killing the process only if it
overstays its grace period, so a test can assert a clean shutdown and still never leak a process.
"""

from __future__ import annotations

import ctypes
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from types import TracebackType
from typing import IO, Any

from coxswain_service import logs

LogLine = dict[str, Any]


_PR_SET_PDEATHSIG = 1
# Resolved here, in the parent: loading a library between fork and exec can deadlock on the
# dynamic loader's lock if another thread of the parent held it at the fork.
_PRCTL = (
    ctypes.CDLL("libc.so.6", use_errno=True).prctl if sys.platform.startswith("linux") else None
)


def _die_with_parent() -> None:
    """In the child, before exec: SIGTERM when the launcher dies, even by SIGKILL.

    A service runs in its own session (so one Ctrl-C does not reach it twice), which also means
    a killed test runner would otherwise leave it running; the kernel's parent-death signal
    makes sure it goes too. Linux only; elsewhere a no-op.
    """
    if _PRCTL is not None:
        _PRCTL(_PR_SET_PDEATHSIG, signal.SIGTERM)


class ProcessError(Exception):
    """A service process did not do what was expected of it."""


class ServiceProcess:
    """One service process and the structured log lines it has written so far."""

    def __init__(self, argv: Sequence[str], *, env: Mapping[str, str] | None = None) -> None:
        self.argv = list(argv)
        self._env = dict(os.environ if env is None else env)
        self._lines: list[LogLine] = []
        self._changed = threading.Condition()
        self._proc: subprocess.Popen[bytes] | None = None
        self._reader: threading.Thread | None = None

    @property
    def pid(self) -> int:
        return self._running().pid

    @property
    def lines(self) -> list[LogLine]:
        with self._changed:
            return list(self._lines)

    def start(self) -> ServiceProcess:
        # Its own session: a Ctrl-C meant for the launcher (the demo, a test run) does not reach
        # the service too, so the launcher stops each one in order with a single SIGTERM.
        self._proc = subprocess.Popen(
            self.argv,
            env=self._env,
            stdin=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            start_new_session=True,
            preexec_fn=_die_with_parent,  # only an async-signal-safe prctl before exec
        )
        assert self._proc.stderr is not None
        self._reader = threading.Thread(
            target=self._read, args=(self._proc.stderr,), name=f"log-{self._proc.pid}", daemon=True
        )
        self._reader.start()
        return self

    def wait_for(self, predicate: Callable[[LogLine], bool], *, timeout: float = 60.0) -> LogLine:
        """Return the first log line matching `predicate`, waiting up to `timeout` seconds."""
        deadline = time.monotonic() + timeout
        seen = 0
        with self._changed:
            while True:
                for line in self._lines[seen:]:
                    if predicate(line):
                        return line
                seen = len(self._lines)
                if self._running().poll() is not None and not self._reader_alive():
                    raise ProcessError(
                        f"{self.argv[0]} exited {self._running().returncode}\n{self.log_text()}"
                    )
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise ProcessError(f"{self.argv[0]}: no matching log line\n{self.log_text()}")
                self._changed.wait(min(remaining, 0.5))

    def wait_for_msg(self, msg: str, *, timeout: float = 60.0) -> LogLine:
        return self.wait_for(lambda line: line.get("msg") == msg, timeout=timeout)

    def stop(self, *, grace: float = 5.0) -> int:
        """SIGTERM, then the exit status; a process still running after `grace` is killed."""
        proc = self._running()
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(grace)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
                raise ProcessError(
                    f"{self.argv[0]} ignored SIGTERM for {grace}s and was killed\n{self.log_text()}"
                ) from None
        if self._reader is not None:
            self._reader.join(grace)
        return proc.returncode

    def wait(self, timeout: float = 30.0) -> int:
        """The exit status of a process expected to end by itself, within `timeout`."""
        proc = self._running()
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            raise ProcessError(
                f"{self.argv[0]} did not exit within {timeout}s\n{self.log_text()}"
            ) from None
        if self._reader is not None:
            self._reader.join(timeout)
        return proc.returncode

    def kill(self) -> int:
        """SIGKILL, as a crash would: nothing gets to clean up (failover tests)."""
        proc = self._running()
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if self._reader is not None:
            self._reader.join()
        return proc.returncode

    def log_text(self) -> str:
        return "\n".join(json.dumps(line) for line in self.lines)

    def __enter__(self) -> ServiceProcess:
        return self if self._proc else self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        proc = self._proc
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait()
        if self._reader is not None:
            self._reader.join()

    def _running(self) -> subprocess.Popen[bytes]:
        if self._proc is None:
            raise ProcessError(f"{self.argv[0]} was never started")
        return self._proc

    def _reader_alive(self) -> bool:
        return self._reader is not None and self._reader.is_alive()

    def _read(self, stream: IO[bytes]) -> None:
        with stream:
            for raw in stream:
                self._append(raw)
        with self._changed:
            self._changed.notify_all()

    def _append(self, raw: bytes) -> None:
        line = logs.parse_line(raw.decode(errors="replace").rstrip("\n"))
        with self._changed:
            self._lines.append(line)
            self._changed.notify_all()
