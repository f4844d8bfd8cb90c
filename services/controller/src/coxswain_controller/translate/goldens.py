"""Golden translation cases: `testdata/<case>/input.yaml` → `expected.yaml`; and the podTemplate
strategic-merge cases, `provision/testdata/<case>/original.yaml` + `patches.yaml` → `expected.yaml`.

One function runs a case for the golden test, for `--update-goldens`, and for
`coxswain-controller translate -f`: manifests in, rendered result out.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

import yaml

from coxswain_controller.translate.inputs import Inputs, Options
from coxswain_controller.translate.pipeline import translate
from coxswain_controller.translate.provision import strategic
from coxswain_controller.translate.render import render

__all__ = [
    "STRATEGIC_TESTDATA",
    "TESTDATA",
    "render_manifests",
    "run_case",
    "run_strategic_case",
    "update_goldens",
]

TESTDATA = Path(__file__).parent / "testdata"
STRATEGIC_TESTDATA = Path(__file__).parent / "provision" / "testdata"


def render_manifests(documents: Iterable[Any], options: Options | None = None) -> str:
    options = options or Options()
    objects = [d for d in documents if isinstance(d, dict)]
    result = translate(Inputs.from_objects(objects), options)
    return yaml.safe_dump(render(result, options.gateway_controller), sort_keys=True, width=120)


def case_options(case: Path) -> Options:
    """A case's translation options: `options.yaml` (Options fields) when present."""
    path = case / "options.yaml"
    if not path.exists():
        return Options()
    return Options(**(yaml.safe_load(path.read_text()) or {}))


def run_case(case: Path) -> str:
    with (case / "input.yaml").open() as handle:
        return render_manifests(yaml.safe_load_all(handle), case_options(case))


def run_strategic_case(case: Path) -> str:
    """A strategic-merge case: `original.yaml`, each document of `patches.yaml` merged onto it
    in order (a class's podTemplate, then a Gateway's), the result as YAML."""
    merged = yaml.safe_load((case / "original.yaml").read_text())
    with (case / "patches.yaml").open() as handle:
        for patch in yaml.safe_load_all(handle):
            merged = strategic.merge(merged, patch or {})
    return yaml.safe_dump(merged, sort_keys=True, width=100)


def update_goldens(root: Path) -> list[str]:
    """Rewrite every case's expected.yaml (translation cases and strategic-merge cases alike);
    delete expected files whose input is gone."""
    written = []
    for case in sorted(p for p in root.iterdir() if p.is_dir()):
        expected = case / "expected.yaml"
        if (case / "input.yaml").exists():
            expected.write_text(run_case(case))
        elif (case / "original.yaml").exists():
            expected.write_text(run_strategic_case(case))
        else:
            expected.unlink(missing_ok=True)
            continue
        written.append(case.name)
    return written
