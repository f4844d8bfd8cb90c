"""ReplaceRegexMatch through real sockets: the request-target a backend reads.

Covers ingress-nginx's rewrite-target as the proxy applies it (the model's ReplaceRegexMatch):
the whole path replaced by the template, $N and $(N) taken from the rule's RegularExpression
path match, case-insensitively as the pattern says, the query kept, and the rewrite beside a
Host rewrite. The substitution itself is `coxswain_routing`'s (regex_rewrite_test), its
lowering from annotations the controller's tests.
"""

from __future__ import annotations

from coxswain_proxy.dataplane import testing as t
from coxswain_proxy.dataplane.http import recording
from coxswain_routing import (
    Match,
    PathMatch,
    PathModifier,
    PathModifierType,
    PathType,
    URLRewrite,
)

# What the controller compiles `/api(/|$)(.*)` with rewrite-target `/$2` into, on a host whose
# longer `/api/v1(.*)` path comes first (its group is the pattern's first: `/$2` became $(3)).
PATTERN = "(?i)(?!(?:/api/v1(.*)))(?:/api(/|$)(.*)).*"


async def _target(rewrite: URLRewrite, path: str) -> tuple[bytes, list[bytes]]:
    match = Match(PathMatch(PathType.REGULAR_EXPRESSION, PATTERN))
    rule = t.rule("r", t.backend("rec"), filters=(rewrite,), match=match)
    async with recording.backend(recording.ok) as (port, recorder):
        resources: list[t.Resource] = [
            t.HTTP_LISTENER,
            t.endpoints("rec", port),
            t.routes("example.com", rule),
        ]
        async with t.running(resources) as running:
            response = await t.get(t.actual(running), path)
    assert response.status == 200
    [received] = recorder.requests
    return received.target, received.values(b"host")


async def test_the_backend_reads_the_template_with_the_path_groups() -> None:
    rewrite = URLRewrite(path=PathModifier(PathModifierType.REPLACE_REGEX_MATCH, "/$(3)"))
    assert (await _target(rewrite, "/api/orders/7?x=1"))[0] == b"/orders/7?x=1"
    assert (await _target(rewrite, "/API"))[0] == b"/"


async def test_the_path_rewrite_and_a_host_rewrite_go_together() -> None:
    modifier = PathModifier(PathModifierType.REPLACE_REGEX_MATCH, "/svc$2$(3)")
    rewrite = URLRewrite(hostname="internal.example", path=modifier)
    target, host = await _target(rewrite, "/api/a")
    assert (target, host) == (b"/svc/a", [b"internal.example"])
