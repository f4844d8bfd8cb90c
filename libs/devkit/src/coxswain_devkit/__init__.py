"""Development kit: a Kubernetes API emulator and an echo backend.

For tests, benchmarks and the local demo only; never shipped in an image.
"""

from coxswain_devkit._version import __version__

__all__ = ["__version__"]
