"""Ruff for Pants 2.17, spoken the way current Ruff expects: `ruff check` and `ruff format`.

Pants 2.17's built-in Ruff backend calls the bare `ruff <files>` form, which Ruff removed in
0.5, and it has no formatter. This backend reuses that backend's `[ruff]` subsystem (version,
lockfile, config discovery) and adds:

- lint: `ruff check`;
- fix:  `ruff check --fix`;
- fmt:  `ruff format` (which `pants lint` also runs in check mode: a file it would change fails).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pants.backend.python.lint.ruff import skip_field, subsystem
from pants.backend.python.lint.ruff.subsystem import Ruff, RuffFieldSet
from pants.backend.python.util_rules import pex
from pants.backend.python.util_rules.pex import PexRequest, VenvPex, VenvPexProcess
from pants.core.goals.fix import FixResult, FixTargetsRequest
from pants.core.goals.fmt import FmtResult, FmtTargetsRequest
from pants.core.goals.lint import LintResult, LintTargetsRequest
from pants.core.util_rules.config_files import ConfigFiles, ConfigFilesRequest
from pants.core.util_rules.partitions import PartitionerType
from pants.core.util_rules.source_files import SourceFiles, SourceFilesRequest
from pants.engine.fs import Digest, MergeDigests
from pants.engine.internals.native_engine import Snapshot
from pants.engine.process import FallibleProcessResult
from pants.engine.rules import Get, MultiGet, collect_rules, rule
from pants.util.logging import LogLevel
from pants.util.meta import classproperty
from pants.util.strutil import pluralize


class RuffCheckRequest(LintTargetsRequest):
    field_set_type = RuffFieldSet
    tool_subsystem = Ruff
    partitioner_type = PartitionerType.DEFAULT_SINGLE_PARTITION

    @classproperty
    def tool_name(cls) -> str:
        return "ruff check"

    @classproperty
    def tool_id(cls) -> str:
        return "ruff-check"


class RuffFixRequest(FixTargetsRequest):
    field_set_type = RuffFieldSet
    tool_subsystem = Ruff
    partitioner_type = PartitionerType.DEFAULT_SINGLE_PARTITION

    @classproperty
    def tool_name(cls) -> str:
        return "ruff check --fix"

    @classproperty
    def tool_id(cls) -> str:
        return "ruff-fix"


class RuffFormatRequest(FmtTargetsRequest):
    field_set_type = RuffFieldSet
    tool_subsystem = Ruff
    partitioner_type = PartitionerType.DEFAULT_SINGLE_PARTITION

    @classproperty
    def tool_name(cls) -> str:
        return "ruff format"

    @classproperty
    def tool_id(cls) -> str:
        return "ruff-format"


@dataclass(frozen=True)
class _RunRuff:
    snapshot: Snapshot
    command: tuple[str, ...]


@rule(level=LogLevel.DEBUG)
async def run_ruff(request: _RunRuff, ruff: Ruff) -> FallibleProcessResult:
    ruff_pex, config_files = await MultiGet(
        Get(VenvPex, PexRequest, ruff.to_pex_request()),
        Get(ConfigFiles, ConfigFilesRequest, ruff.config_request(request.snapshot.dirs)),
    )
    input_digest = await Get(
        Digest, MergeDigests((request.snapshot.digest, config_files.snapshot.digest))
    )
    conf_args = [f"--config={ruff.config}"] if ruff.config else []
    return await Get(
        FallibleProcessResult,
        VenvPexProcess(
            ruff_pex,
            argv=(*request.command, *conf_args, *ruff.args, *request.snapshot.files),
            input_digest=input_digest,
            output_files=request.snapshot.files,
            description=(
                f"Run ruff {' '.join(request.command)} on "
                f"{pluralize(len(request.snapshot.files), 'file')}."
            ),
            level=LogLevel.DEBUG,
        ),
    )


@rule(desc="Lint with ruff check", level=LogLevel.DEBUG)
async def ruff_check(request: RuffCheckRequest.Batch[RuffFieldSet, Any]) -> LintResult:
    sources = await Get(
        SourceFiles, SourceFilesRequest(field_set.source for field_set in request.elements)
    )
    result = await Get(FallibleProcessResult, _RunRuff(sources.snapshot, ("check",)))
    return LintResult.create(request, result, strip_chroot_path=True)


@rule(desc="Fix with ruff check --fix", level=LogLevel.DEBUG)
async def ruff_fix(request: RuffFixRequest.Batch) -> FixResult:
    result = await Get(FallibleProcessResult, _RunRuff(request.snapshot, ("check", "--fix")))
    return await FixResult.create(request, result, strip_chroot_path=True)


@rule(desc="Format with ruff format", level=LogLevel.DEBUG)
async def ruff_format(request: RuffFormatRequest.Batch) -> FmtResult:
    result = await Get(FallibleProcessResult, _RunRuff(request.snapshot, ("format",)))
    return await FmtResult.create(request, result, strip_chroot_path=True)


def rules():
    return [
        *collect_rules(),
        *RuffCheckRequest.rules(),
        *RuffFixRequest.rules(),
        *RuffFormatRequest.rules(),
        *pex.rules(),
        *skip_field.rules(),
        *subsystem.rules(),
    ]
