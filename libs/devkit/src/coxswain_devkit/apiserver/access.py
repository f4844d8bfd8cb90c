"""Every request's way in: who it is (authentication, impersonation), then whether it may (RBAC).

One middleware (`Access.middleware`, inside the one that writes Status bodies) does what
kube-apiserver's filter chain does before a handler runs:
1. authenticate: no credentials is the emulator's admin; a bearer token is its ServiceAccount
   or user (`auth.Tokens.authenticate`); anything else is 401 Unauthorized;
2. impersonate: `Impersonate-User` / `-Group` / `-Uid` headers (kubectl's `--as`, `--as-group`)
   make the request the named user's, once the caller is allowed the verb `impersonate` on
   `users`, `groups`, `serviceaccounts` (in the account's namespace) and `uids`;
3. authorize: the request's attributes (`attributes`, kube-apiserver's RequestInfo) against
   RBAC (`rbac.Authorizer`), 403 Forbidden when nothing allows it.

Enforcement is opt-in (`ApiServer(rbac=True)`, `coxswain-devkit apiserver --rbac`): without it
every request is allowed, as an AlwaysAllow authorizer does, and every access review answers
allowed — so tests and the stack that never set up RBAC keep working. With it, the admin (no
credentials) still may do anything, and every other identity only what its bindings grant.

The reviews are answered here too, from the same decision the requests get: SubjectAccessReview
and LocalSubjectAccessReview (for a user and groups the body names), SelfSubjectAccessReview
(`kubectl auth can-i`), SelfSubjectRulesReview (`kubectl auth can-i --list`) and
SelfSubjectReview (`kubectl auth whoami`).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from aiohttp import web

from coxswain_devkit.apiserver import errors, paths
from coxswain_devkit.apiserver.auth import (
    ANONYMOUS,
    AUTHENTICATED,
    UNAUTHENTICATED,
    InvalidToken,
    Tokens,
    User,
    service_account_groups,
)
from coxswain_devkit.apiserver.rbac import Attributes, Authorizer, Decision, forbidden
from coxswain_devkit.apiserver.registry import Kind
from coxswain_devkit.apiserver.store import Obj, Store

__all__ = ["Access", "USER", "REVIEWS", "attributes"]

# The request key the middleware sets to the user the request acts as.
USER = web.RequestKey("coxswain_devkit.user", User)

AUTHZ = "authorization.k8s.io"
# The review kinds created here, by (group, plural).
REVIEWS = frozenset(
    {
        (AUTHZ, "subjectaccessreviews"),
        (AUTHZ, "localsubjectaccessreviews"),
        (AUTHZ, "selfsubjectaccessreviews"),
        (AUTHZ, "selfsubjectrulesreviews"),
        ("authentication.k8s.io", "selfsubjectreviews"),
    }
)
_METHOD_VERBS = {"POST": "create", "PUT": "update", "PATCH": "patch"}


def _watching(query: Mapping[str, str]) -> bool:
    return query.get("watch", "").lower() in ("true", "1")


def _listed_name(query: Mapping[str, str]) -> str:
    """A list or watch names one object through `fieldSelector=metadata.name=<name>` (the
    RequestInfo rule that lets `resourceNames` grant watching a single object)."""
    names = []
    for part in query.get("fieldSelector", "").split(","):
        key, op, value = part.partition("=")
        if key.strip() == "metadata.name" and op:
            names.append(value.removeprefix("=").strip())
    return names[0] if len(names) == 1 else ""


def _verb(method: str, named: bool, query: Mapping[str, str]) -> str:
    if method in ("GET", "HEAD"):
        if _watching(query):
            return "watch"
        return "get" if named else "list"
    if method == "DELETE":
        return "delete" if named else "deletecollection"
    return _METHOD_VERBS.get(method, method.lower())


def attributes(user: User, method: str, path: str, query: Mapping[str, str]) -> Attributes:
    """kube-apiserver's RequestInfo for a request: its resource attributes, or its path."""
    target = paths.parse(path)
    if target is None:
        return Attributes(user=user, verb=method.lower(), path=path, resource_request=False)
    verb = _verb(method, bool(target.name), query)
    name = target.name or (_listed_name(query) if verb in ("list", "watch") else "")
    # A Namespace is in itself: `get namespaces/x` is a request in namespace x.
    namespace = target.namespace or (name if target.plural == "namespaces" else "")
    return Attributes(
        user=user,
        verb=verb,
        namespace=namespace,
        group=target.group,
        resource=target.plural,
        subresource=target.subresource,
        name=name,
        version=target.version,
    )


def _unauthorized() -> errors.ApiError:
    return errors.ApiError(401, "Unauthorized", "Unauthorized")


