"""labkit.experiments policies: valid DRA objects, and expected outcomes on tiny fleets (sim backend)."""

from __future__ import annotations

import pytest

from labkit.cel.validation import validate
from labkit.experiments import BasePolicy, PolicyError, get_policy, run_experiment, run_policy
from labkit.experiments.fleet import build_fleet, fleet_variant
from labkit.experiments.ledger import Ledger
from labkit.experiments.policies import POLICIES, Context
from labkit.experiments.traces import WorkItem, generate, request_mix

ONE_A40 = {"name": "one-a40", "kubernetesVersion": "1.37",
           "nodes": [{"name": "node-0", "nodeProfile": "mig-a100", "migMode": "none"}]}
TWO_MIXED = {"name": "two-mixed", "kubernetesVersion": "1.37", "topologyAttributes": True,
             "nodes": [{"namePrefix": "mx-", "count": 2, "nodeProfile": "mixed-a100-t4"}]}


def small(n: int, mem: float = 4.0, compute: float = 0.05) -> list[WorkItem]:
    return [WorkItem(f"inf-{i:02d}", "inference", 0.0, 1000.0, 0, mem, compute) for i in range(n)]


def ctx_for(policy, profile=ONE_A40, trace=None) -> Context:
    fleet = build_fleet(fleet_variant(profile, policy.mig_mode))
    return Context(fleet, Ledger(fleet), request_mix(trace or generate(50, seed=0)))


@pytest.mark.parametrize("name", list(POLICIES))
def test_objects_are_valid_api_objects(name):
    pol = get_policy(name)
    items = [WorkItem("a", "inference", 0, 60, 0, 12.5, 0.2), WorkItem("b", "mig", 0, 60, 0, 4.0, 1 / 7),
             WorkItem("c", "finetune", 0, 60, 1, 30.0, 1.0), WorkItem("d", "finetune", 0, 60, 4, 30.0, 1.0, True),
             WorkItem("e", "cpu", 0, 60)]
    ctx = ctx_for(pol)
    for it in items:
        objs = pol.objects(it, ctx)
        pods = [x for x in objs if x["kind"] == "Pod"]
        assert len(pods) == 1 and pods[0]["metadata"]["name"] == it.name
        assert validate(objs) == [], (name, it.name, [str(p) for p in validate(objs)])


def placed_at_start(run) -> int:
    return sum(1 for r in run.records if r.start == 0.0)


def test_sharing_and_mig_place_more_small_pods_than_whole_gpus():
    trace = small(12)
    res = run_experiment(trace, ONE_A40, ["whole-gpu", "shared", "static-mig", "dynamic-mig"], validate=True)
    got = {r.policy: placed_at_start(r) for r in res.runs}
    assert got["whole-gpu"] == 4  # 4 GPUs, one pod each
    assert got["shared"] == 12  # two named claims (8 + 4 pods), each on one GPU
    assert got["static-mig"] == 12  # 14 fixed MIG devices of >= 4.75 GiB
    assert got["dynamic-mig"] == 12
    shared = res["shared"]
    gpus = {tuple(r.devices) for r in shared.records}
    assert len(gpus) == 2
    for r in res.runs:
        assert r.summary["never_placed"] == 0  # the rest waited for the first ones to finish


def test_static_mig_asks_the_smallest_fitting_profile():
    run = run_policy(small(3, mem=4.0), ONE_A40, "static-mig", keep_cluster=True)
    assert run.cluster.list("ResourceClaim") == []  # finished pods are deleted, their claims go with them
    profiles = {r.devices[0].split("-mig-")[1].split("-")[0] for r in run.records}
    assert profiles == {"1g5gb"}


def test_whole_gpu_jobs_never_fit_an_all_static_mig_fleet():
    trace = [WorkItem("ft", "finetune", 0, 100, 2, 20.0, 1.0, True)]
    run = run_policy(trace, ONE_A40, "static-mig")
    assert run.summary["never_placed"] == 1
    assert run_policy(trace, ONE_A40, "whole-gpu").summary["never_placed"] == 0


def test_topology_keeps_the_nvlink_pair_for_the_two_gpu_job():
    trace = [WorkItem("one", "finetune", 0, 1000, 1, 10.0, 1.0),
             WorkItem("two", "finetune", 20, 1000, 2, 10.0, 1.0, True)]
    topo = run_policy(trace, TWO_MIXED, "topology")
    whole = run_policy(trace, TWO_MIXED, "whole-gpu")
    t = {r.name: r for r in topo.records}
    w = {r.name: r for r in whole.records}
    assert sorted(t["two"].devices) == ["gpu-0", "gpu-1"]  # the NVLink-bridged A100 pair
    assert t["one"].devices in (["gpu-2"], ["gpu-3"])  # a T4: outside the island
    assert "gpu-0" in w["one"].devices and sorted(w["two"].devices) != ["gpu-0", "gpu-1"]


