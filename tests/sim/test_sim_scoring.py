"""labkit.sim.scoring: the sim picks the node kube-scheduler's default Score plugins prefer."""

from __future__ import annotations

from dataclasses import replace

from labkit.cluster import connect
from labkit.model.profiles import load_profile
from labkit.sim.scoring import (
    balanced_allocation,
    least_allocated,
    nonzero_requests,
    prioritized_list,
    simple_total,
    totals,
)
from tests import builders as b
from tests import scoring_scenarios as sc


def _placed(cluster, pod: str) -> tuple[str, str]:
    row = next(p for p in cluster.placements() if p.pod == pod)
    return row.node, row.request


def test_first_available_prefers_nodes_with_the_first_alternative():
    c = connect("sim", "workshop", progress=False)
    c.apply(sc.prefer_t4())
    c.wait()
    assert _placed(c, "prefer-t4") == ("t4-0", "gpu/t4")  # first-fit by name would take dgx-a100-0 / gpu/any


def test_first_available_scoring_is_off_before_1_35():
    c = connect("sim", replace(load_profile("workshop"), kubernetes_version="1.34"), progress=False)
    c.apply(sc.prefer_t4())
    c.wait()
    assert _placed(c, "prefer-t4") == ("dgx-a100-0", "gpu/any")


def test_least_allocated_spreads_cpu_heavy_pods():
    c = connect("sim", "workshop", progress=False)
    for objs in sc.spread_by_cpu():
        c.apply(objs)
        c.wait()
    assert [_placed(c, f"cpu-{i}")[0] for i in range(3)] == ["dgx-a100-0", "t4-0", "t4-1"]


def test_preferred_node_affinity():
    c = connect("sim", "workshop", progress=False)
    c.apply(sc.preferred_node())
    c.wait()
    assert _placed(c, "likes-t4-1")[0] == "t4-1"


def test_prefer_no_schedule_taint_is_avoided_unless_tolerated():
    c = connect("sim", "workshop", progress=False)
    node = c.get("Node", "dgx-a100-0")
    node["spec"]["taints"] = [{"key": "busy", "effect": "PreferNoSchedule"}]
    c.apply(node)
    c.apply([sc.template("any-gpu", [{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}]),
             sc.pod("p", "any-gpu"),
             sc.pod("tolerant", "any-gpu", tolerations=[{"key": "busy", "operator": "Exists"}])])
    c.wait()
    assert _placed(c, "p")[0] == "t4-0"
    assert _placed(c, "tolerant")[0] == "dgx-a100-0"  # all tie again: first by name


def test_scores_are_explained_on_the_attempt():
    c = connect("sim", "workshop", progress=False)
    c.apply(sc.prefer_t4())
    c.wait()
    pod = c.get("Pod", "prefer-t4")
    scores = c.sim.scheduler.attempts[pod["metadata"]["uid"]].scores
    assert scores["t4-0"]["DynamicResources"] == 200 and scores["dgx-a100-0"]["DynamicResources"] == 2 * 87


def test_plugin_formulas():
    # LeastAllocated: (capacity - requested) * 100 / capacity, averaged over cpu and memory
    assert least_allocated((32000, 0), (64000, 100)) == (50 + 100) // 2
    assert least_allocated((70000, 0), (64000, 100)) == (0 + 100) // 2
    # BalancedAllocation: 50 + (50 + with - without) / 2
    assert balanced_allocation((0, 0), (0, 0), (100, 100)) == 75
    pod = {"spec": {"containers": [{"name": "a"}, {"name": "b", "resources": {"requests": {"cpu": "1"}}}]}}
    assert nonzero_requests(pod) == (1100, 2 * 200 * 1024 * 1024)
    claim = {"spec": {"devices": {"requests": [{"name": "r", "firstAvailable": [{"name": "a"}, {"name": "b"}]}]}}}
    alloc = {"devices": {"results": [{"request": "r/b"}]}}
    assert prioritized_list([claim], [alloc]) == 7


def test_simple_total_is_totals_common_case():
    plain = [(0, 0, 80, 90, None), (0, 0, 75, None, None), (0, 0, 0, 100, 0)]
    assert totals(plain) == [simple_total(r) for r in plain]
    for needs_normalising in ((1, 0, 80, 90, None), (0, 5, 80, 90, None), (0, 0, 80, 90, 7)):
        assert simple_total(needs_normalising) is None


def test_kept_cpu_memory_of_a_node_goes_when_its_pods_change():
    """LeastAllocated reads a node's used cpu/memory from a per-node cache: a pod bound to the
    node (or gone from it) must drop it."""
    def pod(name: str) -> dict:
        return b.pod(name, container="c", image="x", command=None, requests={"cpu": "1", "memory": "1Gi"})

    c = connect("sim", load_profile("workshop"), progress=False)
    sched = c.sim.scheduler
    c.apply([pod("a")])
    c.wait()
    first = c.get("Pod", "a")["spec"]["nodeName"]
    assert first not in sched.resources.cpu_mem  # the bind dropped what "a"'s scoring kept
    assert len(sched.resources.cpu_mem) >= 1
    c.apply([pod("b")])
    c.wait()
    assert c.get("Pod", "b")["spec"]["nodeName"] != first  # LeastAllocated saw "a" on the first node
    assert sched.resources.cpu_mem[first][1] == (1000, 1 << 30)
    c.delete("Pod", "a")
    c.wait()
    assert first not in sched.resources.cpu_mem
