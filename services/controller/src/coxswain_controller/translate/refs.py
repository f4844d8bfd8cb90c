"""Which Kubernetes object a verdict, an Event or a provisioned object is about.

A module of its own because both the results (`result`) and the objects to provision
(`provision.model`) name objects this way, and the results hold the objects to provision.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["ObjectRef"]


@dataclass(frozen=True, slots=True, order=True)
class ObjectRef:
    kind: str
    namespace: str  # "" for cluster-scoped kinds
    name: str

    def __str__(self) -> str:
        where = f"{self.namespace}/" if self.namespace else ""
        return f"{self.kind} {where}{self.name}"
