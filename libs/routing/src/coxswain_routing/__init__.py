"""The routing model, its wire form and the request matcher.

The one place that decides what a route means: the controller compiles Kubernetes objects into
the model (`HostRoutes`, `EndpointSet`, ...), `to_wire`/`from_wire` carry it to the proxy, and
`compile_router(...).match(...)` answers each request. `explain(...)` answers the operator's
question "why did my request go there".
"""

from coxswain_routing._candidates import Candidate
from coxswain_routing._cors import (
    VARY_ORIGIN,
    exposes_response_fields,
    is_preflight,
    origin_allowed,
    preflight_headers,
    response_headers,
)
from coxswain_routing._explain import Explanation, Verdict, explain
from coxswain_routing._filters import (
    WELL_KNOWN_PORTS,
    HeaderOp,
    HeaderPlan,
    RequestTarget,
    apply_header_plan,
    fold_header_modifiers,
    redirect_location,
    rewrite_path,
)
from coxswain_routing._hosts import (
    claiming_hostname,
    host_pattern_covers,
    hostnames_overlap,
    intersect_hostnames,
    normalize_host,
    wildcard_suffixes,
)
from coxswain_routing._matcher import (
    Claims,
    Miss,
    Outcome,
    Router,
    compile_router,
    parse_query,
    patch_router,
)
from coxswain_routing._model import *  # noqa: F403 (the model's own __all__)
from coxswain_routing._model import __all__ as _model_all
from coxswain_routing._paths import normalize_path, prefix_covers
from coxswain_routing._policy import *  # noqa: F403 (the policy model's own __all__)
from coxswain_routing._policy import __all__ as _policy_all
from coxswain_routing._version import __version__
from coxswain_routing._weighted import MirrorSampler, WeightedRoundRobin
from coxswain_routing._wire import (
    UnsafeValue,
    WireError,
    from_wire,
    resource_hash,
    snapshot_version,
    to_wire,
)

__all__ = [
    *_model_all,
    *_policy_all,
    # matching
    "Candidate",
    "Claims",
    "Miss",
    "Outcome",
    "Router",
    "compile_router",
    "patch_router",
    "parse_query",
    "normalize_host",
    "normalize_path",
    "claiming_hostname",
    "host_pattern_covers",
    "hostnames_overlap",
    "intersect_hostnames",
    "wildcard_suffixes",
    "prefix_covers",
    "Explanation",
    "Verdict",
    "explain",
    # filters
    "HeaderOp",
    "HeaderPlan",
    "RequestTarget",
    "WELL_KNOWN_PORTS",
    "apply_header_plan",
    "fold_header_modifiers",
    "redirect_location",
    "rewrite_path",
    "VARY_ORIGIN",
    "exposes_response_fields",
    "is_preflight",
    "origin_allowed",
    "preflight_headers",
    "response_headers",
    "MirrorSampler",
    "WeightedRoundRobin",
    # wire
    "UnsafeValue",
    "WireError",
    "from_wire",
    "resource_hash",
    "snapshot_version",
    "to_wire",
    "__version__",
]
