"""Who is asking, and may they hold an SVID: TokenReview, then the allowlist.

The token is never trusted on its own: the API server's TokenReview (audience
`coxswain-discovery`) says whose it is. Then only proxies' ServiceAccounts may hold SVIDs: the
shared proxy's, and each dedicated proxy's `{gateway}-{gatewayclass}` in its Gateway's namespace
(GEP-1762). Gateways are read on each request rather than cached: issuance is rare, and a stale
"allowed" must not outlive the Gateway it came from.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from coxswain_identity import errors, kube, validate

AUDIENCE = "coxswain-discovery"
SA_USER_PREFIX = "system:serviceaccount:"
GATEWAY_API = ("gateway.networking.k8s.io", "v1", "gateways")


@dataclass(frozen=True, slots=True)
class ServiceAccount:
    namespace: str  # the ServiceAccount's namespace
    name: str  # its name

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}"


def review(auth: Any, token: str) -> ServiceAccount:
    """Blocking: the ServiceAccount the token belongs to, or `errors.Unauthenticated`."""
    if not token:
        raise errors.Unauthenticated("no token")
    body = {"spec": {"token": token, "audiences": [AUDIENCE]}}
    try:
        status = kube.blocking(auth.create_token_review, body).status
    except kube.ApiException as exc:
        # 401/403 here are our own credentials failing, not the caller's: retry later.
        raise errors.Unavailable(f"TokenReview failed: {exc.status} {exc.reason}") from exc
    if not status or not status.authenticated:
        # The API server's reason ("token has expired") helps the caller; bounded all the same.
        reason = validate.quote(getattr(status, "error", "") or "")
        raise errors.Unauthenticated(f"token not authenticated: {reason}")
    # A review with audiences only authenticates for those it echoes back (TokenReview API).
    if AUDIENCE not in (status.audiences or []):
        raise errors.Unauthenticated(f"token not valid for audience {AUDIENCE}")
    return _service_account(status.user.username if status.user else "")


def _service_account(username: str) -> ServiceAccount:
    namespace, _, name = username.removeprefix(SA_USER_PREFIX).partition(":")
    if not username.startswith(SA_USER_PREFIX) or not namespace or not name:
        raise errors.Unauthenticated(f"{validate.quote(username)} is not a ServiceAccount")
    return ServiceAccount(namespace, name)


@dataclass(frozen=True, slots=True)
class Allowlist:
    """Which ServiceAccounts may hold SVIDs, looked up on each request."""

    custom: Any  # a CustomObjectsApi
    shared_proxy: ServiceAccount  # --shared-proxy-service-account

    def check(self, sa: ServiceAccount) -> None:
        """Blocking: nothing if `sa` may hold an SVID, else `errors.PermissionDenied`."""
        if sa == self.shared_proxy:
            return
        # Spec 001: "The controller stamps the expected proxy ServiceAccount name
        # ({gateway-name}-{gatewayclass-name}, per GEP-1762)".
        if sa.name in self._dedicated_names(sa.namespace):
            return
        raise errors.PermissionDenied(
            f"ServiceAccount {sa} may not hold an SVID: it is neither the shared proxy's "
            f"({self.shared_proxy}) nor {{gateway}}-{{gatewayclass}} of a Gateway in {sa.namespace}"
        )

    def _dedicated_names(self, namespace: str) -> set[str]:
        group, version, plural = GATEWAY_API
        try:
            listed = kube.blocking(
                self.custom.list_namespaced_custom_object, group, version, namespace, plural
            )
        except kube.ApiException as exc:
            if kube.status_of(exc) == 404:
                return set()  # the Gateway API is not served: only the shared proxy
            raise errors.Unavailable(f"listing Gateways: {exc.status} {exc.reason}") from exc
        return {
            f"{gw['metadata']['name']}-{gw.get('spec', {}).get('gatewayClassName', '')}"
            for gw in listed.get("items", [])
            if not gw["metadata"].get("deletionTimestamp")
        }
