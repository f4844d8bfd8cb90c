"""`/api/v1/migration/ingresses[/{ns}/{name}]`: the migration report over the cluster's Ingresses.

The same report as `coxswain-controller translate -f FILE --migration-report`
(translate/ingress/report.py), run over the watch cache instead of files: for each Ingress in
the cluster, whichever class it names, every ingress-nginx annotation with its fate (honoured,
ignored or refused, and why), whether Coxswain would serve it, and the equivalent HTTPRoutes
and CoxswainPolicy. `gateway=[ns/]name` is the Gateway the routes attach to (default
`gateway`, as the CLI's `--report-gateway`); `format=yaml` answers the CLI's YAML stream, and
`format=manifests` only the manifests, ready for `kubectl apply -f -`.

One read beyond the cache: the controller watches the Secrets basic auth names only for the
Ingresses it serves (sources/secrets.py), so the htpasswd Secret of an Ingress still served by
another controller is fetched once per report (a GET, never watched), so that its verdict is
whether Coxswain could read it. Nothing in the answer carries a Secret's data: only its name,
in a `basicAuth.secretRef`. The report translates the whole cache, so it runs in a worker
thread, one at a time.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable
from typing import Any

import yaml
from aiohttp import web

from coxswain_controller.api.context import Parts, error, send
from coxswain_controller.kube import api as kube
from coxswain_controller.sources import cache
from coxswain_controller.translate.guard import MALFORMED
from coxswain_controller.translate.ingress import report
from coxswain_controller.translate.ingress.annotations import policy as ingress_annotations
from coxswain_controller.translate.ingress.annotations.catalog import PREFIX
from coxswain_controller.translate.inputs import KINDS, Obj, meta, namespace

log = logging.getLogger(__name__)

__all__ = ["Migration"]

FORMATS = ("json", "yaml", "manifests")


class Migration:
    def __init__(self, parts: Parts) -> None:
        self._parts = parts
        self._running = asyncio.Lock()  # a report translates everything: one at a time

    async def answer(self, request: web.Request) -> web.Response:
        query, info = request.query, request.match_info
        gateway = _gateway_ref(query.get("gateway", "gateway"))
        shape = query.get("format", "json")
        if gateway is None:
            return error(400, "BadRequest", "gateway is NAME or NAMESPACE/NAME")
        if shape not in FORMATS:
            return error(400, "BadRequest", f"format is one of {', '.join(FORMATS)}")
        sources = self._parts.sources
        if sources is None or not sources.cache.synced.is_set():
            return error(503, "NoCache", "the controller has no synced watch cache to report on")
        async with self._running:
            entries = await self._report(sources.cache.snapshot(), gateway)
        if "name" in info:
            wanted = f"{info['namespace']}/{info['name']}"
            entries = [e for e in entries if e["ingress"] == wanted]
            if not entries:
                return error(404, "NotFound", f"no Ingress {wanted} in the controller's cache")
        return _shaped(entries, shape, single="name" in info)

    async def _report(
        self, snapshot: cache.Snapshot, gateway: tuple[str, str]
    ) -> list[dict[str, Any]]:
        documents: list[Obj] = [obj for kind in KINDS for obj in snapshot.of(kind).values()]
        documents += await self._foreign_secrets(snapshot)
        options = self._parts.options
        return await asyncio.to_thread(report.migration_report, documents, options, gateway=gateway)

    async def _foreign_secrets(self, snapshot: cache.Snapshot) -> list[Obj]:
        """The basic-auth Secrets Ingresses name that the cache does not hold (those of
        Ingresses of other classes), each fetched once; a missing one stays missing."""
        held = snapshot.of("Secret")
        wanted = sorted(set(_named(snapshot.of("Ingress").values())) - held.keys())
        found: list[Obj] = []
        for ns, name in wanted:
            path = f"/api/v1/namespaces/{ns}/secrets/{name}"
            try:
                secret = await asyncio.to_thread(kube.request, self._parts.client, "GET", path)
            except kube.KubeError as exc:
                if exc.status != 404:
                    fields = {"secret": f"{ns}/{name}", "error": str(exc)}
                    log.warning("migration report: Secret not read", extra={"fields": fields})
                continue
            found.append({"apiVersion": "v1", "kind": "Secret", **secret})
        return found


def _named(ingresses: Iterable[Obj]) -> Iterable[cache.Key]:
    """(namespace, name) of each Secret an Ingress's own annotations name."""
    keys = tuple(PREFIX + key for key in ingress_annotations.SECRET_KEYS)
    for ingress in ingresses:
        own = meta(ingress).get("annotations") or {}
        if not isinstance(own, dict) or not any(key in own for key in keys):
            continue
        try:
            read = ingress_annotations.read(own)
        except MALFORMED:
            continue  # the report says why the Ingress cannot be read
        for secret in ingress_annotations.secrets_named(read, namespace(ingress)):
            yield namespace(ingress), secret


def _gateway_ref(text: str) -> tuple[str, str] | None:
    ns, _, name = text.rpartition("/")
    return None if not name or "/" in ns else (ns, name)


def _shaped(entries: list[dict[str, Any]], shape: str, *, single: bool) -> web.Response:
    if shape == "json":
        return send(entries[0] if single else {"ingresses": entries})
    if shape == "yaml":
        text = report.render_report(entries)
    else:
        manifests = [m for e in entries for m in (*e.get("httpRoutes", ()),
                                                 *e.get("coxswainPolicies", ()))]  # fmt: skip
        text = yaml.safe_dump_all(manifests, sort_keys=False, width=100) if manifests else ""
    return web.Response(text=text, content_type="application/yaml")
