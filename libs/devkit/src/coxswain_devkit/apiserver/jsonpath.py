"""Kubernetes JSONPath, the subset CRD printer columns use, evaluated over a JSON object.

A CRD's `additionalPrinterColumns[].jsonPath` is a path without kubectl's `{}` template braces,
such as `.spec.gatewayClassName`, `.status.addresses[*].value` or
`.status.conditions[?(@.type=="Programmed")].status`. `parse` turns one into steps once (a bad
path is `Invalid`, which the CRD's columns report by leaving the cell empty) and `find`
walks an object with them, giving every value reached in document order, as
`k8s.io/client-go/util/jsonpath` does. Supported steps: `.field` (a backslash escapes a dot in a
field name), `['field']`, `..field` (recursive descent), `[n]` (negative from the end),
`[start:end]`, `[*]`, and filters `[?(@.path)]` and `[?(@.path <op> literal)]` with `==`, `!=`,
`<`, `<=`, `>`, `>=` and a quoted string, number, `true`, `false` or `null`. Not supported:
unions (`[a,b]`), functions, ranges and the template's `range`/`end`.
"""

from __future__ import annotations

import json
import operator
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

__all__ = ["Invalid", "Path", "parse", "find", "text"]

_FIELD_RE = re.compile(r"((?:\\.|[^.\[\]\\])+)")
_INDEX_RE = re.compile(r"^\s*(-?\d+)\s*$")
_SLICE_RE = re.compile(r"^\s*(-?\d*)\s*:\s*(-?\d*)\s*$")
_QUOTED_RE = re.compile(r"""^\s*(['"])(.*)\1\s*$""")
_FILTER_RE = re.compile(r"^\?\(\s*@((?:\.[^\s=!<>]+)*)\s*(?:(==|!=|<=|>=|<|>)\s*(.+?))?\s*\)$")
_OPERATORS: dict[str, Callable[[Any, Any], bool]] = {
    "==": operator.eq,
    "!=": operator.ne,
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
}

Step = Callable[[Any], Iterator[Any]]


class Invalid(ValueError):
    """A path this subset cannot parse."""


@dataclass(frozen=True, slots=True)
class Path:
    source: str  # the path as written
    steps: tuple[Step, ...]  # applied in order, each to every value the last one reached


def _child(name: str) -> Step:
    def step(value: Any) -> Iterator[Any]:
        if isinstance(value, dict) and name in value:
            yield value[name]

    return step


def _descend(name: str) -> Step:
    def step(value: Any) -> Iterator[Any]:
        if isinstance(value, dict):
            if name in value:
                yield value[name]
            children: Any = value.values()
        elif isinstance(value, list):
            children = value
        else:
            return
        for child in children:
            yield from step(child)

    return step


def _every(value: Any) -> Iterator[Any]:
    if isinstance(value, list):
        yield from value
    elif isinstance(value, dict):
        yield from value.values()


def _slice(start: int | None, end: int | None, single: bool) -> Step:
    def step(value: Any) -> Iterator[Any]:
        if not isinstance(value, list):
            return
        if single:
            index = start or 0
            if -len(value) <= index < len(value):
                yield value[index]
            return
        yield from value[start:end]

    return step


def _literal(text: str) -> Any:
    quoted = _QUOTED_RE.match(text)
    if quoted:
        return quoted.group(2)
    try:
        return json.loads(text)
    except ValueError:
        raise Invalid(f"unrecognized filter literal {text!r}") from None


def _filter(expression: str) -> Step:
    m = _FILTER_RE.match(expression)
    if m is None:
        raise Invalid(f"unsupported filter {expression!r}")
    inner = parse(m.group(1)) if m.group(1) else Path("@", ())
    op, wanted = m.group(2), _literal(m.group(3)) if m.group(2) else None

    def keep(item: Any) -> bool:
        found = list(find(inner, item))
        if op is None:
            return bool(found)
        try:
            return any(_OPERATORS[op](v, wanted) for v in found)
        except TypeError:  # an ordering between a string and a number holds for neither
            return False

    def step(value: Any) -> Iterator[Any]:
        for item in value if isinstance(value, list) else []:
            if keep(item):
                yield item

    return step


def _bracket(content: str) -> Step:
    if content.strip() == "*":
        return _every
    if content.startswith("?"):
        return _filter(content)
    if quoted := _QUOTED_RE.match(content):
        return _child(quoted.group(2))
    if index := _INDEX_RE.match(content):
        return _slice(int(index.group(1)), None, single=True)
    if piece := _SLICE_RE.match(content):
        start, end = (int(p) if p else None for p in piece.groups())
        return _slice(start, end, single=False)
    raise Invalid(f"unsupported subscript [{content}]")


def _closing(path: str, start: int) -> int:
    """The index of the `]` closing the `[` at `start`, skipping brackets inside quotes."""
    quote = ""
    for i in range(start + 1, len(path)):
        char = path[i]
        if quote:
            quote = "" if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char == "]":
            return i
    raise Invalid(f"unclosed [ in {path!r}")


def parse(path: str) -> Path:
    text = path.strip()
    if text.startswith("{") and text.endswith("}"):
        text = text[1:-1].strip()
    steps: list[Step] = []
    i = 0
    while i < len(text):
        if text.startswith("..", i):
            m = _FIELD_RE.match(text, i + 2)
            if m is None:
                raise Invalid(f"a field name must follow .. in {path!r}")
            steps.append(_descend(m.group(1).replace("\\.", ".")))
            i = m.end()
        elif text[i] == ".":
            m = _FIELD_RE.match(text, i + 1)
            if m is not None:
                steps.append(_child(m.group(1).replace("\\.", ".")))
            i = m.end() if m is not None else i + 1
        elif text[i] == "[":
            end = _closing(text, i)
            steps.append(_bracket(text[i + 1 : end]))
            i = end + 1
        elif i == 0 and text[i] in "$@":
            i += 1
        else:
            raise Invalid(f"unexpected {text[i]!r} at {i} in {path!r}")
    return Path(path, tuple(steps))


def find(path: Path, obj: Any) -> Iterator[Any]:
    values: list[Any] = [obj]
    for step in path.steps:
        values = [found for value in values for found in step(value)]
    yield from values


def text(value: Any) -> str:
    """A value as JSONPath prints it: objects and lists as compact JSON, scalars bare."""
    if isinstance(value, dict | list):
        return json.dumps(value, separators=(",", ":"))
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)
