"""Process plumbing every Coxswain service shares, so that one contract holds across them.

- `logs`: one JSON object per line on stderr, and the parser the devkit reads them back with;
- `tasks`: named, guarded background tasks (`spawn`), whose crash or unexpected end is logged;
- `readiness`: what a service still waits for, and the warnings an operator must see;
- `admin`: the aiohttp admin server (`/healthz`, `/readyz`, `/metrics`, `/api/v1/health`),
  its command-line flags and the `coxswain_build_info` gauge;
- `signals`: running until SIGTERM or SIGINT.

Services import the modules (`from coxswain_service import tasks`), not names from them.
"""

from coxswain_service._version import __version__

__all__ = ["__version__"]
