"""The discovery and identity wire messages: generated betterproto2 code, grpc.aio binding."""

from coxswain_proto._version import __version__

__all__ = ["__version__"]
