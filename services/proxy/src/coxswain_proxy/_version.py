"""The version of the coxswain-proxy distribution: the single place it is written."""

__version__ = "0.1.0"
