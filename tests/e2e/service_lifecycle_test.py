"""Every service, started from its shipped PEX file, serves its admin endpoints and stops cleanly.

Covers: `--version`, `/healthz` (200), `/readyz` (503 naming what is awaited, since nothing is
configured yet), `/metrics` (process metrics and `coxswain_build_info`), exit status 0 on SIGTERM
within 5 s; a proxy whose forked worker is killed stops with status 1 (to be restarted whole).
Leaves out each service's real work, which its own issues' tests cover.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from coxswain_devkit.processes import ServiceProcess

# Each service: the arguments that start it on loopback with an OS-chosen port, and the log line
# that announces that port.
SERVICES = {
    "controller": (
        ["serve", "--admin-address", "127.0.0.1", "--admin-port", "0"],
        "admin server listening",
    ),
    "identity": (
        ["serve", "--admin-address", "127.0.0.1", "--admin-port", "0"],
        "admin server listening",
    ),
    "proxy": (
        ["serve", "--shared", "--admin-address", "127.0.0.1", "--admin-port", "0"],
        "admin server listening",
    ),
    "ui": (
        [
            "serve",
            "--address",
            "127.0.0.1",
            "--port",
            "0",
            "--admin-address",
            "127.0.0.1",
            "--admin-port",
            "0",
            "--controller-url",
            "http://127.0.0.1:9",
        ],
        "admin server listening",
    ),
}


def _pex(service: str) -> Path:
    path = Path(f"coxswain-{service}.pex")
    assert path.is_file(), f"{path} was not packaged into the test sandbox"
    return path


def _get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode()


@pytest.mark.parametrize("service", sorted(SERVICES))
def test_version_prints_the_package_version(service: str) -> None:
    out = subprocess.run(
        [sys.executable, str(_pex(service)), "--version"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout.strip() == f"coxswain-{service} 0.1.0"


@pytest.mark.parametrize("service", sorted(SERVICES))
def test_serve_answers_admin_endpoints_and_stops_on_sigterm(service: str) -> None:
    args, listening = SERVICES[service]
    with ServiceProcess([sys.executable, str(_pex(service)), *args]) as proc:
        port = proc.wait_for_msg(listening)["port"]
        base = f"http://127.0.0.1:{port}"

        assert _get(f"{base}/healthz") == (200, "ok\n")

        status, body = _get(f"{base}/readyz")
        assert status == 503
        assert body.startswith("not ready: ")
        assert len(body) > len("not ready: \n"), "the reason must be named"

        status, metrics = _get(f"{base}/metrics")
        assert status == 200
        assert f'coxswain_build_info{{service="{service}",version="0.1.0"}} 1.0' in metrics
        assert "process_resident_memory_bytes" in metrics

        assert proc.stop(grace=5.0) == 0
    assert proc.wait_for_msg("stopped")["service"] == service


def _children(pid: int) -> list[int]:
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        found += [int(c) for c in (task / "children").read_text().split()]
    return found


def test_a_proxy_whose_worker_dies_stops_with_an_error_to_be_restarted() -> None:
    args = [*SERVICES["proxy"][0], "--workers", "2", "--listen-address", "127.0.0.1"]
    with ServiceProcess([sys.executable, str(_pex("proxy")), *args]) as proc:
        proc.wait_for_msg("proxy started")
        workers = _children(proc.pid)
        assert len(workers) == 2, workers
        os.kill(workers[0], signal.SIGKILL)
        died = proc.wait_for_msg(
            "a worker process ended; stopping so that the proxy is restarted whole"
        )
        assert died["exit_code"] == -signal.SIGKILL
        assert proc.wait() == 1  # the live worker drained, then the failure in the exit status
