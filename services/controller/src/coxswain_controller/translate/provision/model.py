"""What translation concludes should exist for each Gateway: plain manifests, and what to keep.

Translation renders every object whole (apiVersion, kind, metadata with labels, annotations and
the owner reference to the Gateway, and the fields the controller owns); the provisioner
compares them with the live objects and writes only what differs (provisioner/). A Gateway whose
desired state cannot be worked out in this pass (it is not Accepted) is `hold`: what exists for
it stays as it is, so a bad edit never takes a Gateway's load balancer address away.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from coxswain_controller.translate.refs import ObjectRef

__all__ = ["GatewayProvision", "Mode", "ObjectKey", "Provisioned", "fingerprint"]


class Mode(StrEnum):
    SHARED = "shared"  # served by the shared proxies: a VIP Service and an inert ServiceAccount
    DEDICATED = "dedicated"  # its own proxies: Deployment, Service, ServiceAccount, trust bundle


@dataclass(frozen=True, slots=True, order=True)
class ObjectKey:
    kind: str  # Service, ServiceAccount, Deployment or ConfigMap
    namespace: str  # the Gateway's: owner references cannot cross namespaces
    name: str

    def __str__(self) -> str:
        return f"{self.kind} {self.namespace}/{self.name}"


def fingerprint(body: Mapping[str, Any]) -> str:
    """A hash of a manifest's content: equal manifests, equal fingerprints."""
    return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()[:32]


@dataclass(frozen=True, slots=True)
class Provisioned:
    key: ObjectKey
    body: Mapping[str, Any]  # the whole manifest, as it would be applied
    # Its fingerprint, taken once where it is rendered (in translation's worker thread), so the
    # provisioner's comparisons on the event loop need not serialise it.
    digest: str = field(init=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "digest", fingerprint(self.body))


@dataclass(frozen=True, slots=True)
class GatewayProvision:
    gateway: ObjectRef  # the owner
    uid: str  # the owner's uid, which the objects' owner references name
    mode: Mode
    objects: tuple[Provisioned, ...] = ()  # in the order they are applied
    # True: nothing can be worked out for the Gateway this pass; write and prune nothing of it.
    hold: bool = False
    # Objects of the Gateway neither written nor pruned this pass (their content is not known
    # yet, e.g. the trust bundle before the identity service published it).
    keep: frozenset[ObjectKey] = field(default_factory=frozenset)
