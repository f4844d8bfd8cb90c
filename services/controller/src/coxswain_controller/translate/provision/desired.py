"""The provisioning stage: what should exist for every Gateway of ours (result.provision).

Runs once the Gateway stage has validated every listener and handed out bind ports. A Gateway
gets objects only while it is served (Accepted) with at least one served listener; otherwise it
is `hold`: whatever it had stays as it was, since a Service with no port cannot exist and a
transient bad edit must not give up a load balancer's address. A shared Gateway gets its VIP
Service and inert ServiceAccount only when --vip-service-type is set; without it (offline
translation and tests that leave provisioning out) shared Gateways keep the published Service's
addresses and nothing is provisioned for them.

Spec 002: "Switching a Gateway between modes provisions the new objects before it prunes the
old": the objects are listed in the order they are applied (identity first, the Service that
moves traffic last), and pruning is the provisioner's last step.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from coxswain_controller.translate.gateways.gateway_states import GatewayState
from coxswain_controller.translate.inputs import Inputs, Options, uid
from coxswain_controller.translate.provision import dedicated, names, shared
from coxswain_controller.translate.provision.common import Target
from coxswain_controller.translate.provision.model import (
    GatewayProvision,
    Mode,
    ObjectKey,
    Provisioned,
)
from coxswain_controller.translate.result import ObjectRef
from coxswain_controller.translate.scopes import GatewayScope

__all__ = ["desired_objects", "mode_of"]


def mode_of(gateway: GatewayState) -> Mode:
    return Mode.DEDICATED if isinstance(gateway.scope, GatewayScope) else Mode.SHARED


def desired_objects(
    gateways: Iterable[GatewayState], inputs: Inputs, options: Options
) -> tuple[GatewayProvision, ...]:
    """Per Gateway of ours that provisioning applies to, in the Gateway stage's order."""
    found = []
    for gateway in gateways:
        mode = mode_of(gateway)
        if mode is Mode.SHARED and not options.vip_service_type:
            continue
        ref = ObjectRef("Gateway", gateway.namespace, gateway.name)
        if gateway.infrastructure is None or not _servable(gateway):
            found.append(GatewayProvision(ref, uid(gateway.obj), mode, hold=True))
            continue
        target = Target(gateway, gateway.infrastructure, options)
        if mode is Mode.SHARED:
            objects: tuple[Provisioned, ...] = (shared.identity(target), shared.vip_service(target))
            found.append(GatewayProvision(ref, uid(gateway.obj), mode, objects))
        else:
            found.append(_dedicated(ref, target, inputs))
    return tuple(found)


def _servable(gateway: GatewayState) -> bool:
    return gateway.served and any(listener.served for listener in gateway.listeners)


def _dedicated(ref: ObjectRef, target: Target, inputs: Inputs) -> GatewayProvision:
    gateway = target.gateway
    bundle = trust_bundle(inputs, target.options)
    objects = [dedicated.service_account(target)]
    keep: frozenset[ObjectKey] = frozenset()
    if bundle is None:
        # Not published yet (or not readable): an older copy keeps serving until it is.
        name = names.trust_config_map(gateway.name, gateway.cls.name)
        keep = frozenset({ObjectKey("ConfigMap", gateway.namespace, name)})
    else:
        objects.append(dedicated.trust_bundle(target, bundle))
    objects += [dedicated.deployment(target), dedicated.service(target)]
    return GatewayProvision(ref, uid(gateway.obj), Mode.DEDICATED, tuple(objects), keep=keep)


def trust_bundle(inputs: Inputs, options: Options) -> str | None:
    """The identity service's trust bundle (its ConfigMap's ca.crt), if the cache holds it."""
    namespace, _, name = options.trust_bundle_configmap.partition("/")
    source = inputs.get("ConfigMap", namespace, name)
    data = (source or {}).get("data")
    value = data.get(dedicated.TRUST_KEY) if isinstance(data, Mapping) else None
    return value if isinstance(value, str) and value else None
