"""Incremental router builds: `compile_router(resources, previous)` answers like a fresh build.

Covers reuse of unchanged host tables (the same objects), rebuilding of every (port, host)
group an add, an edit or a removal touches, the previous router left answering as it did, and,
through generated sequences of edits (hypothesis), that an incremental build, and one patched
from the delta alone (`patch_router`), answer every probe exactly as a build from scratch
does; a patch keeps a host's resources in snapshot order and fences a port it opens by its
listeners. Leaves out what the answers mean (matcher_test.py).
"""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from coxswain_routing import (
    Backend,
    GatewayListeners,
    HostRoutes,
    Listener,
    ListenerProtocol,
    Match,
    Miss,
    PathMatch,
    PathType,
    Resource,
    RouteId,
    Router,
    Rule,
    WildcardScope,
    compile_router,
    patch_router,
)

PORTS = (80, 8080)
HOSTS = (
    "a.example.com",
    "b.example.com",
    "x.b.example.com",
    "*.example.com",
    "*.b.example.com",
    "",
)
PATHS = ("/", "/a", "/a/b", "/b", "/a/b/c")
METHODS = ("GET", "POST")


def rule(
    name: str, path: str = "/", kind: PathType = PathType.PATH_PREFIX, method: str = ""
) -> Rule:
    match = Match(path=PathMatch(kind, path), method=method)
    backend = Backend(endpoints=f"endpoints/default/{name}/80")
    return Rule(id=RouteId(100, "default", name), matches=(match,), backends=(backend,))


def routes(
    host: str, *rules: Rule, port: int = 80, table: str = "gateway/default/gw"
) -> HostRoutes:
    return HostRoutes(table, port, host, rules or (rule(host or "any"),))


def host_table(router: Router, host: str, port: int = 80) -> object:
    table = router.port_table(port)
    assert table is not None
    if not host:
        return table.catch_all
    if host.startswith("*."):
        return table.wildcard[host[2:]]
    return table.exact[host]


def answer(outcome: object) -> tuple[object, ...]:
    """What a request got, comparable across builds sharing the same resource objects."""
    if isinstance(outcome, Miss):
        return (outcome.status, outcome.reason)
    return (id(outcome.rule), outcome.match_index, id(outcome.routes))  # type: ignore[attr-defined]


def answers(router: Router) -> list[tuple[object, ...]]:
    probes = [
        (port, host, method, path)
        for port in (*PORTS, 9999)
        for host in ("a.example.com", "b.example.com", "x.b.example.com", "y.x.b.example.com")
        for method in METHODS
        for path in PATHS
    ]
    return [answer(router.match(*probe)) for probe in probes]


A, B, C = routes("a.example.com"), routes("b.example.com"), routes("*.example.com")


# ----------------------------------------------------------------------------- reuse


def test_host_tables_built_from_the_same_objects_are_reused() -> None:
    before = compile_router([A, B, C])
    after = compile_router([A, routes("b.example.com", rule("b2")), C], before)
    assert host_table(after, "a.example.com") is host_table(before, "a.example.com")
    assert host_table(after, "*.example.com") is host_table(before, "*.example.com")
    assert host_table(after, "b.example.com") is not host_table(before, "b.example.com")


EDITED_A = routes("a.example.com", rule("a2"))
OTHER_TABLE_A = routes("a.example.com", rule("ingress-a"), table="ingress")


@pytest.mark.parametrize(
    ("before", "now", "rebuilt"),
    [
        pytest.param([A, B], [EDITED_A, B], True, id="an-edited-resource-rebuilds-its-host"),
        pytest.param([A, B], [A, OTHER_TABLE_A, B], True, id="a-host-gaining-a-resource"),
        pytest.param([A, OTHER_TABLE_A, B], [A, B], True, id="a-host-losing-a-resource"),
        pytest.param([A, OTHER_TABLE_A], [OTHER_TABLE_A, A], True, id="a-host-reordered"),
        pytest.param([A, B], [B, A], False, id="other-hosts-moving-leave-a-host-alone"),
    ],
)
def test_a_host_is_rebuilt_exactly_when_its_resources_change(
    before: list[Resource], now: list[Resource], rebuilt: bool
) -> None:
    previous = compile_router(before)
    after = compile_router(now, previous)
    reused = host_table(after, "a.example.com") is host_table(previous, "a.example.com")
    assert reused is not rebuilt
    assert answers(after) == answers(compile_router(now))


def test_a_removed_host_falls_through_and_the_previous_router_is_untouched() -> None:
    before = compile_router([A, B, C])
    was = answers(before)
    after = compile_router([A, C], before)
    served = after.match(80, "b.example.com", "GET", "/")
    assert not isinstance(served, Miss) and served.routes is C
    assert answers(before) == was
    assert answers(after) == answers(compile_router([A, C]))


