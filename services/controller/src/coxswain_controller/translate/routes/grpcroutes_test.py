"""GRPCMethodMatch lowered onto path matches: each form spec 003 names, and what is refused.

Covers `grpcroutes.method_path` alone: the path each form becomes, and why a match cannot be
served. How the lowered matches rank against each other on a host, and what a call reaches, is
grpcroute_calls_test's; the refusal as a route's status is the golden case
grpcroute-method-matches.
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from coxswain_controller.translate.routes.grpcroutes import method_path
from coxswain_routing import PathMatch, PathType

EXACT, PREFIX, REGEX = PathType.EXACT, PathType.PATH_PREFIX, PathType.REGULAR_EXPRESSION
EVERY_CALL = PathMatch(REGEX, "/[^/]+/[^/]+")


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        pytest.param(
            {"service": "pkg.Svc", "method": "Get"},
            PathMatch(EXACT, "/pkg.Svc/Get"),
            id="service-and-method-is-an-exact-path",
        ),
        pytest.param(
            {"type": "Exact", "service": "pkg.Svc"},
            PathMatch(PREFIX, "/pkg.Svc"),
            id="service-alone-is-the-prefix-beneath-the-service",
        ),
        pytest.param(
            {"method": "Get"},
            PathMatch(REGEX, "/[^/]+/Get"),
            id="method-alone-matches-under-any-service",
        ),
        pytest.param(
            {"service": ".pkg.Svc", "method": "_get2"},
            PathMatch(EXACT, "/.pkg.Svc/_get2"),
            id="leading-dot-and-underscores-are-valid-names",
        ),
        pytest.param(
            {"type": "RegularExpression", "service": r"pkg\..*", "method": "Get|List"},
            PathMatch(REGEX, r"/(?:pkg\..*)/(?:Get|List)"),
            id="regex-each-segment-its-own-group",
        ),
        pytest.param(
            {"type": "RegularExpression", "service": "pkg.Svc"},
            PathMatch(REGEX, "/(?:pkg.Svc)/[^/]+"),
            id="regex-absent-method-matches-any-segment",
        ),
        pytest.param(
            {"type": "RegularExpression", "method": "Get.*"},
            PathMatch(REGEX, "/[^/]+/(?:Get.*)"),
            id="regex-absent-service-matches-any-segment",
        ),
        pytest.param(None, EVERY_CALL, id="no-method-match-is-every-call"),
        pytest.param({}, EVERY_CALL, id="empty-method-match-is-every-call"),
        pytest.param({"type": "Exact"}, EVERY_CALL, id="exact-naming-neither-is-every-call"),
    ],
)
def test_lowering(raw: dict[str, Any] | None, expected: PathMatch) -> None:
    assert method_path(raw) == (expected, [])


def test_lowered_patterns_match_whole_grpc_paths() -> None:
    # The matcher compares a pattern against the whole path (fullmatch): a method-alone match
    # names the last segment, not a suffix of it.
    path, _ = method_path({"method": "Get"})
    assert re.fullmatch(path.value, "/pkg.Svc/Get")
    assert not re.fullmatch(path.value, "/pkg.Svc/ForGet")
    assert not re.fullmatch(path.value, "/Get")
    assert re.fullmatch(EVERY_CALL.value, "/pkg.Svc/Get")
    assert not re.fullmatch(EVERY_CALL.value, "/")


@pytest.mark.parametrize(
    ("raw", "problem"),
    [
        pytest.param(
            {"service": "pkg/Svc", "method": "Get"},
            "service: 'pkg/Svc' is not a gRPC service name",
            id="exact-service-may-not-hold-a-slash",
        ),
        pytest.param(
            {"service": "pkg.Svc", "method": "Get/x"},
            "method: 'Get/x' is not a gRPC method name",
            id="exact-method-may-not-hold-a-slash",
        ),
        pytest.param(
            {"service": ".*", "method": "Get"},
            "service: '.*' is not a gRPC service name",
            id="exact-service-is-not-a-pattern",
        ),
        pytest.param(
            {"method": "1st"},
            "method: '1st' is not a gRPC method name",
            id="exact-method-starts-with-a-letter-or-underscore",
        ),
        pytest.param(
            {"service": "pkg..Svc"},
            "service: 'pkg..Svc' is not a gRPC service name",
            id="exact-service-has-no-empty-label",
        ),
        pytest.param(
            {"type": "RegularExpression", "service": "a)|(b"},
            "service: invalid regular expression 'a)|(b': unbalanced parenthesis at position 1",
            id="regex-segment-must-parse-on-its-own",
        ),
        pytest.param(
            {"type": "Prefix", "service": "pkg.Svc"},
            "type: 'Prefix' is not one of Exact, RegularExpression",
            id="unknown-type",
        ),
    ],
)
def test_refused(raw: dict[str, Any], problem: str) -> None:
    _, problems = method_path(raw)
    assert problems == [problem]


def test_a_name_of_the_wrong_json_type_cannot_be_read() -> None:
    # guard.py turns this into "could not be read and is not served".
    with pytest.raises(TypeError):
        method_path({"service": ["pkg.Svc"]})
