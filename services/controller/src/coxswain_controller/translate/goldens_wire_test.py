"""Every golden case's snapshots cross the wire unchanged: what translation compiles, a proxy
decodes (`from_wire` refuses unknown bodies, keys that do not match them and unsafe values).

Covers the model-to-wire step for every resource kind the cases produce, stream routes and UDP
endpoint sets included; what a resource means is the golden cases' and coxswain_routing's.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from coxswain_controller.translate import Inputs, translate
from coxswain_controller.translate.goldens import TESTDATA, case_options
from coxswain_routing import from_wire, to_wire

CASES = sorted(p for p in TESTDATA.iterdir() if (p / "input.yaml").exists())


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_every_compiled_resource_round_trips_through_the_wire(case: Path) -> None:
    with (case / "input.yaml").open() as handle:
        objects = [d for d in yaml.safe_load_all(handle) if isinstance(d, dict)]
    result = translate(Inputs.from_objects(objects), case_options(case))
    for resources in result.snapshots.values():
        for resource in resources:
            assert from_wire(to_wire(resource)) == resource
