"""A delta patched onto the served tables gives the tables a compile from scratch would.

Covers, through generated sequences of edits (hypothesis) over routes (header matches and h2c
backends among them), endpoint sets and listeners, each put, replaced or removed: routing
answers, rule plans, endpoint and own pickers, the match memo's exclusions, ports and stream
ports of the patched tables against `compile_tables` of the same resources with no previous
tables; that the patch is what ran (not a pass over everything); and that what a delta leaves
alone is the previous tables' own object. Leaves out serving them (swap_test.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from unittest import mock

from hypothesis import given, settings
from hypothesis import strategies as st

from coxswain_proxy.dataplane import tables
from coxswain_proxy.dataplane import testing as t
from coxswain_routing import (
    Backend,
    BackendProtocol,
    ListenerProtocol,
    Match,
    Miss,
    Outcome,
    PathMatch,
    PathType,
    Resource,
    ValueMatch,
)

OTHER = 18081
HOSTS = ("a.example.com", "b.example.com", "*.example.com", "")
SERVICES = ("a", "b", "c")


def _rule(name: str, service: str, path: str, header: bool, h2c: bool) -> t.Rule:
    headers = (ValueMatch("x-canary", "on"),) if header else ()
    match = Match(path=PathMatch(PathType.PATH_PREFIX, path), headers=headers)
    protocol = BackendProtocol.H2C if h2c else BackendProtocol.HTTP1
    backend = Backend(endpoints=f"endpoints/default/{service}/80", protocol=protocol)
    return t.rule(name, backend, match=match)


rules = st.builds(
    _rule,
    name=st.sampled_from(("r1", "r2", "r3")),
    service=st.sampled_from(SERVICES),
    path=st.sampled_from(("/", "/a", "/b")),
    header=st.booleans(),
    h2c=st.booleans(),
)
host_routes = st.builds(
    lambda host, port, rs: t.routes(host, *rs, port=port),
    st.sampled_from(HOSTS),
    st.sampled_from((t.PORT, OTHER)),
    st.lists(rules, min_size=1, max_size=2),
)
endpoint_sets = st.builds(
    lambda name, ports: t.endpoints(name, *ports),
    st.sampled_from(SERVICES),
    st.lists(st.integers(9000, 9003), min_size=1, max_size=2, unique=True),
)
gateways = st.builds(
    lambda hosts: t.listeners(*((t.PORT, ListenerProtocol.HTTP, h) for h in hosts)),
    st.lists(st.sampled_from(("a.example.com", "*.example.com", "")), min_size=1, max_size=2),
)
# An edit puts a resource under its key (adding or replacing it), or removes the n-th key.
edits = st.lists(
    st.one_of(host_routes, endpoint_sets, gateways, st.integers(0, 20)), min_size=1, max_size=10
)


def _apply(held: dict[str, Resource], edit: Resource | int) -> dict[str, Resource]:
    """The next snapshot's resources, in the order the proxy's staging keeps them."""
    after = dict(held)
    if isinstance(edit, int):
        if after:
            del after[list(after)[edit % len(after)]]
    else:
        after[edit.key] = edit
    return after


def _answer(outcome: Outcome) -> tuple[object, ...]:
    if isinstance(outcome, Miss):
        return (outcome.status, outcome.reason)
    return (id(outcome.rule), outcome.match_index, outcome.status)


def _seen(compiled: tables.Tables) -> dict[str, object]:
    """Everything a request or the listeners read, comparable across two compiles."""
    probes = [
        (port, host, "GET", path)
        for port in (t.PORT, OTHER)
        for host in ("a.example.com", "b.example.com", "c.example.com")
        for path in ("/", "/a", "/b")
    ]
    return {
        "answers": [_answer(compiled.router.match(*probe)) for probe in probes],
        "plans": compiled.plans,
        "endpoints": {k: p.origins for k, p in compiled.endpoints.items()},
        "own": {k: p.origins for k, p in compiled.own_pickers.items()},
        "no_memo": compiled.no_memo,
        "ports": compiled.ports,
        "streams": compiled.streams.ports,
    }


def _run(initial: Sequence[Resource], steps: Sequence[Resource | int]) -> None:
    held = {r.key: r for r in initial}
    served = tables.compile_tables(held, ingress={})
    for edit in steps:
        held = _apply(held, edit)
        with mock.patch.object(tables, "_whole", wraps=tables._whole) as whole:
            served = tables.compile_tables(held, ingress={}, previous=served)
        assert not whole.called  # a delta this small is patched
        assert _seen(served) == _seen(tables.compile_tables(held, ingress={}))


@settings(max_examples=150, deadline=None)
@given(initial=st.lists(st.one_of(host_routes, endpoint_sets, gateways), max_size=8), steps=edits)
def test_a_patched_delta_gives_what_a_compile_from_scratch_gives(
    initial: list[Resource], steps: list[Resource | int]
) -> None:
    _run(initial, steps)


def test_what_a_delta_leaves_alone_is_the_served_tables_own() -> None:
    route = t.routes("a.example.com", _rule("r1", "a", "/", header=True, h2c=True))
    before = {r.key: r for r in (t.HTTP_LISTENER, t.endpoints("a", 9000), route)}
    served = tables.compile_tables(before, ingress={})
    moved = {**before, "endpoints/default/a/80": t.endpoints("a", 9001)}
    after = tables.compile_tables(moved, ingress={}, previous=served)
    # Endpoints changed; routes and listeners did not.
    assert after.router is served.router and after.plans is served.plans
    assert after.ports is served.ports and after.no_memo is served.no_memo
    assert after.endpoints is not served.endpoints
    assert after.own_pickers is not served.own_pickers  # its h2c backend dials the new port
    [own] = after.own_pickers.values()
    assert [o[:2] for o in own.origins] == [("127.0.0.1", 9001)]
