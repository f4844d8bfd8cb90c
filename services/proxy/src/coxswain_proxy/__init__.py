"""coxswain-proxy: the read-only data plane that serves users' traffic from pushed snapshots."""

from coxswain_proxy._version import __version__

__all__ = ["__version__"]
