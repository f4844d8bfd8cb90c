"""Who is calling: ServiceAccount tokens (TokenRequest issues them, TokenReview validates them),
user tokens for tests, and the emulator's admin.

This is the pair the identity service relies on: a proxy's projected token (audience
`coxswain-discovery`) goes to TokenReview, which answers who it belongs to. A token is a JWT
(HS256 with a key that lives as long as this emulator) carrying the same claims kube-apiserver
puts in one. A review authenticates it only if the signature holds, it has not expired by the
injected clock, one of its audiences is among those asked for, and the ServiceAccount it names
still exists with the same uid (and the bound Pod, if any) — the checks the real server makes.

The same checks authenticate a request's `Authorization: Bearer <token>` (`authenticate`),
against the API server's own audience (the issuer), as kube-apiserver's ServiceAccount token
authenticator does: a token requested for `coxswain-discovery` only is not a credential for the
API. `user_token` issues a token for a plain user and groups (what a cluster's OIDC or static
token file would give); a request with no credentials at all is the emulator's admin
(`system:admin` in `system:masters`, as the kubeconfig it writes has no user), so tests and
kubectl that never sent a token keep working when RBAC is enforced (`access`).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from coxswain_devkit.apiserver import errors
from coxswain_devkit.apiserver.machinery import Machinery
from coxswain_devkit.apiserver.meta import Clock, timestamp
from coxswain_devkit.apiserver.store import Key, Obj

ISSUER = "https://kubernetes.default.svc.cluster.local"
# The audience a token gets when a TokenRequest names none, and a review checks by default.
API_AUDIENCES = (ISSUER,)
DEFAULT_EXPIRATION = 3600
MIN_EXPIRATION = 600  # "may not specify a duration less than 10 minutes"
# kube-apiserver's --service-account-extend-token-expiration (on by default): a Pod-bound token
# for the API server asked for exactly 3607 s (what the kubelet asks for its kube-api-access
# volume) is valid for a year, with a `warnafter` claim at the hour, so clients that read their
# token once keep working.
WARN_ONLY_EXPIRATION = 3607
EXTENDED_EXPIRATION = 365 * 24 * 3600
AUTH_API = "authentication.k8s.io/v1"
AUTHENTICATED = "system:authenticated"
UNAUTHENTICATED = "system:unauthenticated"
MASTERS = "system:masters"  # the privileged group: every request allowed, as kube-apiserver does
SA_PREFIX = "system:serviceaccount:"
# A user token's groups claim (tokens for plain users; ServiceAccount tokens carry none).
GROUPS_CLAIM = "devkit.coxswain-labs.dev/groups"


@dataclass(frozen=True, slots=True)
class User:
    name: str  # e.g. "system:serviceaccount:shop:proxy"
    uid: str = ""  # the ServiceAccount's uid; "" for users the emulator has no object for
    groups: tuple[str, ...] = ()  # including system:authenticated for authenticated users

    def info(self) -> dict[str, Any]:
        """As TokenReview and SelfSubjectReview put it (`UserInfo`)."""
        return {"username": self.name, "uid": self.uid, "groups": list(self.groups)}

    def service_account(self) -> tuple[str, str] | None:
        """(namespace, name) if this is a ServiceAccount's username."""
        namespace, _, name = self.name.removeprefix(SA_PREFIX).partition(":")
        if not self.name.startswith(SA_PREFIX) or not namespace or not name or ":" in name:
            return None
        return namespace, name


ADMIN = User("system:admin", groups=(MASTERS, AUTHENTICATED))
ANONYMOUS = User("system:anonymous", groups=(UNAUTHENTICATED,))


def service_account_groups(namespace: str) -> tuple[str, ...]:
    return ("system:serviceaccounts", f"system:serviceaccounts:{namespace}")


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


class InvalidToken(Exception):
    """Why a token does not authenticate; the message becomes TokenReview's status.error."""


