"""Translation: a pure function from cached Kubernetes objects to what Coxswain serves.

    result = translate(Inputs.from_objects(objects), Options())

`result.snapshots` maps each scope (SharedPool, each dedicated Gateway) to its resources;
`result.verdicts` says what each claimed object's status should be; `result.events` lists
what could not be done. See docs/translation.md.
"""

from coxswain_controller.translate.inputs import Inputs, Options
from coxswain_controller.translate.pipeline import translate
from coxswain_controller.translate.result import TranslateResult

__all__ = ["Inputs", "Options", "TranslateResult", "translate"]
