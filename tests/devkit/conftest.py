"""The node agent's fixtures (the emulator, a client, a fast agent), shared with its own tests."""

from coxswain_devkit.node.conftest import agent, api, kube

__all__ = ["agent", "api", "kube"]
