"""What every part of the wire mapping shares: its errors, and reading an enum back by table.

Its own module so that the rule mapping (`_wire_rules`) and the policy mapping (`_wire_policy`),
which the rule mapping calls, both read from here rather than from each other.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from typing import TypeVar

__all__ = ["UnsafeValue", "WireError", "back", "invert"]

K = TypeVar("K", bound=Hashable)
V = TypeVar("V", bound=Hashable)


class WireError(ValueError):
    """A wire resource the model cannot represent (a newer controller, or corruption)."""


class UnsafeValue(WireError):
    """A wire resource holding a value that would break an HTTP head if written (a header
    value with CR LF, a path with a space): refused whoever made it."""


def invert(table: Mapping[K, V]) -> dict[V, K]:
    return {v: k for k, v in table.items()}


def back(table: Mapping[V, K], value: V, what: str) -> K:
    try:
        return table[value]
    except KeyError:
        raise WireError(f"unknown {what} {value!r}") from None
