"""The proxy's structure: an import graph without cycles, and every name saying one thing.

Covers: every module of `coxswain_proxy` parsed (not imported), each import of another module of
the package an edge wherever it sits (top level, under `if TYPE_CHECKING:`, inside a function);
importing a module imports its parent packages too, so those are edges as well. A cycle fails
naming its modules. Every module file name and every class name in the package is used once
(`__init__.py` and `conftest.py` excepted), so a name found in a traceback or a doc points at one
place. No mypy suppression comment anywhere in the package: the ones there were stood where one
class passed for another. Leaves out third-party and library imports (a cycle cannot run
through them back into the package).
"""

from __future__ import annotations

import ast
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

PACKAGE = "coxswain_proxy"
ROOT = Path(__file__).resolve().parent
# Modules that must be here, so a sandbox missing part of the package fails rather than passes.
EXPECTED = {
    "coxswain_proxy.cli",
    "coxswain_proxy.discovery.client",
    "coxswain_proxy.dataplane.core",
    "coxswain_proxy.dataplane.contracts",
    "coxswain_proxy.dataplane.http.http11",
    "coxswain_proxy.dataplane.http.request_cycle",
    "coxswain_proxy.dataplane.upstream.connector",
}
# File names that every package may have.
SHARED_FILE_NAMES = {"__init__.py", "conftest.py"}


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(ROOT.rglob("*.py"))}


def _imported(node: ast.AST, here: str, is_package: bool) -> Iterator[str]:
    if isinstance(node, ast.Import):
        for alias in node.names:
            yield alias.name
    elif isinstance(node, ast.ImportFrom):
        base = node.module or ""
        if node.level:
            anchor = here.split(".") if is_package else here.split(".")[:-1]
            anchor = anchor[: len(anchor) - node.level + 1]
            base = ".".join([*anchor, base] if base else anchor)
        yield base
        for alias in node.names:
            yield f"{base}.{alias.name}"  # `from package import module`


def edges(known: dict[str, Path]) -> dict[str, set[str]]:
    """Module -> the package's modules it imports (each with its parent packages)."""
    graph: dict[str, set[str]] = {}
    for name, path in known.items():
        targets: set[str] = set()
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in ast.walk(tree):
            for target in _imported(node, name, path.name == "__init__.py"):
                parts = target.split(".")
                for i in range(1, len(parts) + 1):
                    prefix = ".".join(parts[:i])
                    if prefix in known and prefix != name:
                        targets.add(prefix)
        graph[name] = targets
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Each strongly connected component of more than one module (Tarjan), as a path."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in sorted(graph[node]):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_the_package_is_all_here() -> None:
    assert set(modules()) >= EXPECTED


def test_no_module_imports_itself_back() -> None:
    graph = edges(modules())
    # A package's __init__ imported by its own modules is no cycle unless it imports them back.
    assert cycles(graph) == []


def test_no_type_ignore_in_the_package() -> None:
    marker = "type: " + "ignore"  # split, so this file does not find itself
    offenders = [
        f"{path.relative_to(ROOT.parent)}:{number}"
        for path in modules().values()
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if marker in line
    ]
    assert offenders == []


def test_every_module_file_name_is_used_once() -> None:
    names = Counter(p.name for p in modules().values() if p.name not in SHARED_FILE_NAMES)
    assert [name for name, count in names.items() if count > 1] == []


def test_every_class_name_is_used_once() -> None:
    where: dict[str, list[str]] = {}
    for name, path in modules().items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef):
                where.setdefault(node.name, []).append(name)
    assert {cls: found for cls, found in where.items() if len(found) > 1} == {}
