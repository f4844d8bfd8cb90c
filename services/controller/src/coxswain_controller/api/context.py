"""What the API handlers read: the running controller's parts, and small JSON helpers.

The handlers take the `Runtime` itself rather than copies, and read it at request time: the
admin server starts before the runtime has made its publisher, client and discovery listener,
and each answer must say what is true now.
"""

from __future__ import annotations

import datetime
import json
from typing import TYPE_CHECKING, Any, Protocol

from aiohttp import web

if TYPE_CHECKING:
    from coxswain_controller.discovery.nodes import NodeRegistry
    from coxswain_controller.discovery.registry import SnapshotRegistry
    from coxswain_controller.leader.leadership import Leadership
    from coxswain_controller.publish import Publisher
    from coxswain_controller.sources.supervisor import Sources
    from coxswain_controller.translate.inputs import Options

__all__ = ["Parts", "error", "rfc3339", "send"]


class Parts(Protocol):
    """The parts of `runtime.Runtime` the API reads."""

    leadership: Leadership
    registry: SnapshotRegistry
    nodes: NodeRegistry
    publisher: Publisher | None
    discovery_port: int | None

    @property
    def client(self) -> Any: ...

    @property
    def sources(self) -> Sources | None: ...

    @property
    def options(self) -> Options: ...


def rfc3339(at: float | None) -> str | None:
    if at is None:
        return None
    moment = datetime.datetime.fromtimestamp(at, tz=datetime.UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def send(document: Any, status: int = 200) -> web.Response:
    return web.json_response(document, status=status, dumps=_dumps)


def error(status: int, reason: str, message: str) -> web.Response:
    """The one error shape: `{"error": {"status", "reason", "message"}}`."""
    return send({"error": {"status": status, "reason": reason, "message": message}}, status)


def _dumps(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), sort_keys=False)
