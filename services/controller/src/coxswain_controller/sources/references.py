"""Which Secrets basic auth and the TLS annotations name: the only Secrets, besides
kubernetes.io/tls ones, the controller reads.

Where it sits: the supervisor's consumer hands this every cache event once applied (the cache's
`follow`); it answers whether the set of named Secrets changed, and the supervisor then starts
or stops one watch per Secret (`kinds.referenced_secret`). Two things name a Secret:

- an Ingress this controller serves, whose `auth-type: basic` and `auth-secret`,
  `auth-tls-secret` (client certificates' CA) or `proxy-ssl-secret` (a backend's CA and the
  certificate presented to it) are honoured, its own or its class's `defaultAnnotations`: the
  Secret of that name in its namespace;
- a CoxswainPolicy's `basicAuth.secretRef`, in the policy's namespace.

It reads each with translation's own code (the Ingress class rule of `ingresses.claimant`,
`annotations.policy.read`, `coxswain.basic_auth_secret`), so it names what translation will
look up. It is kept per object: an Ingress event re-reads that Ingress alone, and only a change
to an IngressClass or its parameters (which decide what every Ingress is) re-reads them all.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from coxswain_controller.sources import cache
from coxswain_controller.translate.guard import MALFORMED
from coxswain_controller.translate.ingress import ingress_params, ingresses
from coxswain_controller.translate.ingress.annotations import policy as ingress_annotations
from coxswain_controller.translate.ingress.annotations.catalog import PREFIX
from coxswain_controller.translate.inputs import Inputs, Obj, Options, meta, namespace
from coxswain_controller.translate.policies import coxswain

__all__ = ["References"]

INGRESS = "Ingress"
POLICY = coxswain.KIND
# The kinds that decide which class claims an Ingress and the defaults it reads under.
CLASS_KINDS = ("IngressClass", ingress_params.KIND)
_SECRET_KEYS = tuple(PREFIX + key for key in ingress_annotations.SECRET_KEYS)

Claim = Callable[[Obj], Any]
Tables = Callable[[str], cache.Objects]


class References:
    def __init__(self, ingress_controller: str) -> None:
        self._options = Options(ingress_controller=ingress_controller)
        # (kind, object) -> the Secrets it names; objects naming none are left out.
        self._named: dict[tuple[str, cache.Key], frozenset[cache.Key]] = {}
        self._claim: Claim | None = None  # None until the classes are read (and after a change)
        self.wanted: frozenset[cache.Key] = frozenset()  # the Secrets named now

    def update(self, event: cache.Event, tables: Tables) -> bool:
        """Follow `event` (already applied to the tables); True when `wanted` changed."""
        name = event.kind.name
        if name in CLASS_KINDS:
            self._claim = None
            self._reread(INGRESS, tables)
        elif name in (INGRESS, POLICY):
            if isinstance(event, cache.Changed):
                self._read(name, cache.key_of(event.obj), tables)
            elif not isinstance(event, cache.Progressed | cache.Released):
                self._reread(name, tables)
        else:
            return False
        wanted = frozenset().union(*self._named.values())
        changed, self.wanted = wanted != self.wanted, wanted
        return changed

    def _reread(self, kind: str, tables: Tables) -> None:
        for named in [n for n in self._named if n[0] == kind]:
            del self._named[named]
        for key in tables(kind):
            self._read(kind, key, tables)

    def _read(self, kind: str, key: cache.Key, tables: Tables) -> None:
        obj = tables(kind).get(key)
        secrets = frozenset() if obj is None else self._secrets(kind, obj, tables)
        if secrets:
            self._named[(kind, key)] = secrets
        else:
            self._named.pop((kind, key), None)

    def _secrets(self, kind: str, obj: Obj, tables: Tables) -> frozenset[cache.Key]:
        if kind == POLICY:
            found = coxswain.basic_auth_secret(obj)
            return frozenset() if found is None else frozenset({found})
        try:
            return frozenset((namespace(obj), s) for s in self._ingress_secrets(obj, tables))
        except MALFORMED:
            return frozenset()  # translation refuses it, saying why

    def _ingress_secrets(self, ingress: Obj, tables: Tables) -> Iterable[str]:
        own = meta(ingress).get("annotations") or {}
        claim = self._claimant(tables)(ingress)
        if claim is None:
            return ()  # not ours: its Secrets are another controller's to read
        class_name, parameters = claim
        defaults = parameters.default_annotations
        if not any(key in own or key in defaults for key in _SECRET_KEYS):
            return ()  # most Ingresses: not worth reading every annotation
        read = ingress_annotations.read(own, defaults, class_name)
        return ingress_annotations.secrets_named(read, namespace(ingress))

    def _claimant(self, tables: Tables) -> Claim:
        if self._claim is None:
            inputs = Inputs({kind: tables(kind) for kind in CLASS_KINDS})
            self._claim = ingresses.claimant(inputs, self._options)
        return self._claim
