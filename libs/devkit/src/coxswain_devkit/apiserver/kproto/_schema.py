"""The emulator's Kubernetes protobuf schema: the `.proto` files beside this module, read once.

The files are the project's own (the subset of k8s.io/api the emulator serves, with the API's
public field numbers), written in the small part of proto3 this reader understands: `syntax`,
`package`, `import`, `message` blocks of fields (`[optional|repeated] type name = number;`,
`map<k, v> name = number;`) and comments. A field's label says how its zero value maps to JSON
(see runtime.proto); a trailing `// inline` comment marks a Go embedded struct. protoc compiles
the same files (kproto_test holds them to it), so they stay real protobuf.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from importlib import resources

SCALARS = frozenset(
    {"string", "bytes", "bool", "int32", "int64", "uint32", "uint64", "double", "float"}
)

_FIELD = re.compile(
    r"^(?:(?P<label>optional|repeated)\s+)?"
    r"(?:map<\s*(?P<key>\w+)\s*,\s*(?P<value>[\w.]+)\s*>|(?P<type>[\w.]+))\s+"
    r"(?P<name>\w+)\s*=\s*(?P<number>\d+)\s*;\s*(?://\s*(?P<note>.*))?$"
)


class SchemaError(Exception):
    """A `.proto` file says something this reader does not understand."""


@dataclass(frozen=True, slots=True)
class Field:
    name: str  # the JSON name
    number: int  # the field number on the wire
    type: str  # a scalar type name, or a message's full name
    repeated: bool = False  # a list (for maps: False)
    presence: bool = False  # `optional`: a zero value on the wire is kept in the JSON
    inline: bool = False  # a Go embedded struct: its fields sit in the parent's JSON
    map_key: str = ""  # the key's scalar type when this field is a map

    @property
    def is_message(self) -> bool:
        return self.type not in SCALARS


@dataclass(frozen=True, slots=True)
class Message:
    full_name: str  # e.g. "k8s.io.api.core.v1.Pod"
    fields: dict[int, Field] = field(default_factory=dict)  # by number

    def by_name(self, name: str) -> Field | None:
        return next((f for f in self.fields.values() if f.name == name), None)


@dataclass(frozen=True, slots=True)
class _Raw:
    package: str
    name: str
    fields: list[tuple[str | None, str, str, str, int, str]]  # label, key, type, name, n, note


def _lines(text: str) -> list[str]:
    out = []
    for line in text.splitlines():
        stripped = line.strip()
        if stripped and not stripped.startswith("//"):
            out.append(stripped)
    return out


def _parse(text: str) -> list[_Raw]:
    package, current, messages = "", None, []
    for line in _lines(text):
        if line.startswith(("syntax", "import")):
            continue
        if line.startswith("package "):
            package = line.removeprefix("package ").rstrip(";").strip()
        elif line.startswith("message "):
            current = _Raw(package, line.split()[1], [])
            messages.append(current)
        elif line == "}":
            current = None
        elif current is not None:
            current.fields.append(_field_line(line))
        else:
            raise SchemaError(f"unexpected line outside a message: {line!r}")
    return messages


def _field_line(line: str) -> tuple[str | None, str, str, str, int, str]:
    m = _FIELD.match(line)
    if m is None:
        raise SchemaError(f"not a field this reader understands: {line!r}")
    type_ = m["value"] if m["key"] else m["type"]
    return (m["label"], m["key"] or "", type_, m["name"], int(m["number"]), m["note"] or "")


def _resolve(type_: str, package: str, known: set[str]) -> str:
    if type_ in SCALARS:
        return type_
    for candidate in (type_.lstrip("."), f"{package}.{type_}"):
        if candidate in known:
            return candidate
    raise SchemaError(f"unknown type {type_!r} in package {package}")


def build(texts: list[str]) -> dict[str, Message]:
    raws = [m for text in texts for m in _parse(text)]
    known = {f"{r.package}.{r.name}" for r in raws}
    schema: dict[str, Message] = {}
    for raw in raws:
        message = Message(f"{raw.package}.{raw.name}")
        for label, key, type_, name, number, note in raw.fields:
            message.fields[number] = Field(
                name=name,
                number=number,
                type=_resolve(type_, raw.package, known),
                repeated=label == "repeated",
                presence=label == "optional",
                inline=note.strip() == "inline",
                map_key=key,
            )
        schema[message.full_name] = message
    return schema


def proto_files() -> list[str]:
    """The names of the `.proto` files that make up the schema."""
    package = resources.files(__package__ or "coxswain_devkit.apiserver.kproto")
    return sorted(p.name for p in package.iterdir() if p.name.endswith(".proto"))


@functools.cache
def schema() -> dict[str, Message]:
    package = resources.files(__package__ or "coxswain_devkit.apiserver.kproto")
    return build([package.joinpath(name).read_text() for name in proto_files()])


UNKNOWN = "k8s.io.apimachinery.pkg.runtime.Unknown"
_META = "k8s.io.apimachinery.pkg.apis.meta.v1"
# Kinds of meta/v1 that any group's version may carry (errors, delete options, watch events).
_META_KINDS = frozenset({"Status", "DeleteOptions", "WatchEvent"})


def message_for(api_version: str, kind: str) -> str | None:
    """The schema's message for objects of `kind` at `api_version`, if it has one."""
    group, _, version = api_version.rpartition("/")
    if kind in _META_KINDS:
        name = f"{_META}.{kind}"
    else:
        name = f"k8s.io.api.{group.split('.')[0] or 'core'}.{version}.{kind}"
    return name if name in schema() else None
