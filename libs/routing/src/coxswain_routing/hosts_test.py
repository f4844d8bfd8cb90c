"""Host normalisation and the wildcard rules for Gateway API and Ingress hosts.

Covers `normalize_host` and `host_pattern_covers`. The tier order a request is resolved
through is in matcher_test.py.
"""

from __future__ import annotations

import pytest

from coxswain_routing import host_pattern_covers, normalize_host


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
