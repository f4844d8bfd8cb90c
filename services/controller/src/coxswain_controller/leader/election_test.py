"""Leader election between real electors over the emulated API server's Lease.

Covers: one leader and one standby, one leader out of a race for a new Lease, takeover after
a silent leader's lease expires (and not before), fast takeover after a clean release, stepping
down when renewals fail past the deadline, `confirm()` after the Lease was taken, and the
leader label on the Pod.
Time is a `ManualTime` the test advances round by round; nothing waits out a lease.
"""

from __future__ import annotations

import asyncio
from typing import Any

from coxswain_controller.kube import api as kube
from coxswain_controller.leader import lease, pod
from coxswain_controller.leader.conftest import NAMESPACE, Elect, ManualTime, becomes, settings
from coxswain_devkit.apiserver import ApiServer


async def read_lease(client: Any) -> lease.LeaseSpec:
    current = await asyncio.to_thread(kube.request, client, "GET", settings("x").path)
    return lease.spec_of(current)


async def labels(client: Any, name: str) -> dict[str, str]:
    path = pod.PodRef(NAMESPACE, name).path
    found = await asyncio.to_thread(kube.request, client, "GET", path)
    return dict(found["metadata"].get("labels") or {})


async def test_one_leads_the_other_stands_by(client: Any, clock: ManualTime, elect: Elect) -> None:
    a, a_leads = elect("a")
    await becomes(a_leads, True)
    b, b_leads = elect("b")
    await clock.sleeping(2)  # b has looked at the Lease once
    assert not b_leads.is_leader
    assert (await read_lease(client))["holderIdentity"] == "a"
    assert await a.confirm()
    assert not await b.confirm()


async def test_standby_takes_over_once_a_silent_leader_expires(
    client: Any, clock: ManualTime, elect: Elect
) -> None:
    a, a_leads = elect("a")
    await becomes(a_leads, True)
    _, b_leads = elect("b")
    await clock.sleeping(2)
    await a.stop(release=False)  # crashed: the Lease still names it
    clock.advance(10)  # within the 15 s lease: b must wait
    await clock.sleeping(1)
    assert not b_leads.is_leader
    clock.advance(6)  # past renewTime + leaseDurationSeconds
    await becomes(b_leads, True)
    spec = await read_lease(client)
    assert spec["holderIdentity"] == "b" and spec["leaseTransitions"] == 1


async def test_a_released_lease_is_taken_at_the_next_look(
    client: Any, clock: ManualTime, elect: Elect
) -> None:
    a, a_leads = elect("a")
    await becomes(a_leads, True)
    _, b_leads = elect("b")
    await clock.sleeping(2)
    await a.stop()
    assert (await read_lease(client))["holderIdentity"] == ""
    clock.advance(5)  # one renew interval, a third of the lease duration
    await becomes(b_leads, True)


async def test_a_leader_that_cannot_renew_steps_down_at_the_deadline(
    api: ApiServer, clock: ManualTime, elect: Elect
) -> None:
    _, a_leads = elect("a")
    await becomes(a_leads, True)
    await clock.sleeping(1)
    api.faults.fail_next(1000)
    clock.advance(5)  # renewal fails, 5 s since the last: keep leading
    await clock.sleeping(1)
    assert a_leads.is_leader
    clock.advance(5)  # 10 s without renewal: the deadline
    await becomes(a_leads, False)
    api.faults.fail_next(0)


async def test_confirm_fails_and_the_leader_steps_down_once_the_lease_is_taken(
    api: ApiServer, client: Any, clock: ManualTime, elect: Elect
) -> None:
    api.apply([_pod("a")])
    a, a_leads = elect("a", label=True)
    await becomes(a_leads, True)
    await clock.sleeping(1)
    current = await asyncio.to_thread(kube.request, client, "GET", settings("x").path)
    current["spec"] = lease.claimed(lease.spec_of(current), "intruder", clock(), duration=15)
    await asyncio.to_thread(kube.request, client, "PUT", settings("x").path, body=current)
    assert not await a.confirm()
    assert not a_leads.is_leader
    assert pod.LEADER_LABEL not in await labels(client, "a")


async def test_the_leader_labels_its_pod_and_unlabels_it_on_stop(
    api: ApiServer, client: Any, clock: ManualTime, elect: Elect
) -> None:
    api.apply([_pod("a")])
    a, a_leads = elect("a", label=True)
    await becomes(a_leads, True)
    await clock.sleeping(1)
    assert (await labels(client, "a"))[pod.LEADER_LABEL] == "true"
    assert (await labels(client, "a"))["app"] == "coxswain-controller"
    await a.stop()
    assert await labels(client, "a") == {"app": "coxswain-controller"}


def _pod(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": NAMESPACE,
            "labels": {"app": "coxswain-controller"},
        },
        "spec": {"containers": [{"name": "controller", "image": "coxswain"}]},
    }


async def test_two_electors_racing_for_a_free_lease_elect_one(
    client: Any, clock: ManualTime, elect: Elect
) -> None:
    electors = [elect(name) for name in ("a", "b", "c")]
    await clock.sleeping(3)
    clock.advance(5)  # a second round: each renews or looks again, none steals
    await clock.sleeping(3)
    leaders = [name for name, (_, leads) in zip("abc", electors, strict=True) if leads.is_leader]
    assert leaders == [(await read_lease(client))["holderIdentity"]]
