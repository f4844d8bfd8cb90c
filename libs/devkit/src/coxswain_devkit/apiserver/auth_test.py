"""TokenRequest and TokenReview through the real client, on a clock the test moves.

Covers a token's audiences and expiry, a review that authenticates it as
`system:serviceaccount:<ns>:<name>` with the ServiceAccount groups, and each reason a review
refuses: wrong audience, expired, ServiceAccount deleted, ServiceAccount recreated (new uid),
bound Pod deleted, forged token. Also the 10-minute minimum expiry (422), 404 for a missing
ServiceAccount, and the kubelet's API token (Pod-bound, 3607 s) extended to a year. Leaves out
signature algorithms: tokens are only meant for this emulator's review.
"""

from __future__ import annotations

from typing import Any

import kubernetes
import pytest
from kubernetes.client import ApiException

AUDIENCE = "coxswain-discovery"


@pytest.fixture
def auth(client: Any) -> Any:
    return kubernetes.client.AuthenticationV1Api(client)


def _token(core: Any, sa: str = "proxy", **spec: Any) -> Any:
    spec.setdefault("audiences", [AUDIENCE])
    return core.create_namespaced_service_account_token(sa, "default", {"spec": spec})


def _review(auth: Any, token: str, audiences: list[str] | None = None) -> Any:
    return auth.create_token_review(
        {"spec": {"token": token, "audiences": audiences or [AUDIENCE]}}
    ).status


@pytest.fixture
def proxy_sa(core: Any) -> Any:
    return core.create_namespaced_service_account("default", {"metadata": {"name": "proxy"}})


def test_a_requested_token_reviews_as_its_service_account(
    core: Any, auth: Any, proxy_sa: Any, clock: Any
) -> None:
    requested = _token(core, expirationSeconds=900)
    assert requested.spec.audiences == [AUDIENCE]
    assert requested.status.expiration_timestamp.timestamp() == int(clock.now) + 900
    status = _review(auth, requested.status.token)
    assert status.authenticated is True
    assert status.user.username == "system:serviceaccount:default:proxy"
    assert status.user.uid == proxy_sa.metadata.uid
    assert "system:serviceaccounts:default" in status.user.groups
    assert status.audiences == [AUDIENCE]


@pytest.mark.parametrize(
    ("spoil", "error"),
    [
        pytest.param(
            lambda ctx: ctx.update(audiences=["someone-else"]), "audiences", id="wrong-audience"
        ),
        pytest.param(
            lambda ctx: setattr(ctx["clock"], "now", ctx["clock"].now + 3601),
            "expired",
            id="expired",
        ),
        pytest.param(
            lambda ctx: ctx["core"].delete_namespaced_service_account("proxy", "default"),
            "deleted",
            id="sa-deleted",
        ),
        pytest.param(
            lambda ctx: (
                ctx["core"].delete_namespaced_service_account("proxy", "default"),
                ctx["core"].create_namespaced_service_account(
                    "default", {"metadata": {"name": "proxy"}}
                ),
            ),
            "uid",
            id="sa-recreated",
        ),
        pytest.param(
            lambda ctx: ctx.update(token=ctx["token"][:-4] + "AAAA"),
            "invalid",
            id="forged-signature",
        ),
        pytest.param(lambda ctx: ctx.update(token="not-a-jwt"), "invalid", id="not-a-token"),
    ],
)
def test_reviews_refuse(
    core: Any, auth: Any, proxy_sa: Any, clock: Any, spoil: Any, error: str
) -> None:
    ctx: dict[str, Any] = {
        "core": core,
        "clock": clock,
        "token": _token(core).status.token,
        "audiences": [AUDIENCE],
    }
    spoil(ctx)
    status = _review(auth, ctx["token"], ctx["audiences"])
    assert not status.authenticated
    assert error in status.error


def test_a_token_bound_to_a_pod_dies_with_it(core: Any, auth: Any, proxy_sa: Any) -> None:
    pod = core.create_namespaced_pod(
        "default",
        {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "i"}]}},
    )
    ref = {"kind": "Pod", "apiVersion": "v1", "name": "p", "uid": pod.metadata.uid}
    token = _token(core, boundObjectRef=ref).status.token
    assert _review(auth, token).authenticated is True
    core.delete_namespaced_pod("p", "default")
    assert "deleted" in _review(auth, token).error


def test_default_audience_is_the_api_servers(core: Any, auth: Any, proxy_sa: Any) -> None:
    token = core.create_namespaced_service_account_token(
        "proxy", "default", {"spec": {}}
    ).status.token
    assert auth.create_token_review({"spec": {"token": token}}).status.authenticated is True
    assert not _review(auth, token, [AUDIENCE]).authenticated


@pytest.mark.parametrize(
    ("seconds", "audiences", "valid_after_two_hours"),
    [
        pytest.param(3607, [], True, id="kubelet-api-token-extended-to-a-year"),
        pytest.param(3600, [], False, id="another-lifetime-not-extended"),
        pytest.param(3607, [AUDIENCE], False, id="another-audience-not-extended"),
    ],
)
def test_the_kubelets_api_token_is_extended(
    core: Any,
    auth: Any,
    proxy_sa: Any,
    clock: Any,
    seconds: int,
    audiences: list[str],
    valid_after_two_hours: bool,
) -> None:
    """kube-apiserver's --service-account-extend-token-expiration: the status still says the
    hour asked for, the token itself holds for a year."""
    pod = core.create_namespaced_pod(
        "default",
        {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "i"}]}},
    )
    ref = {"kind": "Pod", "apiVersion": "v1", "name": "p", "uid": pod.metadata.uid}
    requested = _token(core, audiences=audiences, expirationSeconds=seconds, boundObjectRef=ref)
    assert requested.status.expiration_timestamp.timestamp() == int(clock.now) + seconds
    clock.now += 2 * 3600
    review = {"token": requested.status.token, **({"audiences": audiences} if audiences else {})}
    assert auth.create_token_review({"spec": review}).status.authenticated is valid_after_two_hours


@pytest.mark.parametrize(
    ("sa", "spec", "code"),
    [
        pytest.param("proxy", {"expirationSeconds": 60}, 422, id="under-ten-minutes"),
        pytest.param("missing", {}, 404, id="no-such-service-account"),
    ],
)
def test_token_request_errors(
    core: Any, proxy_sa: Any, sa: str, spec: dict[str, Any], code: int
) -> None:
    with pytest.raises(ApiException) as raised:
        _token(core, sa, **spec)
    assert raised.value.status == code
