"""Host normalisation and the wildcard rules for Gateway API and Ingress hosts.

Covers `normalize_host`, `host_pattern_covers`, and the intersection and overlap of listener
and route hostnames built on it. The tier order a request is resolved
through is in matcher_test.py.
"""

from __future__ import annotations

import pytest

from coxswain_routing import (
    host_pattern_covers,
    hostnames_overlap,
    intersect_hostnames,
    normalize_host,
)


@pytest.mark.parametrize(
    ("raw", "host"),
    [
        pytest.param("Example.COM", "example.com", id="lower-cased"),
        pytest.param("example.com:8080", "example.com", id="port-dropped"),
        pytest.param("example.com.", "example.com", id="trailing-dot-dropped"),
        pytest.param("[::1]:8443", "[::1]", id="ipv6-literal-keeps-brackets"),
        pytest.param("127.0.0.1:80", "127.0.0.1", id="ipv4-port-dropped"),
    ],
)
def test_normalize_host(raw: str, host: str) -> None:
    assert normalize_host(raw) == host


@pytest.mark.parametrize(
    ("pattern", "host", "one_label", "covers"),
    [
        pytest.param("", "anything.example", False, True, id="hostless-covers-every-host"),
        pytest.param("a.example.com", "a.example.com", False, True, id="exact-equal"),
        pytest.param("a.example.com", "b.example.com", False, False, id="exact-other"),
        pytest.param(
            "*.example.com", "shop.example.com", False, True, id="gateway-wildcard-one-label"
        ),
        pytest.param(
            "*.example.com", "deep.shop.example.com", False, True, id="gateway-wildcard-many-labels"
        ),
        pytest.param(
            "*.example.com", "example.com", False, False, id="wildcard-never-covers-the-suffix"
        ),
        pytest.param(
            "*.example.com", "badexample.com", False, False, id="wildcard-on-label-boundary"
        ),
        pytest.param("*.foo.com", "bar.foo.com", True, True, id="ingress-wildcard-one-label"),
        pytest.param(
            "*.foo.com", "baz.bar.foo.com", True, False, id="ingress-wildcard-not-two-labels"
        ),
    ],
)
def test_host_pattern_covers(pattern: str, host: str, one_label: bool, covers: bool) -> None:
    # Spec 003: "a route served on *.example.com answers shop.example.com and
    # deep.shop.example.com, but not example.com"; Ingress wildcards cover one label.
    assert host_pattern_covers(pattern, host, one_label=one_label) is covers


@pytest.mark.parametrize(
    ("listener", "route", "served"),
    [
        pytest.param("", [], [""], id="no-hostnames-anywhere-serves-every-host"),
        pytest.param("", ["b.com", "a.com", "a.com"], ["a.com", "b.com"], id="hostless-listener"),
        pytest.param("a.com", [], ["a.com"], id="hostless-route-takes-the-listeners"),
        pytest.param("a.com", ["a.com", "b.com"], ["a.com"], id="exact-kept-others-dropped"),
        pytest.param("*.a.com", ["x.a.com", "y.x.a.com"], ["x.a.com", "y.x.a.com"],
                     id="listener-wildcard-admits-any-depth"),
        pytest.param("*.a.com", ["a.com"], [], id="wildcard-never-covers-the-bare-suffix"),
        pytest.param("x.a.com", ["*.a.com"], ["x.a.com"], id="route-wildcard-narrowed"),
        pytest.param("*.a.com", ["*.x.a.com"], ["*.x.a.com"], id="narrower-route-wildcard-kept"),
        pytest.param("*.x.a.com", ["*.a.com"], ["*.x.a.com"], id="wider-route-wildcard-narrowed"),
        pytest.param("*.a.com", ["*.b.com"], [], id="disjoint-wildcards"),
    ],
)  # fmt: skip
def test_intersect_hostnames(listener: str, route: list[str], served: list[str]) -> None:
    # Spec 003 "Route attachment and hostnames".
    assert intersect_hostnames(listener, route) == served


@pytest.mark.parametrize(
    ("a", "b", "overlap"),
    [
        pytest.param("", "a.com", True, id="hostless-overlaps-everything"),
        pytest.param("a.com", "a.com", True, id="same-name"),
        pytest.param("*.a.com", "x.a.com", True, id="wildcard-covers-name"),
        pytest.param("x.a.com", "*.a.com", True, id="symmetric"),
        pytest.param("*.a.com", "*.x.a.com", True, id="nested-wildcards"),
        pytest.param("*.a.com", "a.com", False, id="bare-suffix-not-covered"),
        pytest.param("a.com", "b.com", False, id="different-names"),
    ],
)
def test_hostnames_overlap(a: str, b: str, overlap: bool) -> None:
    assert hostnames_overlap(a, b) is overlap
    assert hostnames_overlap(b, a) is overlap
