"""The watches of the Secrets basic auth and the TLS annotations name, against the emulated API
server.

Covers their lifecycle: a watch starts when an Ingress of ours (its own annotations, or its
class's defaultAnnotations) or a CoxswainPolicy names a Secret, and stops, taking the Secret
out of the cache, when the last one stops naming it; one watch per Secret however many name
it; edits and deletes of the Secret reach the cache; an Ingress of another controller's class
starts none; a kubernetes.io/tls Secret named so stays the TLS watch's; every request is the
named Secret's own list or watch, in its namespace; auth-tls-secret and proxy-ssl-secret are
watched as auth-secret is, never in another namespace. What translation makes of the Secret is
basic_auth_process_test's and the goldens'.
"""

from __future__ import annotations

import asyncio
import base64
from typing import Any

import pytest

from coxswain_controller.kube import api as kube
from coxswain_controller.sources import kinds, supervisor
from coxswain_controller.sources.conftest import FAST, bounded, names, until
from coxswain_devkit import crds
from coxswain_devkit.apiserver import ApiServer

PREFIX = "nginx.ingress.kubernetes.io/"
INGRESSES = "/apis/networking.k8s.io/v1/namespaces/shop/ingresses"


def _secret(name: str, kind: str = "Opaque", data: str = "alice") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": kind,
        "metadata": {"name": name, "namespace": "shop"},
        "data": {"auth": base64.b64encode(data.encode()).decode()},
    }


def _class(name: str, controller: str, parameters: str = "") -> dict[str, Any]:
    spec: dict[str, Any] = {"controller": controller}
    if parameters:
        spec["parameters"] = {
            "apiGroup": "coxswain-labs.dev",
            "kind": "CoxswainIngressClassParameters",
            "name": parameters,
        }
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "IngressClass",
        "metadata": {"name": name},
        "spec": spec,
    }


def _ingress(name: str, secret: str | None, ingress_class: str = "coxswain") -> dict[str, Any]:
    annotations = {PREFIX + "auth-type": "basic", PREFIX + "auth-secret": secret} if secret else {}
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "Ingress",
        "metadata": {"name": name, "namespace": "shop", "annotations": annotations},
        "spec": {
            "ingressClassName": ingress_class,
            "defaultBackend": {"service": {"name": "web", "port": {"number": 80}}},
        },
    }


def _policy(name: str, secret: str) -> dict[str, Any]:
    return {
        "apiVersion": "coxswain-labs.dev/v1alpha1",
        "kind": "CoxswainPolicy",
        "metadata": {"name": name, "namespace": "shop"},
        "spec": {
            "targetRefs": [{"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": "g"}],
            "basicAuth": {"secretRef": {"name": secret}},
        },
    }


CLASSES = [
    {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "shop"}},
    _class("coxswain", "coxswain-labs.dev/ingress-controller"),
    _class("nginx", "k8s.io/ingress-nginx"),
]


def watched(sources: supervisor.Sources) -> set[str]:
    return {name for _, name in sources.secrets.watched}


async def _delete(client: Any, path: str) -> None:
    await asyncio.to_thread(kube.request, client, "DELETE", path)


async def test_a_named_secret_is_watched_while_named_and_only_it(
    api: ApiServer, client: Any, sources: supervisor.Sources
) -> None:
    api.apply(
        [*CLASSES, _secret("staff"), _secret("unnamed"), _secret("cert", kinds.TLS_SECRET_TYPE)]
    )
    api.apply(
        [_ingress("a", "staff"), _ingress("b", "staff"), _ingress("other", "unnamed", "nginx")]
    )
    await until(sources, lambda s: names(s, "Secret") == {"staff", "cert"})
    assert watched(sources) == {"staff"}  # one watch for two Ingresses; none for nginx's
    (watch,) = sources.secrets.watched.values()
    assert watch.kind.path == "/api/v1/namespaces/shop/secrets"

    api.apply([_secret("staff", data="bob")])  # an edit reaches the cache
    await until(sources, lambda s: _data(s, "staff") == "bob")

    await _delete(client, f"{INGRESSES}/a")  # still named by b
    await until(sources, lambda _: "a" not in names(sources.cache.snapshot(), "Ingress"))
    assert watched(sources) == {"staff"}
    await _delete(client, f"{INGRESSES}/b")
    await until(sources, lambda s: names(s, "Secret") == {"cert"} and not watched(sources))


async def test_a_changed_reference_moves_the_watch_and_a_deleted_secret_leaves(
    api: ApiServer, client: Any, sources: supervisor.Sources
) -> None:
    api.apply([*CLASSES, _secret("old"), _secret("new"), _ingress("a", "old")])
    await until(sources, lambda s: names(s, "Secret") == {"old"})
    api.apply([_ingress("a", "new")])
    await until(sources, lambda s: names(s, "Secret") == {"new"} and watched(sources) == {"new"})

    await _delete(client, "/api/v1/namespaces/shop/secrets/new")
    await until(sources, lambda s: not names(s, "Secret"))
    assert watched(sources) == {"new"}  # still named: watched, so its return is seen
    api.apply([_secret("new", data="back")])
    await until(sources, lambda s: _data(s, "new") == "back")


