"""The local demo: every Coxswain service as its own process on this machine, no cluster needed.

`./pants run :demo` lands here. Each service runs from the same interpreter as the demo (the
demo's PEX carries every service), on unprivileged loopback ports shifted by `--port-offset`.
Ctrl-C (or SIGTERM) stops every process cleanly.

Not wired yet, and said so at start-up: the Kubernetes API emulator and its seeded objects,
the echo backends, SVID bootstrap and the discovery stream (the devkit, discovery and demo
issues). Until then the services start idle and report *why* they are not ready on /readyz.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from collections.abc import Sequence
from dataclasses import dataclass

from coxswain_devkit.processes import ProcessError, ServiceProcess

NOT_YET_WIRED = (
    "the Kubernetes API emulator and the demo's Gateways, routes and Ingress",
    "the echo backends",
    "SVID bootstrap and the discovery stream between controller and proxy",
)


@dataclass(frozen=True)
class DemoService:
    name: str  # the service's role, as in coxswain-<name>
    base_port: int  # its admin (or UI) port before --port-offset
    args: tuple[str, ...]  # `serve` flags besides the port
    port_flag: str  # the flag that sets the port above
    address_flag: str  # the flag that sets the listen address


def _services(offset: int) -> list[DemoService]:
    controller_url = f"http://127.0.0.1:{19090 + offset}"
    return [
        DemoService("controller", 19090, (), "--admin-port", "--admin-address"),
        DemoService("identity", 19091, (), "--admin-port", "--admin-address"),
        DemoService("proxy", 19092, ("--shared",), "--admin-port", "--admin-address"),
        DemoService("ui", 18080, ("--controller-url", controller_url), "--port", "--address"),
    ]


def _argv(service: DemoService, offset: int) -> list[str]:
    return [
        sys.executable,
        "-m",
        f"coxswain_{service.name}",
        "serve",
        *service.args,
        service.address_flag,
        "127.0.0.1",
        service.port_flag,
        str(service.base_port + offset),
    ]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="coxswain-demo", description=__doc__)
    parser.add_argument(
        "--port-offset", type=int, default=0, help="add this to every port (to avoid clashes)"
    )
    return parser


def run(offset: int) -> int:
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    started: list[tuple[DemoService, ServiceProcess]] = []
    try:
        for service in _services(offset):
            proc = ServiceProcess(_argv(service, offset)).start()
            started.append((service, proc))
            proc.wait_for(lambda line: str(line.get("msg", "")).endswith("listening"))
        _print_started(started, offset)
        stop.wait()
    except ProcessError as err:
        print(f"demo: a service failed to start: {err}", file=sys.stderr)
        return 1
    finally:
        _stop_all(started)
    return 0


def _print_started(started: list[tuple[DemoService, ServiceProcess]], offset: int) -> None:
    print("\nCoxswain demo running. Each service's health, readiness and metrics:")
    for service, proc in started:
        base = f"http://127.0.0.1:{service.base_port + offset}"
        print(f"  {service.name:<10} pid {proc.pid:<7} curl {base}/readyz   curl {base}/metrics")
    print("\nNot wired yet (the services report it on /readyz):")
    for missing in NOT_YET_WIRED:
        print(f"  - {missing}")
    print("\nPress Ctrl-C to stop every process.\n", flush=True)


def _stop_all(started: list[tuple[DemoService, ServiceProcess]]) -> None:
    for service, proc in reversed(started):
        try:
            status = proc.stop()
        except ProcessError as err:
            print(f"demo: {service.name}: {err}", file=sys.stderr)
            continue
        print(f"demo: {service.name} stopped (exit status {status})")


def main(argv: Sequence[str] | None = None) -> None:
    args = _parser().parse_args(argv)
    sys.exit(run(args.port_offset))
