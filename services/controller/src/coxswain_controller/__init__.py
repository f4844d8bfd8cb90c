"""coxswain-controller: watches routing objects, compiles snapshots, serves them, writes status."""

from coxswain_controller._version import __version__

__all__ = ["__version__"]
