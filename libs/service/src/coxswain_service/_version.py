"""The version of coxswain-service: written here only (docs/development.md)."""

__version__ = "0.1.0"