class Access:
    def __init__(self, tokens: Tokens, store: Store, *, enforce: bool) -> None:
        self._tokens = tokens
        self.authorizer = Authorizer(store)
        self.enforce = enforce  # whether RBAC decides; else every request is allowed

    def authorize(self, attrs: Attributes) -> Decision:
        return self.authorizer.authorize(attrs) if self.enforce else Decision(True)

    def _check(self, attrs: Attributes) -> None:
        decision = self.authorize(attrs)
        if not decision.allowed:
            raise forbidden(attrs, decision.reason)

    @web.middleware
    async def middleware(self, request: web.Request, handler: Any) -> web.StreamResponse:
        user = self._authenticate(request.headers.get("Authorization", ""))
        user = self._impersonate(request, user)
        self._check(attributes(user, request.method, request.path, request.query))
        request[USER] = user
        response: web.StreamResponse = await handler(request)
        return response

    def _authenticate(self, authorization: str) -> User:
        try:
            return self._tokens.authenticate(authorization)
        except InvalidToken:
            if self.enforce:
                raise _unauthorized() from None
            return self._tokens.authenticate("")  # RBAC off: a bad token is ignored, as before

    def _impersonate(self, request: web.Request, user: User) -> User:
        name = request.headers.get("Impersonate-User", "")
        groups = request.headers.getall("Impersonate-Group", [])
        uid = request.headers.get("Impersonate-Uid", "")
        if not name:
            if groups or uid:
                raise errors.bad_request(
                    "requested impersonation of groups or a uid without impersonating a user"
                )
            return user
        account = User(name).service_account()
        if account is not None:
            self._check(
                Attributes(user, "impersonate", account[0], "", "serviceaccounts", name=account[1])
            )
            groups = groups or list(service_account_groups(account[0]))
        else:
            self._check(Attributes(user, "impersonate", "", "", "users", name=name))
        for group in groups:
            self._check(Attributes(user, "impersonate", "", "", "groups", name=group))
        if uid:
            self._check(Attributes(user, "impersonate", "", "", "uids", name=uid))
        return User(name, uid, tuple(groups) + _implied_groups(name, groups))

    def review(self, kind: Kind, namespace: str, user: User, body: Any) -> Obj:
        """POST of one of `REVIEWS`: the body with its status filled in."""
        review = copy.deepcopy(body) if isinstance(body, dict) else {}
        review.update(apiVersion=kind.api_version, kind=kind.kind)
        review.setdefault("metadata", {})
        spec = review.setdefault("spec", {})
        if kind.plural == "selfsubjectreviews":
            review["status"] = {"userInfo": user.info()}
        elif kind.plural == "selfsubjectrulesreviews":
            review["status"] = self._rules(user, str(spec.get("namespace", "")))
        else:
            subject = user if kind.plural == "selfsubjectaccessreviews" else _subject(kind, spec)
            attrs = _review_attributes(kind, spec, subject, namespace)
            decision = self.authorize(attrs)
            review["status"] = {"allowed": decision.allowed, "reason": decision.reason}
            if not decision.reason:
                review["status"].pop("reason")
        return review

    def _rules(self, user: User, namespace: str) -> Obj:
        if not self.enforce:
            everything = {"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}
            return {
                "resourceRules": [everything],
                "nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["*"]}],
                "incomplete": False,
            }
        resource_rules, url_rules, missing = self.authorizer.rules_for(user, namespace)
        status: Obj = {
            "resourceRules": resource_rules,
            "nonResourceRules": url_rules,
            "incomplete": bool(missing),
        }
        if missing:
            status["evaluationError"] = ", ".join(missing)
        return status


def _implied_groups(name: str, groups: list[str]) -> tuple[str, ...]:
    """The group impersonation adds: system:authenticated, unless a group says otherwise."""
    if name == ANONYMOUS.name:
        return () if UNAUTHENTICATED in groups else (UNAUTHENTICATED,)
    return () if {AUTHENTICATED, UNAUTHENTICATED} & set(groups) else (AUTHENTICATED,)


def _invalid(kind: Kind, field: str, message: str) -> errors.ApiError:
    return errors.invalid(kind.kind, kind.group, "", [(field, message)])


def _subject(kind: Kind, spec: Obj) -> User:
    """The user a (Local)SubjectAccessReview asks about: `spec.user`, `spec.groups`, `spec.uid`."""
    name, groups = str(spec.get("user") or ""), [str(g) for g in spec.get("groups") or ()]
    if not name and not groups:
        raise _invalid(
            kind, "spec.user", 'Invalid value: "": at least one of user or group must be specified'
        )
    return User(name, str(spec.get("uid") or ""), tuple(groups))


def _review_attributes(kind: Kind, spec: Obj, user: User, namespace: str) -> Attributes:
    resource: Obj = spec.get("resourceAttributes") or {}
    url: Obj = spec.get("nonResourceAttributes") or {}
    if bool(resource) == bool(url):
        raise _invalid(
            kind,
            "spec.resourceAttributes",
            "Invalid value: exactly one of nonResourceAttributes or resourceAttributes must be "
            "specified",
        )
    if url:
        if kind.plural == "localsubjectaccessreviews":
            raise _invalid(
                kind,
                "spec.nonResourceAttributes",
                "Invalid value: disallowed on this kind of request",
            )
        verb, path = str(url.get("verb", "")), str(url.get("path", ""))
        return Attributes(user=user, verb=verb, path=path, resource_request=False)
    ns = str(resource.get("namespace") or "")
    if kind.plural == "localsubjectaccessreviews" and ns != namespace:
        raise _invalid(
            kind,
            "spec.resourceAttributes.namespace",
            "Invalid value: must match metadata.namespace",
        )
    return Attributes(
        user=user,
        verb=str(resource.get("verb", "")),
        namespace=ns,
        group=str(resource.get("group", "")),
        resource=str(resource.get("resource", "")),
        subresource=str(resource.get("subresource", "")),
        name=str(resource.get("name", "")),
        version=str(resource.get("version", "")),
    )
