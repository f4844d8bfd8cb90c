"""Object metadata rules: name and label validation, timestamps, and what counts as "spec".

`metadata.generation` moves only when an object's desired state changes. The API server decides
that per kind; the rule here is the one it applies to custom resources and that matches the
built-in kinds Coxswain uses: everything outside `metadata` and `status` is desired state.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

Obj = dict[str, Any]
Clock = Callable[[], float]  # seconds since the epoch; tests pass a fake one

# k8s.io/apimachinery/pkg/util/validation: IsDNS1123Subdomain and IsDNS1123Label.
_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_LABEL_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")

system_clock: Clock = time.time


def timestamp(clock: Clock) -> str:
    return datetime.fromtimestamp(clock(), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_timestamp(text: str) -> float:
    return datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC).timestamp()


def name_problems(name: str, *, label: bool, segment: bool = False) -> list[tuple[str, str]]:
    """Why `name` is not a valid object name; namespaces must be DNS labels, RBAC objects path
    segments (`system:discovery`: ValidatePathSegmentName), others subdomains."""
    limit, pattern = (63, _LABEL) if label else (253, _SUBDOMAIN)
    if not name:
        return [("metadata.name", "Required value: name or generateName is required")]
    if segment:
        bad = name in (".", "..") or "/" in name or "%" in name
        why = f"Invalid value: \"{name}\": may not be '.' or '..' nor contain '/' or '%'"
        return [("metadata.name", why)] if bad else []
    if len(name) > limit or not pattern.match(name):
        what = "RFC 1123 label" if label else "RFC 1123 subdomain"
        return [
            (
                "metadata.name",
                f'Invalid value: "{name}": a lowercase {what} must consist of '
                "lower case alphanumeric characters, '-' or '.'",
            )
        ]
    return []


def _label_key_ok(key: str) -> bool:
    prefix, _, name = key.rpartition("/")
    if prefix and (len(prefix) > 253 or not _SUBDOMAIN.match(prefix)):
        return False
    return len(name) <= 63 and bool(_LABEL_NAME.match(name))


def label_problems(labels: Any) -> list[tuple[str, str]]:
    if labels is None:
        return []
    if not isinstance(labels, dict):
        return [("metadata.labels", "Invalid value: must be a map of strings")]
    problems = []
    for key, value in labels.items():
        if not _label_key_ok(str(key)):
            problems.append((f"metadata.labels[{key}]", "Invalid value: not a qualified name"))
        if not isinstance(value, str) or len(value) > 63 or not _LABEL_VALUE.match(value):
            problems.append((f"metadata.labels[{key}]", f"Invalid value: {value!r}"))
    return problems


def desired_state(obj: Obj) -> Obj:
    """The part of an object whose change bumps metadata.generation."""
    return {k: v for k, v in obj.items() if k not in ("metadata", "status", "apiVersion", "kind")}


def without_resource_version(obj: Obj) -> Obj:
    meta = {k: v for k, v in (obj.get("metadata") or {}).items() if k != "resourceVersion"}
    return {**obj, "metadata": meta}
