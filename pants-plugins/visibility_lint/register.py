"""`pants lint` checks the visibility rules of every target's dependencies.

Pants 2.17 enforces `__dependencies_rules__`/`__dependents_rules__` only when some goal happens
to resolve a target's dependencies; `lint` (ruff, formatters) never does. This linter resolves
the dependencies of every target it is given, so a forbidden import (one service importing
another, a service importing the devkit) fails `pants lint ::` with Pants' own explanation.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pants.core.goals.lint import LintResult, LintTargetsRequest
from pants.core.util_rules.partitions import PartitionerType
from pants.engine.addresses import Addresses
from pants.engine.internals.dep_rules import DependencyRulesError
from pants.engine.rules import Get, MultiGet, _uncacheable_rule, collect_rules, rule
from pants.engine.target import Dependencies, DependenciesRequest, FieldSet
from pants.option.option_types import SkipOption
from pants.option.subsystem import Subsystem


class VisibilityLint(Subsystem):
    options_scope = "visibility-lint"
    name = "visibility"
    help = "Check every target's dependencies against the repository's visibility rules."

    skip = SkipOption("lint")


@dataclass(frozen=True)
class VisibilityFieldSet(FieldSet):
    required_fields = (Dependencies,)

    dependencies: Dependencies


class VisibilityLintRequest(LintTargetsRequest):
    field_set_type = VisibilityFieldSet
    tool_subsystem = VisibilityLint
    partitioner_type = PartitionerType.DEFAULT_SINGLE_PARTITION


@dataclass(frozen=True)
class _Verdict:
    violation: str | None


# Uncacheable: pantsd memoizes a caught engine error without tracking the sources that caused
# it, so a cached verdict would outlive the fix. Re-checking is cheap: the dependency inference
# underneath stays cached.
@_uncacheable_rule
async def check_one(field_set: VisibilityFieldSet) -> _Verdict:
    try:
        await Get(Addresses, DependenciesRequest(field_set.dependencies))
    except DependencyRulesError as err:
        return _Verdict(f"{field_set.address}: {err}")
    return _Verdict(None)


@rule(desc="Check visibility rules")
async def lint_visibility(request: VisibilityLintRequest.Batch[VisibilityFieldSet, Any]) -> LintResult:
    verdicts = await MultiGet(Get(_Verdict, VisibilityFieldSet, fs) for fs in request.elements)
    violations = sorted(v.violation for v in verdicts if v.violation)
    return LintResult(
        exit_code=1 if violations else 0,
        stdout="\n\n".join(violations),
        stderr="",
        linter_name=request.tool_name,
        partition_description=request.partition_metadata.description,
    )


def rules():
    return [*collect_rules(), *VisibilityLintRequest.rules()]
