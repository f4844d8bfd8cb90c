"""One source of truth for each package's version: its `_version.py`.

Every `python_distribution` in this repo lives at `<package dir>/BUILD` and its code at
`<package dir>/src/<import name>/_version.py`, which holds `__version__ = "X.Y.Z"`. The code
reads that module (for `--version` and `coxswain_build_info`), and this rule reads the same file
to fill `python_artifact(version=...)`, so the wheel can never disagree with the code.
"""

from __future__ import annotations

import ast
import os

from pants.backend.python.util_rules.package_dists import SetupKwargs, SetupKwargsRequest
from pants.engine.fs import DigestContents, GlobMatchErrorBehavior, PathGlobs
from pants.engine.rules import Get, collect_rules, rule
from pants.engine.target import Target
from pants.engine.unions import UnionRule


class VersionFromSourceRequest(SetupKwargsRequest):
    @classmethod
    def is_applicable(cls, _: Target) -> bool:
        return True


def _parse_version(path: str, text: str) -> str:
    for node in ast.parse(text, filename=path).body:
        if (
            isinstance(node, ast.Assign)
            and [getattr(t, "id", None) for t in node.targets] == ["__version__"]
            and isinstance(node.value, ast.Constant)
            and isinstance(node.value.value, str)
        ):
            return node.value.value
    raise ValueError(f"{path}: no `__version__ = \"...\"` assignment")


@rule
async def version_from_source(request: VersionFromSourceRequest) -> SetupKwargs:
    kwargs = request.explicit_kwargs
    if "version" in kwargs:
        raise ValueError(
            f"{request.target.address}: set the version in src/<package>/_version.py, "
            "not in python_artifact()"
        )
    pattern = os.path.join(request.target.address.spec_path, "src", "*", "_version.py")
    contents = await Get(
        DigestContents,
        PathGlobs(
            [pattern],
            glob_match_error_behavior=GlobMatchErrorBehavior.error,
            description_of_origin=f"the version of {request.target.address}",
        ),
    )
    if len(contents) != 1:
        raise ValueError(f"{request.target.address}: expected one {pattern}, found {len(contents)}")
    entry = contents[0]
    kwargs["version"] = _parse_version(entry.path, entry.content.decode())
    return SetupKwargs(kwargs, address=request.target.address)


def rules():
    return [*collect_rules(), UnionRule(SetupKwargsRequest, VersionFromSourceRequest)]
