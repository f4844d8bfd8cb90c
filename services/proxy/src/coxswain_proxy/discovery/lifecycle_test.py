"""The client's pure decisions: what a stream's final status means, which phase moves are
legal, and how endpoint flags parse. Leaves out acting on them (client_test.py)."""

from __future__ import annotations

import grpc
import pytest

from coxswain_proxy.discovery import endpoints, failures
from coxswain_proxy.discovery.lifecycle import TRANSITIONS, Lifecycle, Phase, Verdict, classify

Code = grpc.StatusCode


@pytest.mark.parametrize(
    ("code", "details", "verdict"),
    [
        pytest.param(
            Code.FAILED_PRECONDITION, "not the leader", Verdict.NOT_LEADER, id="standby-fast-retry"
        ),
        pytest.param(
            Code.FAILED_PRECONDITION,
            "wire version mismatch: the proxy speaks 1, this controller speaks 2",
            Verdict.STOP,
            id="wire-version-stops",
        ),
        pytest.param(
            Code.FAILED_PRECONDITION,
            "something else",
            Verdict.RETRY,
            id="other-precondition-backs-off",
        ),
        pytest.param(Code.PERMISSION_DENIED, "scope", Verdict.RETRY, id="permission-backs-off"),
        pytest.param(Code.INVALID_ARGUMENT, "", Verdict.RETRY, id="invalid-argument-backs-off"),
        pytest.param(Code.ALREADY_EXISTS, "", Verdict.RETRY, id="already-exists-backs-off"),
        pytest.param(
            Code.UNAVAILABLE,
            "not the leader",
            Verdict.RETRY,
            id="only-failed-precondition-means-standby",
        ),
        pytest.param(Code.OK, "", Verdict.RETRY, id="clean-end-backs-off"),
    ],
)
def test_classify(code: grpc.StatusCode, details: str, verdict: Verdict) -> None:
    assert classify(code, details) is verdict


def test_stopped_is_final() -> None:
    assert TRANSITIONS[Phase.STOPPED] == frozenset()


def test_an_unlisted_transition_is_refused() -> None:
    lifecycle = Lifecycle()
    with pytest.raises(RuntimeError, match="starting -> streaming"):
        lifecycle.enter(Phase.STREAMING)


@pytest.mark.parametrize(
    ("text", "parsed"),
    [
        pytest.param("controller:50051", [("controller", 50051)], id="host-port"),
        pytest.param("https://a:1, https://b:2", [("a", 1), ("b", 2)], id="https-list"),
        pytest.param("[::1]:50051", [("::1", 50051)], id="ipv6"),
    ],
)
def test_endpoints_parse(text: str, parsed: list[tuple[str, int]]) -> None:
    assert [(e.host, e.port) for e in endpoints.parse(text)] == parsed


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("http://controller:50051", id="plaintext-refused"),
        pytest.param("controller", id="no-port"),
        pytest.param("controller:port", id="bad-port"),
        pytest.param(" , ", id="empty"),
    ],
)
def test_bad_endpoints_are_refused(text: str) -> None:
    with pytest.raises(failures.ConfigError):
        endpoints.parse(text)


def test_ipv6_targets_are_bracketed() -> None:
    assert endpoints.Endpoint("::1", 50051).target == "[::1]:50051"
