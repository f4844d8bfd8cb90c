"""ReferenceGrants: which cross-namespace references a namespace permits.

Gateway API: a ReferenceGrant in the *target* namespace lists `from` (group, kind, namespace)
and `to` (group, kind, optional name); a reference is permitted when one grant matches both.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from coxswain_controller.translate.guard import guarded
from coxswain_controller.translate.inputs import Inputs, Obj, namespace, spec
from coxswain_controller.translate.result import Event

__all__ = ["Grants"]


class Grants:
    def __init__(self, inputs: Inputs) -> None:
        self._by_namespace: dict[str, list[Mapping[str, Any]]] = {}
        self.malformed: list[Event] = []  # grants that could not be read grant nothing
        for grant, read in guarded(
            "ReferenceGrant", inputs.all("ReferenceGrant"), _read, self.malformed
        ):
            self._by_namespace.setdefault(namespace(grant), []).append(read)

    def permits(
        self,
        *,
        from_group: str,
        from_kind: str,
        from_namespace: str,
        to_kind: str,
        to_namespace: str,
        to_name: str,
        to_group: str = "",
    ) -> bool:
        for grant in self._by_namespace.get(to_namespace, []):
            froms = grant.get("from") or []
            tos = grant.get("to") or []
            if any(
                (f.get("group") or "") == from_group
                and f.get("kind") == from_kind
                and f.get("namespace") == from_namespace
                for f in froms
            ) and any(
                (t.get("group") or "") == to_group
                and t.get("kind") == to_kind
                and (not t.get("name") or t.get("name") == to_name)
                for t in tos
            ):
                return True
        return False


def _read(grant: Obj) -> Mapping[str, Any]:
    """The grant's from and to entries, each read through, so `permits` never meets a bad one."""
    body = spec(grant)
    froms = [
        {"group": f.get("group") or "", "kind": f.get("kind"), "namespace": f.get("namespace")}
        for f in body.get("from") or []
    ]
    tos = [
        {"group": t.get("group") or "", "kind": t.get("kind"), "name": t.get("name")}
        for t in body.get("to") or []
    ]
    return {"from": froms, "to": tos}
