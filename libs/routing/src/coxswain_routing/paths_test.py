"""Path normalisation and the segment-aware prefix rule, one case per rule.

Covers `normalize_path` (percent-decoding of unreserved characters only, `%2F` kept, dot
segments, empty path), `prefix_covers` and `path_prefixes`. How the matcher uses them is in
matcher_test.py.
"""

from __future__ import annotations

import pytest

from coxswain_routing import normalize_path, prefix_covers
from coxswain_routing._paths import path_prefixes


@pytest.mark.parametrize(
    ("raw", "normalized"),
    [
        pytest.param("/api/orders", "/api/orders", id="plain-path-unchanged"),
        pytest.param("", "/", id="empty-path-is-root"),
        pytest.param("/%61pi", "/api", id="unreserved-letter-decoded"),
        pytest.param("/a%2Db%5Fc%7Ed%2Ee", "/a-b_c~d.e", id="unreserved-punctuation-decoded"),
        pytest.param("/a%2fb", "/a%2Fb", id="encoded-slash-never-decoded-hex-upper-cased"),
        pytest.param("/a%2Fb/../c", "/c", id="encoded-slash-stays-inside-its-segment"),
        pytest.param("/a%20b", "/a%20b", id="reserved-or-space-kept-encoded"),
        pytest.param("/a%3f", "/a%3F", id="encoded-question-mark-kept"),
        pytest.param("/a/./b", "/a/b", id="single-dot-segment-removed"),
        pytest.param("/a/b/../c", "/a/c", id="double-dot-removes-previous-segment"),
        pytest.param("/../../etc", "/etc", id="double-dot-never-climbs-above-root"),
        pytest.param("/a/..", "/", id="trailing-double-dot-keeps-a-directory"),
        pytest.param("/a/.", "/a/", id="trailing-dot-keeps-a-directory"),
        pytest.param("/%2E%2E/admin", "/admin", id="encoded-dots-decoded-then-removed"),
        pytest.param(
            "/.well-known/x", "/.well-known/x", id="dot-prefixed-name-is-not-a-dot-segment"
        ),
        pytest.param("/a//b", "/a//b", id="repeated-slashes-kept"),
        pytest.param("/a%zz", "/a%zz", id="malformed-percent-left-alone"),
    ],
)
def test_normalize_path(raw: str, normalized: str) -> None:
    assert normalize_path(raw) == normalized


@pytest.mark.parametrize(
    ("prefix", "path", "covers"),
    [
        pytest.param("/foo", "/foo", True, id="prefix-matches-itself"),
        pytest.param("/foo", "/foo/", True, id="prefix-matches-with-trailing-slash"),
        pytest.param("/foo", "/foo/bar", True, id="prefix-matches-a-child-segment"),
        pytest.param("/foo", "/foobar", False, id="prefix-never-matches-inside-a-segment"),
        pytest.param("/", "/anything", True, id="root-prefix-matches-everything"),
        pytest.param("/foo/bar", "/foo", False, id="longer-prefix-does-not-match-parent"),
    ],
)
def test_prefix_covers_whole_segments(prefix: str, path: str, covers: bool) -> None:
    # Spec 003: "/foo matches /foo and /foo/bar but never /foobar".
    assert prefix_covers(prefix, path) is covers


@pytest.mark.parametrize(
    ("path", "prefixes"),
    [
        pytest.param("/", ["/"], id="root"),
        pytest.param("/a/b/c", ["/a/b/c", "/a/b", "/a", "/"], id="three-segments"),
        pytest.param("/a/b/", ["/a/b", "/a", "/"], id="trailing-slash-means-nothing"),
    ],
)
def test_path_prefixes_longest_first(path: str, prefixes: list[str]) -> None:
    assert path_prefixes(path) == prefixes
