"""When wait() calls a real cluster settled: `pod_in_flight` decides from the objects alone, so a busy
machine (a slow kube-scheduler, a slow resourceclaim controller) makes wait() wait longer, never
return early with a pod still undecided (the kind lane once compared such a half-way state with sim)."""

from __future__ import annotations

from typing import Any

import pytest

from labkit.cluster.backends.kubeapi import KubeCluster, pod_in_flight


def pod(*, node: str | None = None, phase: str = "Pending", conditions: list[dict] | None = None,
        claims: list[dict] | None = None, statuses: list[dict] | None = None, deleting: bool = False) -> dict:
    meta: dict[str, Any] = {"name": "p", "namespace": "default", "uid": "u"}
    if deleting:
        meta["deletionTimestamp"] = "2026-11-28T00:00:00Z"
    status: dict[str, Any] = {"phase": phase, "conditions": conditions or []}
    if statuses is not None:
        status["resourceClaimStatuses"] = statuses
    return {"metadata": meta, "spec": {"nodeName": node, "resourceClaims": claims or []}, "status": status}


UNSCHEDULABLE = [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]
GATED = [{"type": "PodScheduled", "status": "False", "reason": "SchedulingGated"}]
TEMPLATED = [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}]
NAMED = [{"name": "gpu", "resourceClaimName": "shared"}]


T = {("default", "one-gpu")}  # the template exists


@pytest.mark.parametrize("obj, claims, templates, flying", [
    (pod(), set(), set(), True),                                      # the scheduler has not looked yet
    (pod(conditions=UNSCHEDULABLE), set(), set(), False),             # it has, and said no
    (pod(conditions=GATED), set(), set(), False),                     # held by schedulingGates
    (pod(node="n0"), set(), set(), False),                            # bound: the kubelet's (see _starting)
    (pod(phase="Running", node="n0"), set(), set(), False),
    (pod(phase="Running", node="n0", deleting=True), set(), set(), True),  # going away
    (pod(claims=TEMPLATED), set(), T, True),                          # the controller will make its claim
    (pod(claims=TEMPLATED, conditions=UNSCHEDULABLE), set(), T, True),
    (pod(claims=TEMPLATED), set(), set(), False),                     # no template: nothing will happen
    (pod(claims=TEMPLATED, statuses=[{"name": "gpu", "resourceClaimName": "p-gpu-x"}]),
     {("default", "p-gpu-x")}, T, True),                              # claim made, scheduler not yet
    (pod(claims=NAMED), {("default", "shared")}, set(), True),        # its claim exists: a decision comes
    (pod(claims=NAMED), set(), set(), False),                         # PreEnqueue holds it, no condition
    (pod(claims=NAMED), {("team-a", "shared")}, set(), False),        # the claim is in another namespace
    (pod(claims=NAMED), set(), {("default", "shared")}, False),       # a template of that name is no claim
])
def test_pod_in_flight(obj, claims, templates, flying):
    assert pod_in_flight(obj, claims, templates) is flying


class Scripted(KubeCluster):
    """A cluster whose list() answers come from a script of states, one state per poll."""

    backend = "scripted"

    def __init__(self, states: list[dict[str, list[dict]]]):
        self.states, self.polls = states, 0

    def list(self, kind: str, namespace: str | None = None) -> list[dict]:
        state = self.states[min(self.polls, len(self.states) - 1)]
        if kind == "Pod":
            self.polls += 1
        return state.get(kind, [])

    # the rest of Cluster's interface is not needed here
    apply = delete = down = get = pod_env = up = None  # type: ignore[assignment]


@pytest.fixture
def fast(monkeypatch):
    import labkit.cluster.backends.kubeapi as kubeapi

    clock = [0.0]
    monkeypatch.setattr(kubeapi.time, "monotonic", lambda: clock[0])
    monkeypatch.setattr(kubeapi.time, "sleep", lambda s: clock.__setitem__(0, clock[0] + s))
    return clock


def test_wait_keeps_waiting_while_the_scheduler_has_not_decided(fast):
    undecided = {"Pod": [pod()]}
    running = {"Pod": [pod(node="n0", phase="Running")]}
    # 60 polls (30 s of a busy scheduler) without a decision, then the pod runs
    cluster = Scripted([undecided] * 60 + [running])
    assert cluster.wait(timeout=120) is True
    assert cluster.polls > 60  # it did not return on the quiet, undecided state


def test_wait_gives_up_on_an_undecided_pod_only_at_its_timeout(fast):
    cluster = Scripted([{"Pod": [pod()]}])
    assert cluster.wait(timeout=30) is False


def test_wait_returns_once_a_stuck_start_has_been_quiet_for_the_grace(fast):
    import labkit.cluster.backends.kubeapi as kubeapi

    cluster = Scripted([{"Pod": [pod(node="n0")]}])  # bound, never started
    assert cluster.wait(timeout=60) is True
    assert kubeapi.UNDECIDED_GRACE <= fast[0] < kubeapi.UNDECIDED_GRACE + 2


def test_wait_returns_soon_on_a_decided_cluster(fast):
    import labkit.cluster.backends.kubeapi as kubeapi

    cluster = Scripted([{"Pod": [pod(conditions=UNSCHEDULABLE), pod(node="n0", phase="Running")]}])
    assert cluster.wait(timeout=60) is True
    assert fast[0] < kubeapi.QUIET + 1
