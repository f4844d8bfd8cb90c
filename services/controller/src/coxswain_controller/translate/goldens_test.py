"""Golden translation tests: every case under testdata/ translates to its expected.yaml.

Each case is named for the spec 003 paragraph (or Ingress rule) it checks. Regenerate with
`./pants run services/controller:pex -- translate --update-goldens
services/controller/src/coxswain_controller/translate/testdata` and review the diff.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from coxswain_controller.translate.goldens import TESTDATA, run_case

CASES = sorted(p for p in TESTDATA.iterdir() if (p / "input.yaml").exists())


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_golden(case: Path) -> None:
    expected = (case / "expected.yaml").read_text()
    assert run_case(case) == expected


def test_translation_is_deterministic() -> None:
    for case in CASES:
        assert run_case(case) == run_case(case)