async def test_a_class_default_or_a_policy_names_a_secret_too(
    api: ApiServer, client: Any, sources: supervisor.Sources
) -> None:
    parameters = {
        "apiVersion": "coxswain-labs.dev/v1alpha1",
        "kind": "CoxswainIngressClassParameters",
        "metadata": {"name": "auth"},
        "spec": {"defaultAnnotations": {PREFIX + "auth-type": "basic",
                                        PREFIX + "auth-secret": "from-class"}},
    }  # fmt: skip
    for crd in crds.coxswain():
        await asyncio.to_thread(kube.request, client, "POST", kinds.CRD.path, body=crd)
    await until(sources, lambda s: "CoxswainPolicy" in s.served)
    api.apply([CLASSES[0], _class("coxswain", "coxswain-labs.dev/ingress-controller", "auth")])
    api.apply([parameters])
    api.apply([_secret("from-class"), _secret("from-policy"), _ingress("plain", None)])
    api.apply([_policy("p", "from-policy")])
    await until(sources, lambda s: names(s, "Secret") == {"from-class", "from-policy"})

    # The class stops naming parameters: its Ingress's defaults go, and with them the Secret.
    api.apply([_class("coxswain", "coxswain-labs.dev/ingress-controller")])
    await until(sources, lambda s: names(s, "Secret") == {"from-policy"})
    await _delete(client, "/apis/coxswain-labs.dev/v1alpha1/namespaces/shop/coxswainpolicies/p")
    await until(sources, lambda s: not names(s, "Secret") and not watched(sources))


async def test_a_named_tls_secret_stays_the_tls_watchs(
    api: ApiServer, client: Any, sources: supervisor.Sources
) -> None:
    api.apply([*CLASSES, _secret("cert", kinds.TLS_SECRET_TYPE), _ingress("a", "cert")])
    await until(sources, lambda _: watched(sources) == {"cert"})
    await until(sources, lambda s: names(s, "Secret") == {"cert"})
    await _delete(client, f"{INGRESSES}/a")
    await until(sources, lambda _: not watched(sources))
    assert names(sources.cache.snapshot(), "Secret") == {"cert"}  # the TLS watch still has it


async def test_the_tls_annotations_secrets_are_watched_but_not_another_namespaces(
    api: ApiServer, client: Any, sources: supervisor.Sources
) -> None:
    tls = _ingress("tls", None)
    tls["metadata"]["annotations"] = {
        PREFIX + "auth-tls-secret": "shop/client-ca",
        PREFIX + "backend-protocol": "HTTPS",
        PREFIX + "proxy-ssl-secret": "backend-ca",
        PREFIX + "proxy-ssl-verify": "on",
        PREFIX + "proxy-ssl-name": "web.shop",
    }
    elsewhere = _ingress("elsewhere", None)
    elsewhere["metadata"]["annotations"] = {PREFIX + "auth-tls-secret": "other/client-ca"}
    api.apply([*CLASSES, _secret("client-ca"), _secret("backend-ca"), tls, elsewhere])
    await until(sources, lambda s: names(s, "Secret") == {"client-ca", "backend-ca"})
    assert watched(sources) == {"client-ca", "backend-ca"}  # none in namespace "other"
    api.apply([_secret("client-ca", data="edited")])  # a new ca.crt reaches the cache
    await until(sources, lambda s: _data(s, "client-ca") == "edited")
    await _delete(client, f"{INGRESSES}/tls")
    await until(sources, lambda s: not names(s, "Secret") and not watched(sources))


@pytest.mark.parametrize("first", ["ingress", "secret"], ids=["ingress-first", "secret-first"])
async def test_a_secret_named_after_sync_is_in_the_first_change_announced(
    api: ApiServer, client: Any, first: str
) -> None:
    running = supervisor.Sources(client, settings=FAST)
    running.start()
    try:
        api.apply(CLASSES)
        await bounded(running.cache.synced.wait())
        objects = [_ingress("a", "staff"), _secret("staff")]
        api.apply(objects if first == "ingress" else objects[::-1])
        # Whenever a change is announced with the Ingress naming the Secret, the Secret is in.
        while "a" not in names(running.cache.snapshot(), "Ingress"):
            running.cache.changed.clear()
            await bounded(running.cache.changed.wait())
        assert "staff" in names(running.cache.snapshot(), "Secret")
    finally:
        await running.stop()


def _data(snapshot: Any, name: str) -> str:
    found = snapshot.of("Secret").get(("shop", name))
    return base64.b64decode(found["data"]["auth"]).decode() if found else ""
