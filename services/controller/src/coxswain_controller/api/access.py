"""Who may read the API: a bearer token checked by TokenReview, then authorised.

Authorisation is against a virtual resource, `get` on `controller-api` in the group
`coxswain-labs.dev`, with one subresource per area (`SUBRESOURCES`). Two modes
(`--api-authorization`):
- `sar` (default): a SubjectAccessReview asks the API server, so ordinary RBAC grants access
  (a ClusterRole with `apiGroups: [coxswain-labs.dev], resources: [controller-api/fleet, ...],
  verbs: [get]`);
- `allowlist`: the reviewed user must be in `--api-allowed-users` or one of its groups in
  `--api-allowed-groups` (for API servers without SubjectAccessReview).
A missing or rejected token answers 401, an authenticated but unauthorised one 403. Decisions
are cached by the token's SHA-256 for `CACHE_SECONDS`, so a page that calls the API several
times costs one review.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from coxswain_controller.api.context import Parts, error
from coxswain_controller.kube import api as kube

__all__ = ["Access", "Settings", "add_arguments", "SUBRESOURCES"]

GROUP = "coxswain-labs.dev"
RESOURCE = "controller-api"
VERB = "get"
SUBRESOURCES = ("fleet", "routing", "manifests", "explain", "logs")
CACHE_SECONDS = 10.0
CACHE_ENTRIES = 1024


@dataclass(frozen=True)
class Settings:
    mode: str = "sar"  # "sar" or "allowlist"
    users: frozenset[str] = frozenset()
    groups: frozenset[str] = frozenset()

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> Settings:
        return cls(
            mode=args.api_authorization,
            users=frozenset(u for u in args.api_allowed_users.split(",") if u),
            groups=frozenset(g for g in args.api_allowed_groups.split(",") if g),
        )


def add_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("operator API access (/api/v1 beyond health)")
    group.add_argument(
        "--api-authorization",
        choices=("sar", "allowlist"),
        default="sar",
        help="sar: SubjectAccessReview on coxswain-labs.dev controller-api/<area>, verb get; "
        "allowlist: the TokenReview'd user must be in --api-allowed-users/--api-allowed-groups",
    )
    group.add_argument("--api-allowed-users", default="", help="comma-separated user names")
    group.add_argument("--api-allowed-groups", default="", help="comma-separated group names")


@dataclass
class Access:
    parts: Parts
    settings: Settings = field(default_factory=Settings)
    clock: Callable[[], float] = time.monotonic
    _cache: dict[tuple[str, str], tuple[float, int, str]] = field(default_factory=dict)

    def guard(
        self, subresource: str, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> Callable[[web.Request], Awaitable[web.StreamResponse]]:
        async def guarded(request: web.Request) -> web.StreamResponse:
            status, message = await self.decide(
                request.headers.get("Authorization", ""), subresource
            )
            if status != 200:
                reason = "Unauthorized" if status == 401 else "Forbidden"
                if status == 503:
                    reason = "ReviewUnavailable"
                response = error(status, reason, message)
                if status == 401:
                    response.headers["WWW-Authenticate"] = 'Bearer realm="coxswain-controller"'
                return response
            return await handler(request)

        return guarded

    async def decide(self, authorization: str, subresource: str) -> tuple[int, str]:
        scheme, _, token = authorization.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            return 401, "a bearer token is required (Authorization: Bearer <token>)"
        key = (hashlib.sha256(token.strip().encode()).hexdigest(), subresource)
        now = self.clock()
        held = self._cache.get(key)
        if held is not None and held[0] > now:
            return held[1], held[2]
        status, message = await self._review(token.strip(), subresource)
        if status != 503:  # an outage is not remembered
            if len(self._cache) >= CACHE_ENTRIES:
                self._cache.clear()
            self._cache[key] = (now + CACHE_SECONDS, status, message)
        return status, message

    async def _review(self, token: str, subresource: str) -> tuple[int, str]:
        client = self.parts.client
        if client is None:
            return 503, "no Kubernetes API to review tokens with"
        try:
            reviewed = await asyncio.to_thread(_token_review, client, token)
        except kube.KubeError as err:
            return 503, f"TokenReview failed: {err}"
        status = reviewed.get("status") or {}
        if not status.get("authenticated"):
            return 401, f"the token was not accepted: {status.get('error') or 'unauthenticated'}"
        user = status.get("user") or {}
        name, groups = str(user.get("username", "")), [str(g) for g in user.get("groups") or []]
        if self.settings.mode == "allowlist":
            if name in self.settings.users or self.settings.groups.intersection(groups):
                return 200, "allowed"
            return 403, f"{name} is not in --api-allowed-users or --api-allowed-groups"
        try:
            allowed = await asyncio.to_thread(_access_review, client, user, subresource)
        except kube.KubeError as err:
            return 503, f"SubjectAccessReview failed: {err}"
        if allowed:
            return 200, "allowed"
        return 403, f"{name} may not {VERB} {RESOURCE}/{subresource} in the group {GROUP}"


def _token_review(client: Any, token: str) -> kube.JSON:
    body = {
        "apiVersion": "authentication.k8s.io/v1",
        "kind": "TokenReview",
        "spec": {"token": token},
    }
    return kube.request(
        client, "POST", "/apis/authentication.k8s.io/v1/tokenreviews", body=body, timeout=10.0
    )


def _access_review(client: Any, user: dict[str, Any], subresource: str) -> bool:
    body = {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SubjectAccessReview",
        "spec": {
            "user": user.get("username", ""),
            "uid": user.get("uid", ""),
            "groups": list(user.get("groups") or []),
            "extra": dict(user.get("extra") or {}),
            "resourceAttributes": {
                "group": GROUP,
                "resource": RESOURCE,
                "subresource": subresource,
                "verb": VERB,
            },
        },
    }
    answer = kube.request(
        client,
        "POST",
        "/apis/authorization.k8s.io/v1/subjectaccessreviews",
        body=body,
        timeout=10.0,
    )
    return bool((answer.get("status") or {}).get("allowed"))
