"""The podTemplate strategic merge: golden cases, and that a merge never changes its inputs.

Each case under provision/testdata/ is a rendered pod template (`original.yaml`), the patches
applied to it in order (`patches.yaml`: one document per parameters layer) and the result
(`expected.yaml`), named for the merge rule it shows (spec 001: containers, env, volumes by
name, tolerations by (key, operator); kubectl's keys and directives). Regenerate with
`coxswain-controller translate --update-goldens .../translate/provision/testdata`. What a
patch may not do (remove the proxy container) is parameters_test's.
"""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

from coxswain_controller.translate.goldens import STRATEGIC_TESTDATA, run_strategic_case
from coxswain_controller.translate.provision import strategic

CASES = sorted(p for p in STRATEGIC_TESTDATA.iterdir() if (p / "original.yaml").exists())


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_golden(case: Path) -> None:
    assert run_strategic_case(case) == (case / "expected.yaml").read_text()


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_a_merge_leaves_its_inputs_as_they_were(case: Path) -> None:
    original = yaml.safe_load((case / "original.yaml").read_text())
    patches = list(yaml.safe_load_all((case / "patches.yaml").read_text()))
    before = copy.deepcopy((original, patches))
    for patch in patches:
        strategic.merge(original, patch)
    assert (original, patches) == before


def test_a_patch_of_the_wrong_shape_replaces_rather_than_fails() -> None:
    merged = strategic.merge({"spec": {"containers": [{"name": "proxy"}]}}, {"spec": 5})
    assert merged == {"spec": 5}
    assert strategic.merge({"spec": {"tolerations": "x"}}, {"spec": {"tolerations": [{}]}}) == {
        "spec": {"tolerations": [{}]}
    }
