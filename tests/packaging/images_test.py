"""Each service's Dockerfile (deploy/images/<service>/Dockerfile) against its PEX and the chart.

Covers: every image is built in two stages from its service's PEX file, on a base pinned to an
exact CPython 3.11 release (the interpreter the PEX is built for), and runs as the non-root
user the chart runs it as; its ENTRYPOINT runs the virtualenv the PEX builds, whose entry point
(PEX-INFO) is the service's console script (the wheel's `coxswain-<service>`); the chart runs
each image with `args` only (so the ENTRYPOINT stays), starting with the `serve` subcommand and
accepted by the service's own parser, and names an image the devkit node agent maps to that
console script with nothing before the args.
Leaves out building the images (no container engine here); the steps themselves were checked by
hand on a venv-mode PEX (its first run creates the virtualenv the last stage carries).
"""

from __future__ import annotations

import json
import re
import zipfile
from pathlib import Path

import pytest

from coxswain_controller import cli as controller_cli
from coxswain_devkit.node import images
from coxswain_identity import cli as identity_cli
from coxswain_proxy import cli as proxy_cli
from coxswain_ui import cli as ui_cli
from helm import chart

SERVICES = ["controller", "identity", "proxy", "ui"]
IMAGES = Path(__file__).resolve().parents[2] / "deploy" / "images"
PINNED = re.compile(r"^python:3\.11\.\d+-slim-[a-z]+(@sha256:[0-9a-f]{64})?$")
VENV = "/opt/coxswain/venv"
PARSERS = {
    "controller": controller_cli._parser,
    "identity": identity_cli._parser,
    "proxy": proxy_cli._parser,
    "ui": ui_cli._parser,
}


def _instructions(service: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) in order, continuation lines joined, comments dropped."""
    text = (IMAGES / service / "Dockerfile").read_text()
    joined = re.sub(r"\\\n", " ", text)
    found = []
    for line in joined.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            word, _, rest = line.partition(" ")
            found.append((word.upper(), rest.strip()))
    return found


def _stages(service: str) -> list[list[tuple[str, str]]]:
    stages: list[list[tuple[str, str]]] = []
    for instruction in _instructions(service):
        if instruction[0] == "FROM":
            stages.append([])
        if stages:
            stages[-1].append(instruction)
    return stages


@pytest.mark.parametrize("service", SERVICES)
def test_each_image_is_built_from_its_pex_on_a_pinned_base(service: str) -> None:
    (arg,) = [rest for word, rest in _instructions(service) if word == "ARG"]
    name, _, base = arg.partition("=")
    assert name == "PYTHON_IMAGE"
    assert PINNED.match(base), f"{base} is not an exact CPython 3.11 release"
    build, final = _stages(service)
    assert build[0] == ("FROM", "${PYTHON_IMAGE} AS build")
    assert final[0] == ("FROM", "${PYTHON_IMAGE}")  # the venv links to this very interpreter
    pex = f"coxswain-{service}.pex"
    assert ("COPY", f"{pex} /tmp/{pex}") in build
    (run,) = [rest for word, rest in build if word == "RUN"]
    assert f"PEX_ROOT=/opt/coxswain/pex python3 /tmp/{pex} --version" in run
    assert f'/opt/coxswain/pex/venvs/s/*/venv)" {VENV}' in run
    assert ("COPY", "--from=build /opt/coxswain /opt/coxswain") in final
    assert not any(word == "COPY" and pex in rest for word, rest in final)  # the venv only


@pytest.mark.parametrize("service", SERVICES)
def test_each_image_runs_as_the_non_root_user_the_chart_gives_it(service: str) -> None:
    (user,) = [rest for word, rest in _stages(service)[-1] if word == "USER"]
    uid, gid = (int(part) for part in user.split(":"))
    assert uid != 0 and gid != 0
    values = chart.render(chart.CASES["defaults"])
    for _, pod in values.pods():
        assert (pod["securityContext"]["runAsUser"], pod["securityContext"]["runAsGroup"]) == (
            uid,
            gid,
        )


@pytest.mark.parametrize("service", SERVICES)
def test_the_entry_point_runs_the_virtualenv_of_the_pex(service: str) -> None:
    final = _stages(service)[-1]
    (entrypoint,) = [json.loads(rest) for word, rest in final if word == "ENTRYPOINT"]
    # The virtualenv's `pex` script runs PEX-INFO's entry point with the venv's interpreter.
    assert entrypoint == [f"{VENV}/bin/python", f"{VENV}/pex"]
    (cmd,) = [json.loads(rest) for word, rest in final if word == "CMD"]
    assert cmd == ["--help"]  # without args from the chart: the usage, not a half-set service


def _wheel_script(service: str) -> str:
    (wheel,) = Path().glob(f"coxswain_{service}-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        (name,) = [n for n in archive.namelist() if n.endswith(".dist-info/entry_points.txt")]
        text = archive.read(name).decode()
    (line,) = [ln for ln in text.splitlines() if ln.startswith(f"coxswain-{service} =")]
    return line.split("=", 1)[1].strip()


@pytest.mark.parametrize("service", SERVICES)
def test_the_pex_entry_point_is_the_console_script(service: str) -> None:
    pex = Path(f"coxswain-{service}.pex")
    assert pex.is_file(), f"{pex} was not packaged into the test sandbox"
    with zipfile.ZipFile(pex) as archive:
        info = json.loads(archive.read("PEX-INFO"))
    assert info["venv"] is True  # what the Dockerfile's virtualenv step relies on
    assert info["entry_point"] == f"coxswain_{service}.cli:main" == _wheel_script(service)


@pytest.mark.parametrize("service", SERVICES)
def test_the_chart_runs_each_image_with_args_after_its_entry_point(service: str) -> None:
    rendered = chart.render(chart.CASES["defaults"])
    container = rendered.container(f"coxswain-{service}")
    assert "command" not in container  # Kubernetes keeps the image's ENTRYPOINT
    args = [str(a) for a in container["args"]]
    assert args[0] == "serve"
    assert PARSERS[service]().parse_args(args).command == "serve"
    # The devkit's node agent runs the image as this console script with the same args.
    role = images.role_for(container["image"])
    assert role is not None
    assert (role.script, role.entry_args) == (f"coxswain-{service}", ())
    assert images.repository(container["image"]).endswith(f"/coxswain-{service}")


def test_dedicated_proxies_run_the_proxy_image() -> None:
    rendered = chart.render(chart.CASES["defaults"])
    proxy_image = rendered.container("coxswain-proxy")["image"]
    assert rendered.flag("coxswain-controller", "--proxy-image") == proxy_image
