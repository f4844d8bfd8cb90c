"""The routing model, its wire form and the request matcher.

The one place that decides what a route means.
"""

from coxswain_routing._version import __version__

__all__ = ["__version__"]
