"""The version of the coxswain-ui distribution: the single place it is written."""

__version__ = "0.1.0"
