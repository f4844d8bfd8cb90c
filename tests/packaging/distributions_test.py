"""Every package builds a wheel whose version is the one its code reports, with its console script.

Covers: one source of truth for each version (`_version.py` → wheel metadata), the services'
`coxswain-<role>` console scripts, and the dependency edges between our own distributions (a
service requires coxswain-proto/-routing/-service only through what it imports, never another
service).
Leaves out running the scripts, which tests/e2e does from the PEX files.
"""

from __future__ import annotations

import email.parser
import re
import zipfile
from pathlib import Path

import pytest

import coxswain_controller
import coxswain_devkit
import coxswain_identity
import coxswain_proto
import coxswain_proxy
import coxswain_routing
import coxswain_service
import coxswain_ui

PACKAGES = {
    "coxswain-proto": coxswain_proto.__version__,
    "coxswain-routing": coxswain_routing.__version__,
    "coxswain-service": coxswain_service.__version__,
    "coxswain-devkit": coxswain_devkit.__version__,
    "coxswain-controller": coxswain_controller.__version__,
    "coxswain-identity": coxswain_identity.__version__,
    "coxswain-proxy": coxswain_proxy.__version__,
    "coxswain-ui": coxswain_ui.__version__,
}
SERVICES = ["controller", "identity", "proxy", "ui"]
_NAME = re.compile(r"[A-Za-z0-9_.-]+")


def _name(requirement: str) -> str:
    match = _NAME.match(requirement)
    assert match, requirement
    return match.group(0)


def _wheel(dist: str) -> zipfile.ZipFile:
    wheels = list(Path().glob(f"{dist.replace('-', '_')}-*.whl"))
    assert len(wheels) == 1, f"expected one wheel for {dist}, found {wheels}"
    return zipfile.ZipFile(wheels[0])


def _read(wheel: zipfile.ZipFile, suffix: str) -> str:
    (name,) = [n for n in wheel.namelist() if n.endswith(f".dist-info/{suffix}")]
    return wheel.read(name).decode()


@pytest.mark.parametrize("dist", sorted(PACKAGES))
def test_wheel_version_is_the_code_version(dist: str) -> None:
    with _wheel(dist) as wheel:
        metadata = email.parser.Parser().parsestr(_read(wheel, "METADATA"))
    assert metadata["Name"] == dist
    assert metadata["Version"] == PACKAGES[dist]


@pytest.mark.parametrize("service", SERVICES)
def test_service_wheel_has_its_console_script(service: str) -> None:
    with _wheel(f"coxswain-{service}") as wheel:
        entry_points = _read(wheel, "entry_points.txt")
    assert f"coxswain-{service} = coxswain_{service}.cli:main" in entry_points


@pytest.mark.parametrize("service", SERVICES)
def test_service_wheel_requires_no_other_service_nor_the_devkit(service: str) -> None:
    with _wheel(f"coxswain-{service}") as wheel:
        metadata = email.parser.Parser().parsestr(_read(wheel, "METADATA"))
    required = {_name(r) for r in metadata.get_all("Requires-Dist", [])}
    forbidden = {f"coxswain-{other}" for other in SERVICES if other != service} | {
        "coxswain-devkit"
    }
    assert not required & forbidden
