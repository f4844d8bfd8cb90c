"""Seeding the emulator from YAML manifests, as `kubectl apply` of a directory would.

Namespaces and CustomResourceDefinitions go first so the objects that need them can follow in
any file order. Unlike a create through the API, a seeded object keeps its `status`: a demo or a
test can start with Pods that are Ready or Services that have a load balancer address.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import yaml

from coxswain_devkit.apiserver.machinery import Machinery

Obj = dict[str, Any]

_FIRST = ("Namespace", "CustomResourceDefinition")


class ManifestError(Exception):
    """A manifest names a kind the emulator does not serve, or cannot be stored."""


def read_documents(path: Path) -> list[Obj]:
    """Every object in a file or in a directory's *.yaml, *.yml and *.json files (sorted)."""
    files = (
        sorted(p for p in path.rglob("*") if p.suffix in (".yaml", ".yml", ".json"))
        if path.is_dir()
        else [path]
    )
    return [doc for f in files for doc in _flatten(yaml.safe_load_all(f.read_text()))]


def _flatten(docs: Iterable[Any]) -> Iterator[Obj]:
    for doc in docs:
        if isinstance(doc, dict) and doc.get("kind", "").endswith("List") and "items" in doc:
            yield from _flatten(doc["items"])
        elif isinstance(doc, dict):
            yield doc


def _order(obj: Obj) -> int:
    kind = obj.get("kind", "")
    return _FIRST.index(kind) if kind in _FIRST else len(_FIRST)


def load(machinery: Machinery, objects: Iterable[Obj]) -> list[Obj]:
    """Create each object (its status kept); an object that already exists is replaced."""
    created = []
    for obj in sorted(objects, key=_order):
        kind = machinery.registry.by_kind(str(obj.get("apiVersion", "")), str(obj.get("kind", "")))
        if kind is None:
            raise ManifestError(f"no served kind {obj.get('apiVersion')}/{obj.get('kind')}")
        meta = obj.get("metadata") or {}
        namespace = str(meta.get("namespace") or ("default" if kind.namespaced else ""))
        key = machinery.key(kind, namespace, str(meta.get("name", "")))
        if machinery.store.get(key) is not None:
            machinery.remove(key)
        created.append(machinery.create(kind, namespace, obj, keep_status=True))
    return created
