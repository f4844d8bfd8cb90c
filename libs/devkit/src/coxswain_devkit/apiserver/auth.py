"""ServiceAccount tokens: TokenRequest issues them, TokenReview validates them.

This is the pair the identity service relies on: a proxy's projected token (audience
`coxswain-discovery`) goes to TokenReview, which answers who it belongs to. A token is a JWT
(HS256 with a key that lives as long as this emulator) carrying the same claims kube-apiserver
puts in one. A review authenticates it only if the signature holds, it has not expired by the
injected clock, one of its audiences is among those asked for, and the ServiceAccount it names
still exists with the same uid (and the bound Pod, if any) — the checks the real server makes.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
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
AUTH_API = "authentication.k8s.io/v1"


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
            "groups": [
                "system:serviceaccounts",
                f"system:serviceaccounts:{namespace}",
                "system:authenticated",
            ],
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
    return {
        "iss": ISSUER,
        "sub": f"system:serviceaccount:{meta['namespace']}:{meta['name']}",
        "aud": spec["audiences"],
        "iat": now,
        "nbf": now,
        "exp": now + spec["expirationSeconds"],
        "kubernetes.io": bound,
    }