def test_frag_aware_packs_but_avoids_leaving_unusable_scraps():
    fleet = {"name": "two-a40", "kubernetesVersion": "1.37",
             "nodes": [{"namePrefix": "n-", "count": 2, "nodeProfile": "mig-a100", "migMode": "none"}]}
    trace = [WorkItem(f"p{i}", "inference", i * 20.0, 5000, 0, 6.0, 0.1) for i in range(6)]
    frag = {r.name: (r.node, tuple(r.devices)) for r in run_policy(trace, fleet, "frag-aware").records}
    first_fit = {r.name: (r.node, tuple(r.devices)) for r in run_policy(trace, fleet, "shared").records}
    # five 6 GiB shares on one 40 GiB GPU; a sixth would leave 4 GiB that no 6 GiB request can use
    assert {frag[f"p{i}"] for i in range(5)} == {("n-0", ("gpu-0",))}
    assert frag["p5"] == ("n-0", ("gpu-1",))
    assert set(first_fit.values()) == {("n-0", ("gpu-0",))}  # first fit packs all six


def test_unknown_policy_and_bad_policy_objects():
    with pytest.raises(PolicyError, match="unknown; use one of whole-gpu"):
        get_policy("best")

    class NoPod(BasePolicy):
        name = "nopod"

        def objects(self, item, ctx):
            return []

    with pytest.raises(PolicyError, match="exactly one Pod named"):
        run_policy(small(1), ONE_A40, NoPod())


def test_a_notebook_policy_runs():
    class Everything(BasePolicy):
        name = "one-each"

    run = run_policy(small(2), ONE_A40, Everything())
    assert run.summary["placed"] == 2


def test_runs_are_deterministic():
    trace = generate(25, seed=3)
    a = run_policy(trace, "exp-small", "frag-aware")
    b = run_policy(trace, "exp-small", "frag-aware")
    assert a.timeline == b.timeline
    assert [(r.node, r.devices, r.start) for r in a.records] == [(r.node, r.devices, r.start) for r in b.records]


@pytest.mark.parametrize("name", ["shared", "dynamic-mig", "static-mig"])
def test_ledger_matches_the_sims_allocations(name):
    """What the metrics count as allocated is exactly what the sim's claims hold."""
    trace = generate(40, seed=5, rate_per_min=30)
    run = run_policy(trace, "exp-small", name, keep_cluster=True, horizon=300)
    held = set()
    for c in run.cluster.list("ResourceClaim"):
        alloc = (c.get("status") or {}).get("allocation")
        if alloc:
            held |= {(r["pool"], r["device"]) for r in alloc["devices"]["results"]}
    placed = [r for r in run.records if r.start is not None and r.end > 300]  # finished pods are deleted
    assert placed and held == {(r.node, d) for r in placed for d in r.devices}
    assert run.timeline[-1]["t"] == 300


def test_memory_selectors_do_not_round_a_gpu_out():
    """An H100 reports 79.6 GiB: a claim for a 40 GiB need must still match it (and the A100s)."""
    prof = {"name": "h", "kubernetesVersion": "1.37", "nodes": [{"name": "h-0", "nodeProfile": "dgx-h100"}]}
    trace = [WorkItem(f"j{i}", "finetune", 0, 100, 1, 40.0, 1.0) for i in range(8)]
    for name in ("whole-gpu", "frag-aware", "topology", "dynamic-mig"):
        run = run_policy(trace, prof, name)
        assert run.summary["never_placed"] == 0 and placed_at_start(run) == 8, name


def test_dynamic_mig_gives_a_whole_80gb_gpu_ask_the_7g_device():
    """An Alibaba whole-GPU row asks the fleet's GPU size (80 GiB); in dynamic MIG mode the A100-80GB
    is published as partitions only and 7g.80gb has 79 GiB: the policy still offers it."""
    dgx = {"name": "one-dgx", "kubernetesVersion": "1.37", "nodes": [{"name": "n0", "nodeProfile": "dgx-a100"}]}
    trace = [WorkItem("big-0", "finetune", 0.0, 60.0, 1, 80.0, 1.0), WorkItem("big-1", "finetune", 0.0, 60.0, 2, 80.0, 1.0)]
    run = run_policy(trace, dgx, "dynamic-mig")
    assert run.summary["never_placed"] == 0
    devices = {r.name: r.devices for r in run.records}
    assert len(devices["big-0"]) == 1 and len(devices["big-1"]) == 2
    assert all("-mig-7g80gb-" in d for ds in devices.values() for d in ds), devices