class Tokens:
    def __init__(self, machinery: Machinery, *, clock: Clock) -> None:
        self._machinery = machinery
        self._clock = clock
        self._key = secrets.token_bytes(32)

    def request(self, namespace: str, name: str, body: Any) -> Obj:
        """POST .../serviceaccounts/<name>/token: a TokenRequest with status.token filled in."""
        sa = self._machinery.current(_sa_kind(self._machinery), namespace, name)
        spec = dict((body or {}).get("spec") or {})
        spec["audiences"] = list(spec.get("audiences") or API_AUDIENCES)
        spec["expirationSeconds"] = int(spec.get("expirationSeconds") or DEFAULT_EXPIRATION)
        if spec["expirationSeconds"] < MIN_EXPIRATION:
            raise errors.invalid(
                "TokenRequest",
                "authentication.k8s.io",
                name,
                [
                    (
                        "spec.expirationSeconds",
                        "Invalid value: may not specify a duration less than 10 minutes",
                    )
                ],
            )
        now = int(self._clock())
        claims = _claims(sa, spec, now)
        expires = now + spec["expirationSeconds"]
        return {
            "kind": "TokenRequest",
            "apiVersion": AUTH_API,
            "metadata": {
                "name": name,
                "namespace": namespace,
                "creationTimestamp": timestamp(lambda: now),
            },
            "spec": spec,
            "status": {
                "token": self._sign(claims),
                "expirationTimestamp": timestamp(lambda: expires),
            },
        }

    def review(self, body: Any) -> Obj:
        """POST tokenreviews: status.authenticated and the user, or status.error."""
        spec = dict((body or {}).get("spec") or {})
        wanted = list(spec.get("audiences") or API_AUDIENCES)
        try:
            status = self._authenticate(str(spec.get("token", "")), wanted)
        except InvalidToken as err:
            status = {"authenticated": False, "user": {}, "error": str(err)}
        return {
            "kind": "TokenReview",
            "apiVersion": AUTH_API,
            "metadata": {},
            "spec": spec,
            "status": status,
        }

    def authenticate(self, authorization: str) -> User:
        """The user an `Authorization` header names; no header at all is the admin.

        `InvalidToken` for anything else that does not authenticate (another scheme, a bad,
        expired or revoked token, or one not meant for the API server): the request is 401."""
        if not authorization:
            return ADMIN
        scheme, _, token = authorization.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise InvalidToken("only bearer tokens are accepted")
        user = self._authenticate(token.strip(), list(API_AUDIENCES))["user"]
        return User(user["username"], user["uid"], tuple(user["groups"]))

    def user_token(
        self, name: str, groups: Iterable[str] = (), *, expiration: int = DEFAULT_EXPIRATION
    ) -> str:
        """A bearer token for a plain user (not a ServiceAccount), valid for the API server and
        its TokenReview; `system:authenticated` is added to `groups` as authenticators do."""
        now = int(self._clock())
        claims = {
            "iss": ISSUER,
            "sub": name,
            "aud": list(API_AUDIENCES),
            "iat": now,
            "nbf": now,
            "exp": now + expiration,
            GROUPS_CLAIM: list(groups),
        }
        return self._sign(claims)

    def _sign(self, claims: dict[str, Any]) -> str:
        header = _b64(json.dumps({"alg": "HS256", "typ": "JWT"}).encode())
        payload = _b64(json.dumps(claims, separators=(",", ":")).encode())
        mac = hmac.new(self._key, f"{header}.{payload}".encode(), hashlib.sha256).digest()
        return f"{header}.{payload}.{_b64(mac)}"

    def _verify(self, token: str) -> dict[str, Any]:
        parts = token.split(".")
        if len(parts) != 3:
            raise InvalidToken("invalid bearer token")
        expected = hmac.new(self._key, f"{parts[0]}.{parts[1]}".encode(), hashlib.sha256).digest()
        try:
            valid = hmac.compare_digest(expected, _unb64(parts[2]))
            claims = json.loads(_unb64(parts[1])) if valid else None
        except ValueError:
            claims = None
        if not isinstance(claims, dict):
            raise InvalidToken("invalid bearer token")
        return claims

    def _authenticate(self, token: str, wanted: list[str]) -> dict[str, Any]:
        claims = self._verify(token)
        if self._clock() >= claims["exp"]:
            raise InvalidToken("invalid bearer token, token has expired")
        audiences = [a for a in wanted if a in claims["aud"]]
        if not audiences:
            raise InvalidToken(
                f"token audiences {claims['aud']} is invalid for the target audiences {wanted}"
            )
        if "kubernetes.io" not in claims:  # a user token
            groups = [g for g in claims.get(GROUPS_CLAIM, []) if g != AUTHENTICATED]
            user = {"username": claims["sub"], "uid": "", "groups": [*groups, AUTHENTICATED]}
            return {"authenticated": True, "user": user, "audiences": audiences}
        bound = claims["kubernetes.io"]
        namespace, sa = bound["namespace"], bound["serviceaccount"]
        self._check_alive(
            Key("", "serviceaccounts", namespace, sa["name"]), sa["uid"], "service account"
        )
        if "pod" in bound:
            self._check_alive(
                Key("", "pods", namespace, bound["pod"]["name"]), bound["pod"]["uid"], "pod"
            )
        user = {
            "username": claims["sub"],
            "uid": sa["uid"],
            "groups": [*service_account_groups(namespace), AUTHENTICATED],
        }
        return {"authenticated": True, "user": user, "audiences": audiences}

    def _check_alive(self, key: Key, uid: str, what: str) -> None:
        obj = self._machinery.store.get(key)
        if obj is None or obj["metadata"].get("deletionTimestamp"):
            raise InvalidToken(f"{what} {key.namespace}/{key.name} has been deleted")
        if obj["metadata"]["uid"] != uid:
            raise InvalidToken(f"{what} {key.namespace}/{key.name} uid has changed")


def _sa_kind(machinery: Machinery) -> Any:
    kind = machinery.registry.preferred("", "serviceaccounts")
    assert kind is not None
    return kind


def _claims(sa: Obj, spec: dict[str, Any], now: int) -> dict[str, Any]:
    meta = sa["metadata"]
    bound: dict[str, Any] = {
        "namespace": meta["namespace"],
        "serviceaccount": {"name": meta["name"], "uid": meta["uid"]},
    }
    ref = spec.get("boundObjectRef") or {}
    if ref.get("kind") == "Pod":
        bound["pod"] = {"name": ref.get("name", ""), "uid": ref.get("uid", "")}
    lifetime = spec["expirationSeconds"]
    if _extended(spec, bound):
        bound["warnafter"] = now + lifetime
        lifetime = EXTENDED_EXPIRATION
    return {
        "iss": ISSUER,
        "sub": f"system:serviceaccount:{meta['namespace']}:{meta['name']}",
        "aud": spec["audiences"],
        "iat": now,
        "nbf": now,
        "exp": now + lifetime,
        "kubernetes.io": bound,
    }


def _extended(spec: dict[str, Any], bound: dict[str, Any]) -> bool:
    """Whether the token is the kubelet's kube-api-access one, which the API server extends:
    bound to a Pod, asked for 3607 s, and for the API server's own audience."""
    return (
        "pod" in bound
        and spec["expirationSeconds"] == WARN_ONLY_EXPIRATION
        and set(spec["audiences"]) <= set(API_AUDIENCES)
    )
