"""coxswain-identity: the certificate authority that issues proxies their SPIFFE SVIDs."""

from coxswain_identity._version import __version__

__all__ = ["__version__"]
