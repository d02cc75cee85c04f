"""labkit.experiments policies: valid DRA objects, and expected outcomes on tiny fleets (sim backend)."""

from __future__ import annotations

import random

import pytest

from labkit.cel.validation import validate
from labkit.experiments import BasePolicy, PolicyError, get_policy, policies, run_experiment, run_policy
from labkit.experiments.alibaba import generate_alibaba
from labkit.experiments.fleet import alibaba_fleet, build_fleet, fleet_variant
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


def _brute_first(ctx: Context, states, score):  # noqa: ANN001
    """The old per-node loop: the first node (fleet order) with the least score, None if none fits."""
    best = None
    for node in ctx.fleet.nodes:
        s = score(states.get(node, ctx.ledger))
        if s is not None and (best is None or s < best[0]):
            best = (s, node)
    return best[1] if best else None


@pytest.mark.parametrize("name", ["topology", "frag-aware"])
def test_node_choice_by_state_groups_equals_a_scan_of_every_node(name):
    """Grouping nodes by state (updated from the ledger's change log) must pick exactly the node
    a scan of every node picks, ties included, while pods come and go at random."""
    pol = get_policy(name)
    fleet = build_fleet(fleet_variant(alibaba_fleet(0.02), pol.mig_mode))
    ctx = Context(fleet, Ledger(fleet), request_mix(generate_alibaba(300, 0)))
    rng = random.Random(3)
    probes = [WorkItem("q1", "inference", 0, 1, 0, 10.0, 0.2), WorkItem("q2", "inference", 0, 1, 0, 70.0, 0.9),
              WorkItem("q3", "finetune", 0, 1, 1, 30.0, 1.0), WorkItem("q4", "finetune", 0, 1, 2, 60.0, 1.0, True),
              WorkItem("q8", "finetune", 0, 1, 8, 60.0, 1.0, True)]
    live: list[str] = []
    decisions = set()
    for k in range(400):
        if live and rng.random() < 0.45:
            ctx.ledger.remove_pod(live.pop(rng.randrange(len(live))))
        else:
            node = rng.choice(fleet.nodes)
            gpus = [g.name for g in fleet.kind_of[node].gpus if g.whole]
            if gpus:
                devs = rng.sample(gpus, min(len(gpus), rng.choice([1, 1, 2, 4])))
                ctx.ledger.add_pod(f"p{k}", WorkItem(f"p{k}", "inference", 0, 1, 0, rng.uniform(1, 40), 0.3), node, devs)
                live.append(f"p{k}")
        if k % 7:
            continue
        states = ctx.state.setdefault("states", policies._NodeStates(pol.sharing))
        brute = {}
        for i, n in enumerate(fleet.nodes):
            brute.setdefault(states.get(n, ctx.ledger), i)
        assert dict(states.groups(ctx.ledger)) == brute
        for it in probes:
            if name == "topology":
                need = it.gpus or 1

                def score(st, it=it, need=need):  # noqa: ANN001, ANN202
                    fit = [n for n in policies._domain_free(st, it.gpu_mem_gib).values() if n >= need]
                    return (min(fit) - need, -sum(1 for s in st if not s[1])) if fit else None
                got = pol.choose_node(it, ctx)
            elif it.fractional:
                def score(st, it=it):  # noqa: ANN001, ANN202
                    return pol._delta_new(st, it, ctx)
                got = (pol._best_node_new(it, ctx, states) or (None, None))[1]
            else:
                def score(st, it=it):  # noqa: ANN001, ANN202
                    idle = [i for i, s in enumerate(st) if s[1] and s[3] + 1e-9 >= it.gpu_mem_gib]
                    if len(idle) < (it.gpus or 1):
                        return None
                    new = list(st)
                    for i in idle[: it.gpus or 1]:
                        new[i] = ((), False, st[i][2], st[i][3])
                    return pol._frag(tuple(new), ctx) - pol._frag(st, ctx)
                got = pol._best_node_whole(it, ctx, states)
            assert got == _brute_first(ctx, states, score), (k, it.name)
            decisions.add((it.name, got))
    assert len(decisions) > len(probes)  # the choices did change as the fleet filled
