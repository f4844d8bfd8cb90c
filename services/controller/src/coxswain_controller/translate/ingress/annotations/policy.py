"""An Ingress's ingress-nginx annotations, layered and read into one `Policy`.

Where it sits: the Ingress stage reads each claimed Ingress's annotations here, over its
class's `defaultAnnotations` (spec 001: "per-key annotation defaults that per-Ingress
annotations can override"), before any of its paths is compiled; the migration report reads
every Ingress the same way. The result is plain data: a `Verdict` per annotation (what became
of it and why) and the honoured values, in the Gateway API's own shapes where one exists, so
`lowering` compiles them with the HTTPRoute lowering and the report prints them as HTTPRoutes.

Why a canary reads differently: ingress-nginx gives a canary Ingress the main Ingress's
location ("all the other non-canary annotations will be ignored (inherited from the
corresponding main ingress) except ... load-balance, upstream-hash-by, and annotations related
to session affinity"), so on a canary only its canary-* keys are honoured; the rest are
ignored, except what is refused anywhere (snippets, and what is not built yet).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from coxswain_controller.translate.ingress.annotations import groups, tls
from coxswain_controller.translate.ingress.annotations.catalog import (
    HARMLESS_VALUES,
    OFF_IS_HARMLESS,
    PREFIX,
    Fate,
    entry,
)
from coxswain_controller.translate.ingress.annotations.model import (
    BasicSpec,
    Canary,
    ExternalSpec,
    Limits,
    Policy,
    Verdict,
)
from coxswain_controller.translate.ingress.annotations.values import BadValue, boolean

__all__ = [
    "BasicSpec",
    "Canary",
    "ExternalSpec",
    "Limits",
    "SECRET_KEYS",
    "Policy",
    "Verdict",
    "read",
    "secrets_named",
]

# What ingress-nginx's canary keeps of its own (affinity and hashing): refused here as not
# built, where the rest of a canary's annotations are ignored.
_CANARY_OWN = ("affinity", "session-cookie-", "upstream-hash-by", "load-balance")


def layered(
    annotations: Mapping[str, Any], defaults: Mapping[str, str], class_name: str
) -> dict[str, tuple[str, str]]:
    """name (without the prefix) -> (value, origin): the class's defaults under the Ingress's
    own. Keys of other prefixes are not ingress-nginx's and are left alone."""
    found: dict[str, tuple[str, str]] = {}
    for source, origin in ((defaults, class_name), (annotations, "")):
        for key, value in source.items():
            if isinstance(key, str) and key.startswith(PREFIX):
                found[key[len(PREFIX) :]] = (str(value), origin)
    return dict(sorted(found.items()))


def read(
    annotations: Mapping[str, Any], defaults: Mapping[str, str] | None = None, class_name: str = ""
) -> Policy:
    """The Ingress's policy: every ingress-nginx annotation judged, the honoured ones read."""
    values = layered(annotations, defaults or {}, class_name)
    policy = Policy()
    canary = _is_canary(values)
    honoured: dict[str, tuple[str, str]] = {}
    for name, (value, origin) in values.items():
        verdict = _static(name, value, origin, canary)
        if verdict is None:
            honoured[name] = (value, origin)
        else:
            policy.verdicts.append(verdict)
    groups.read_all(honoured, policy, canary=canary)
    policy.verdicts.sort(key=lambda v: v.key)
    return policy


# The annotations (without the prefix) that name a Secret: an Ingress carrying none of them
# names none, so the sources need not read the rest (`secrets_named`).
SECRET_KEYS = ("auth-secret", "auth-tls-secret", "proxy-ssl-secret")


def secrets_named(policy: Policy, namespace: str = "") -> tuple[str, ...]:
    """The Secrets of the Ingress's namespace (`namespace`) its honoured annotations read:
    auth-secret's, auth-tls-secret's and proxy-ssl-secret's (one written with another
    namespace is refused, never read). The controller watches each by name
    (sources/references.py), and no other Secret that is not kubernetes.io/tls."""
    found = [policy.basic.secret] if policy.basic is not None else []
    found += [name for ns, name in tls.secrets_named(policy) if ns in ("", namespace)]
    return tuple(sorted(set(found)))


def _is_canary(values: Mapping[str, tuple[str, str]]) -> bool:
    try:
        return "canary" in values and boolean(values["canary"][0])
    except BadValue:
        return False  # refused when the canary group reads it


def _static(name: str, value: str, origin: str, canary: bool) -> Verdict | None:
    """The verdict the catalog alone gives; None for an honoured key, read by `groups`."""
    key = PREFIX + name
    found = entry(name)
    if found is None:
        return Verdict(key, value, Fate.IGNORED, "unknown annotation, not read", origin)
    if found.never:
        return Verdict(key, value, found.fate, found.note, origin)
    if canary and not name.startswith(("canary", *_CANARY_OWN)):
        note = "a canary Ingress takes the main Ingress's behaviour (as in ingress-nginx)"
        return Verdict(key, value, Fate.IGNORED, note, origin)
    if canary and found.fate is Fate.HONOURED and not name.startswith("canary"):
        note = "a canary's own affinity is not built: the main Ingress's cookie applies to both"
        return Verdict(key, value, Fate.IGNORED, note, origin)
    if found.fate is Fate.REFUSED and name in OFF_IS_HARMLESS and _off(value):
        return Verdict(key, value, Fate.IGNORED, "off, which is what Coxswain does", origin)
    if found.fate is Fate.REFUSED and value.strip() in HARMLESS_VALUES.get(name, ()):
        note = f"{value.strip()}, ingress-nginx's default, which is what Coxswain does"
        return Verdict(key, value, Fate.IGNORED, note, origin)
    if found.fate is not Fate.HONOURED:
        return Verdict(key, value, found.fate, found.note, origin)
    return None


def _off(value: str) -> bool:
    try:
        return not boolean(value)
    except BadValue:
        return False
