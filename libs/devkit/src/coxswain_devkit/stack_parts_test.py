"""The stack's pure parts: where a LoadBalancer Service is reached, and the node agent's launcher.

Covers `stack_objects.lb_reach` (the load balancer's address, and its port offset for a port
below 1024 it could not bind) and `Launcher.node_runs` (the node agent starts pods exactly as the
stack starts its own processes, whatever spaces the paths hold). The processes themselves are
tests/e2e's.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from coxswain_devkit import cli
from coxswain_devkit.loadbalancer import PORT_OFFSET_ANNOTATION
from coxswain_devkit.stack import Launcher
from coxswain_devkit.stack_objects import lb_reach


def _service(*, ip: str | None, offset: str | None = None) -> dict[str, Any]:
    annotations = {PORT_OFFSET_ANNOTATION: offset} if offset else {}
    ingress = [{"ip": ip, "ipMode": "VIP"}] if ip else []
    return {
        "metadata": {"name": "gw-coxswain", "annotations": annotations},
        "spec": {"type": "LoadBalancer", "ports": [{"port": 80}, {"port": 8080}]},
        "status": {"loadBalancer": {"ingress": ingress}},
    }


@pytest.mark.parametrize(
    ("service", "port", "reached"),
    [
        pytest.param(_service(ip=None), 80, None, id="no-address-yet"),
        pytest.param(_service(ip="127.0.200.7"), 80, ("127.0.200.7", 80), id="bound-as-declared"),
        pytest.param(
            _service(ip="127.0.200.7", offset="10000"),
            80,
            ("127.0.200.7", 10080),
            id="low-port-offset",
        ),
        pytest.param(
            _service(ip="127.0.200.7", offset="10000"),
            8080,
            ("127.0.200.7", 8080),
            id="offset-only-below-1024",
        ),
        pytest.param(_service(ip="127.0.200.7"), 443, None, id="port-not-on-the-service"),
    ],
)
def test_where_a_load_balancer_service_port_is_reached(
    service: dict[str, Any], port: int, reached: tuple[str, int] | None
) -> None:
    assert lb_reach(service, port) == reached


def test_the_node_agent_launches_pods_as_the_stack_launches_its_processes(tmp_path: Path) -> None:
    launcher = Launcher.pex_files(tmp_path / "with space")
    runs = [flag.removeprefix("--run=") for flag in launcher.node_runs()]
    parsed = cli._launcher(runs)
    for role, prefix in launcher.prefixes.items():
        assert tuple(parsed[role]) == tuple(prefix)
        assert Path(prefix[-1]).is_absolute()  # pods may start elsewhere than the stack
