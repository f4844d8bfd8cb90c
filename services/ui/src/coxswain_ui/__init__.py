"""coxswain-ui: the operator UI. It reads the controller's /api/v1 and holds no credentials."""

from coxswain_ui._version import __version__

__all__ = ["__version__"]