def test_a_removed_port_is_gone() -> None:
    elsewhere = routes("a.example.com", port=8080)
    before = compile_router([A, elsewhere])
    after = compile_router([A], before)
    assert after.ports == frozenset({80})


def test_a_reused_table_keeps_its_weighted_picker() -> None:
    # Its round-robin position carries over: a delta elsewhere does not restart the rotation.
    before = compile_router([A, B])
    after = compile_router([A, C], before)
    picked = before.match(80, "a.example.com", "GET", "/")
    assert not isinstance(picked, Miss)
    kept = after.match(80, "a.example.com", "GET", "/")
    assert not isinstance(kept, Miss) and kept.backends is picked.backends


# -------------------------------------------------------------------- generated edits

rules = st.builds(
    rule,
    name=st.sampled_from(("r1", "r2", "r3")),
    path=st.sampled_from(PATHS),
    kind=st.sampled_from((PathType.PATH_PREFIX, PathType.EXACT)),
    method=st.sampled_from(("", "GET", "POST")),
)
host_routes = st.builds(
    HostRoutes,
    table=st.sampled_from(("gateway/default/gw", "gateway/other/gw", "ingress")),
    bind_port=st.sampled_from(PORTS),
    host=st.sampled_from(HOSTS),
    rules=st.lists(rules, min_size=1, max_size=3).map(tuple),
    wildcard_scope=st.sampled_from(tuple(WildcardScope)),
)
# An edit puts a resource under its key (adding or replacing it), or removes the n-th key.
edits = st.lists(st.one_of(host_routes, st.integers(min_value=0, max_value=20)), max_size=12)


def apply(held: dict[str, HostRoutes], edit: HostRoutes | int) -> dict[str, HostRoutes]:
    """The next snapshot's resources, in the order the proxy's staging keeps them."""
    after = dict(held)
    if isinstance(edit, int):
        if after:
            del after[list(after)[edit % len(after)]]
    else:
        after[edit.key] = edit
    return after


def touched(before: dict[str, HostRoutes], after: dict[str, HostRoutes]) -> list[HostRoutes]:
    """The objects a delta replaced or removed, and those that replace them or are new."""
    old = [r for key, r in before.items() if after.get(key) is not r]
    return old + [r for key, r in after.items() if before.get(key) is not r]


def run(initial: Sequence[HostRoutes], steps: Sequence[HostRoutes | int]) -> None:
    held = {r.key: r for r in initial}
    router = patched = compile_router(held.values())
    for edit in steps:
        before, held = held, apply(held, edit)
        router = compile_router(held.values(), router)
        patched = patch_router(patched, held, touched(before, held), ())
        fresh = answers(compile_router(held.values()))
        assert answers(router) == fresh
        assert answers(patched) == fresh
        assert patched.ports == router.ports


@settings(max_examples=200, deadline=None)
@given(initial=st.lists(host_routes, max_size=10), steps=edits)
def test_an_incremental_build_answers_like_a_build_from_scratch(
    initial: list[HostRoutes], steps: list[HostRoutes | int]
) -> None:
    run(initial, steps)


def test_a_port_a_patch_opens_is_fenced_by_its_listeners() -> None:
    # Listener isolation on a port that had no routes: the patch fences it as a build does.
    gateway = GatewayListeners(
        "default",
        "gw",
        1,
        (
            Listener("exact", 80, 80, ListenerProtocol.HTTP, "x.b.example.com"),
            Listener("wild", 80, 80, ListenerProtocol.HTTP, "*.b.example.com"),
        ),
    )
    wild = routes("*.b.example.com")
    empty = compile_router([gateway])
    patched = patch_router(empty, {wild.key: wild}, [wild], [gateway])
    fresh = compile_router([gateway, wild])
    assert answers(patched) == answers(fresh)
    # The exact listener claims its host: the wildcard's routes do not serve it.
    assert patched.match(80, "x.b.example.com", "GET", "/") == fresh.match(
        80, "x.b.example.com", "GET", "/"
    )
    assert isinstance(patched.match(80, "x.b.example.com", "GET", "/"), Miss)


def test_a_patched_host_keeps_its_resources_in_snapshot_order() -> None:
    # The first of a host's resources sets its wildcard scope: replacing it must not move it.
    one_label = HostRoutes("gateway/default/gw", 80, "*.example.com", (rule("one"),),
                           wildcard_scope=WildcardScope.ONE_LABEL)  # fmt: skip
    any_labels = routes("*.example.com", rule("any"), table="ingress")
    edited = HostRoutes("gateway/default/gw", 80, "*.example.com", (rule("edited"),),
                        wildcard_scope=WildcardScope.ONE_LABEL)  # fmt: skip
    before = {r.key: r for r in (one_label, any_labels)}
    after = {**before, edited.key: edited}
    patched = patch_router(compile_router(before.values()), after, [one_label, edited], ())
    probe = (80, "deep.x.example.com", "GET", "/")
    assert answer(patched.match(*probe)) == answer(compile_router(after.values()).match(*probe))
