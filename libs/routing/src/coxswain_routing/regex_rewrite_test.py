"""ReplaceRegexMatch: ingress-nginx's rewrite-target with capture groups, in the model.

Covers `rewrite_path` for the new type (the whole path replaced by the template, $N or $(N)
from the rule's RegularExpression path match, a group that took no part or does not exist
empty), the wire round trip of the new enum value, and `Rule.validate` refusing the type off a
URLRewrite or on a rule with a match that is not a RegularExpression. The other path modifier
types are covered in filters_test.py.
"""

from __future__ import annotations

import pytest

from coxswain_proto.gen.coxswain.discovery import v1 as pb
from coxswain_routing import (
    HostRoutes,
    Match,
    PathMatch,
    PathModifier,
    PathModifierType,
    PathType,
    RequestRedirect,
    RouteId,
    Rule,
    URLRewrite,
    from_wire,
    rewrite_path,
    to_wire,
)

# What ingress-nginx's documented example becomes: path /something(/|$)(.*), target /$2,
# matched as nginx's `~* "^..."` (case-insensitive, anchored at the start only).
PATTERN = "(?i)(?:/something(/|$)(.*)).*"
REGEX = PathModifierType.REPLACE_REGEX_MATCH


@pytest.mark.parametrize(
    ("path", "template", "rewritten"),
    [
        pytest.param("/something", "/$2", "/", id="no-rest-is-the-root"),
        pytest.param("/something/", "/$2", "/", id="trailing-slash-is-the-root"),
        pytest.param("/something/new", "/$2", "/new", id="group-two-is-the-rest"),
        pytest.param("/SOMETHING/new", "/$2", "/new", id="case-insensitive-like-nginx"),
        pytest.param("/something/a/b", "/v2/$2", "/v2/a/b", id="literal-text-kept"),
        pytest.param("/something/x", "/$1$2", "//x", id="groups-joined-as-written"),
        pytest.param("/something/x", "/$7", "/", id="a-missing-group-is-empty"),
        pytest.param("/something/x", "/$(2)$(1)", "/x/", id="parenthesised-references"),
        pytest.param("/something/x", "/$21", "/x1", id="one-digit-unbraced-like-nginx"),
        pytest.param("/something/x", "/fixed", "/fixed", id="no-reference-replaces-whole"),
        pytest.param("/elsewhere", "/$2", "/elsewhere", id="no-match-leaves-the-path"),
    ],
)
def test_regex_rewrite_replaces_the_whole_path_with_the_template(
    path: str, template: str, rewritten: str
) -> None:
    assert rewrite_path(path, PathModifier(REGEX, template), PATTERN) == rewritten


def test_a_group_that_took_no_part_is_empty() -> None:
    pattern = "(?:/a(/b)?(/c)?).*"
    assert rewrite_path("/a/c", PathModifier(REGEX, "/x$1$2"), pattern) == "/x/c"


def _rule(match: PathMatch, *filters: URLRewrite | RequestRedirect) -> Rule:
    return Rule(RouteId(1, "ns", "ing", "Ingress"), (Match(match),), filters=filters)


def test_the_new_type_crosses_the_wire() -> None:
    rewrite = URLRewrite(path=PathModifier(REGEX, "/$2"))
    rule = _rule(PathMatch(PathType.REGULAR_EXPRESSION, PATTERN), rewrite)
    routes = HostRoutes("ingress", 80, "a.example", (rule,))
    message = to_wire(routes)
    encoded = bytes(message)
    assert from_wire(pb.Resource.parse(encoded)) == routes


def test_validate_accepts_it_on_a_regex_rule() -> None:
    rule = _rule(
        PathMatch(PathType.REGULAR_EXPRESSION, PATTERN),
        URLRewrite(path=PathModifier(REGEX, "/$1/$(11)")),
    )
    assert rule.validate() == []
    assert rule.value_problems() == []  # what from_wire refuses: $(N) is a path's own text


@pytest.mark.parametrize(
    ("rule", "message"),
    [
        pytest.param(
            _rule(PathMatch(PathType.PATH_PREFIX, "/a"), URLRewrite(path=PathModifier(REGEX, "/"))),
            "ReplaceRegexMatch needs RegularExpression path matches",
            id="prefix-match-has-no-groups",
        ),
        pytest.param(
            _rule(
                PathMatch(PathType.REGULAR_EXPRESSION, PATTERN),
                RequestRedirect(path=PathModifier(REGEX, "/$1")),
            ),
            "ReplaceRegexMatch is a URLRewrite's only",
            id="not-on-a-redirect",
        ),
    ],
)
def test_validate_refuses_it_where_it_has_no_groups(rule: Rule, message: str) -> None:
    assert [p.message for p in rule.validate()] == [message]
