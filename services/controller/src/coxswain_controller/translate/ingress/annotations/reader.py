"""The honoured annotations of one Ingress as the groups read them, each read recorded as a
verdict on its `Policy` (`groups`, `access`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TypeVar

from coxswain_controller.translate.ingress.annotations.catalog import CATALOG, PREFIX, Fate
from coxswain_controller.translate.ingress.annotations.model import Policy, Verdict
from coxswain_controller.translate.ingress.annotations.values import BadValue

__all__ = ["Reader"]

T = TypeVar("T")


class Reader:
    """The honoured annotations of one Ingress, and the verdicts given them."""

    def __init__(self, found: Mapping[str, tuple[str, str]], policy: Policy) -> None:
        self.found = found
        self.policy = policy

    def has(self, name: str) -> bool:
        return name in self.found

    def value(self, name: str) -> str:
        return self.found[name][0]

    def verdict(self, name: str, fate: Fate, note: str) -> None:
        value, origin = self.found[name]
        self.policy.verdicts.append(Verdict(PREFIX + name, value, fate, note, origin))

    def honour(self, name: str, note: str = "") -> None:
        self.verdict(name, Fate.HONOURED, note or CATALOG[name].note)

    def ignore(self, name: str, note: str) -> None:
        self.verdict(name, Fate.IGNORED, note)

    def bad(self, name: str, why: str) -> None:
        self.verdict(name, Fate.REFUSED, f"the value cannot be honoured: it {why}")

    def attempt(self, name: str, parser: Callable[[str], T]) -> T | None:
        """The parsed value, not yet honoured; None when absent or refused (said so)."""
        if not self.has(name):
            return None
        try:
            return parser(self.value(name))
        except BadValue as exc:
            self.bad(name, str(exc))
            return None

    def parse(self, name: str, parser: Callable[[str], T]) -> T | None:
        """The parsed value, honoured; None when absent or refused."""
        parsed = self.attempt(name, parser)
        if parsed is not None:
            self.honour(name)
        return parsed

    def ignore_all(self, names: tuple[str, ...], note: str) -> None:
        for name in names:
            if self.has(name):
                self.ignore(name, note)
