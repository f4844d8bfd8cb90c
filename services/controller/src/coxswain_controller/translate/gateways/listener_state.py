"""One listener of a Gateway or of a ListenerSet merged onto it, as validation leaves it.

Its own module so that both the Gateway stage (`gateway_states`) and the ListenerSet reader
(`listenersets`) can hold listeners without importing each other.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from coxswain_controller.translate.gateways.certificates import Certificate
from coxswain_controller.translate.result import Condition
from coxswain_routing import ListenerProtocol, TlsMode

__all__ = ["ListenerState"]


@dataclass(slots=True, eq=False)
class ListenerState:
    name: str
    port: int
    protocol: str
    hostname: str
    tls_mode: TlsMode
    allowed_routes: Mapping[str, Any]
    supported_kinds: tuple[str, ...]
    served: bool = True
    problems: list[Condition] = field(default_factory=list)  # conditions other than the defaults
    certificates: list[Certificate] = field(default_factory=list)
    bind_port: int = 0
    # Its port in the shared range, also while the Gateway is dedicated (bind_ports.py).
    shared_bind_port: int = 0
    attached: int = 0
    # The ListenerSet (namespace, name) it comes from; None: the Gateway's own.
    listener_set: tuple[str, str] | None = None
    # The namespace allowedRoutes' "Same" means: its Gateway's, or its ListenerSet's.
    owner_namespace: str = ""

    @property
    def model_protocol(self) -> ListenerProtocol:
        return ListenerProtocol(self.protocol)

    @property
    def wire_name(self) -> str:
        """Its name in the snapshot: a ListenerSet's listener as `<namespace>/<set>/<name>`
        (GEP-1713: names "MUST" be allowed to repeat across a Gateway and its ListenerSets; a
        Gateway listener's name holds no slash)."""
        if self.listener_set is None:
            return self.name
        return f"{self.listener_set[0]}/{self.listener_set[1]}/{self.name}"
