"""`Translator`: translation kept across passes, so an edit costs what it touches.

Where it sits: the publisher owns one `Translator` and calls `translate(inputs)` for every
debounced change. The watch cache never mutates an object and swaps a kind's whole table when
any object of that kind changes, so comparing tables by identity tells exactly which kinds
changed since the last pass. When only HTTPRoutes, EndpointSlices or Services did — route edits
and endpoint churn, the everyday changes — the last `Pass` is patched (`Pass.patch`); any other
change runs every stage again, still reusing compiled routes through the `RouteMemo`. Either
way the result equals what the pure `translate()` returns for the same inputs (incremental_test
checks it).
"""

from __future__ import annotations

from coxswain_controller.translate.inputs import KINDS, Inputs, Options
from coxswain_controller.translate.memo import RouteMemo
from coxswain_controller.translate.pipeline import PATCHABLE, Pass, changed_keys
from coxswain_controller.translate.result import TranslateResult

__all__ = ["Translator"]


class Translator:
    def __init__(self, options: Options) -> None:
        self._options = options
        self._memo = RouteMemo()
        self._last: Pass | None = None
        self.patched = 0  # passes answered by patching the previous one (for tests, metrics)

    def translate(self, inputs: Inputs) -> TranslateResult:
        last = self._last
        # `patch` may decline (nothing done): then every stage runs again.
        if (
            last is not None
            and self._patchable(last.inputs, inputs)
            and last.patch(inputs, self._memo)
        ):
            self.patched += 1
            return last.result()
        self._last = Pass.build(inputs, self._options, self._memo)
        return self._last.result()

    def reset(self) -> None:
        """Forget the kept pass (after a pass failed half way): the next one starts afresh."""
        self._last = None
        self._memo = RouteMemo()

    def _patchable(self, before: Inputs, after: Inputs) -> bool:
        # The published Service's status is the one status translation reads (its addresses).
        if _published_changed(self._options, before, after):
            return False
        return _changed_kinds(before, after) <= PATCHABLE


def _published_changed(options: Options, before: Inputs, after: Inputs) -> bool:
    key = options.published_key
    return key is not None and before.get("Service", *key) is not after.get("Service", *key)


def _changed_kinds(before: Inputs, after: Inputs) -> set[str]:
    """The kinds whose objects changed in a way translation can see.

    Translation never reads `status` or `metadata.resourceVersion`/`managedFields`, and this
    controller's own status writes change nothing else: a Gateway's status write would otherwise
    cost a full pass. Patchable kinds are compared object by object in the patch itself.
    """
    changed = set()
    for kind in KINDS:
        old, new = before.table(kind), after.table(kind)
        if old is new:
            continue
        if kind in PATCHABLE or changed_keys(old, new):
            changed.add(kind)
    return changed
