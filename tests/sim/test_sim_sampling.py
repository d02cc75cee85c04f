"""The sim scheduler on fleets: kube-scheduler's node sampling (numFeasibleNodesToFind, rotating
start), queueing hints (a waiting pod is retried on events that could help it, and only then),
and filter work per pod that does not grow with the fleet."""

from __future__ import annotations

import pytest

from labkit.cluster import NotFound, connect
from labkit.sim.filters import num_feasible_nodes_to_find
from labkit.sim.scheduler import FEASIBLE, INFEASIBLE, UNKNOWN, Scheduler
from tests import builders as b

TEMPLATE = b.claim_template("one-gpu")


def fleet(count: int, node_profile: str = "l4-edge") -> dict:
    return {"name": f"sampling-{count}", "kubernetesVersion": "1.37",
            "nodes": [{"namePrefix": "n-", "count": count, "nodeProfile": node_profile}]}


def gpu_pod(name: str, template: str = "one-gpu", **spec) -> dict:
    return b.pod(name, templates=template, container="c", image="x", command=None, **spec)


def plain_pod(name: str, **spec) -> dict:
    return b.pod(name, container="c", image="x", command=None, **spec)


@pytest.mark.parametrize(("nodes", "expected"), [
    (1, 1), (99, 99),            # below 100 nodes: every node
    (100, 100), (300, 144),      # 50 - 300/125 = 48 %
    (500, 230), (1000, 420), (2000, 680), (5000, 500),
    (6000, 300),                 # 50 - 48 = 2 % -> at least 5 %
    (1500, 570),
])
def test_num_feasible_nodes_to_find_is_kube_schedulers(nodes, expected):
    assert num_feasible_nodes_to_find(nodes) == expected


def test_percentage_of_nodes_to_score_set_explicitly():
    assert num_feasible_nodes_to_find(1000, 10) == 100  # 10 % = 100
    assert num_feasible_nodes_to_find(1000, 5) == 100  # never fewer than 100
    assert num_feasible_nodes_to_find(1000, 100) == 1000


def test_sampling_on_300_nodes_scores_144_nodes_from_a_rotating_start():
    c = connect("sim", fleet(300), progress=False)
    sched = c.sim.scheduler
    names = [n["metadata"]["name"] for n in c.list("Node")]
    c.apply([TEMPLATE])
    seen = []
    for i in range(3):
        c.apply(gpu_pod(f"p{i}"))
        c.wait()
        att = sched.attempts[c.get("Pod", f"p{i}")["metadata"]["uid"]]
        seen.append(att.score_nodes)
        assert att.node in att.score_nodes  # the pod went to one of the scored nodes
        assert c.get("Pod", f"p{i}")["spec"]["nodeName"] == att.node
    # every node fits: filtering stops at 144 feasible nodes, the next search starts behind them
    assert seen[0] == names[0:144]
    assert seen[1] == names[144:288]
    assert seen[2] == names[288:300] + names[0:132]
    assert sched.next_start_node_index == 132
    # equal scores: the first node in walk order wins (kube-scheduler: one of them at random)
    assert [c.get("Pod", f"p{i}")["spec"]["nodeName"] for i in range(3)] == [names[0], names[144], names[288]]


def test_small_clusters_score_every_node_in_name_order():
    c = connect("sim", fleet(40), progress=False)
    sched = c.sim.scheduler
    names = [n["metadata"]["name"] for n in c.list("Node")]
    c.apply([TEMPLATE, gpu_pod("a"), gpu_pod("b")])
    c.wait()
    for p in ("a", "b"):
        assert sched.attempts[c.get("Pod", p)["metadata"]["uid"]].score_nodes == names
    assert sched.next_start_node_index == 0


def _count_attempts(monkeypatch, sched: Scheduler, pod_name: str) -> list[int]:
    calls = [0]
    original = sched.attempt

    def counting(pod):
        if pod["metadata"]["name"] == pod_name:
            calls[0] += 1
        return original(pod)

    monkeypatch.setattr(sched, "attempt", counting)
    return calls


def _full_cluster_with_waiting_pod(monkeypatch):
    c = connect("sim", fleet(2), progress=False)  # 2 nodes x 2 L4
    c.apply([TEMPLATE] + [gpu_pod(f"busy-{i}") for i in range(4)])
    c.wait()
    calls = _count_attempts(monkeypatch, c.sim.scheduler, "waiting")
    c.apply(gpu_pod("waiting"))
    c.wait()
    waiting = c.get("Pod", "waiting")
    assert not waiting["spec"].get("nodeName")
    assert waiting["status"]["conditions"][0]["message"].startswith("0/2 nodes are available: 2 cannot allocate all claims.")
    assert calls[0] == 1
    return c, calls


def test_waiting_pod_is_not_retried_on_unrelated_events(monkeypatch):
    c, calls = _full_cluster_with_waiting_pod(monkeypatch)
    c.apply(plain_pod("cpu-only"))  # binds somewhere: takes, frees nothing
    c.wait()
    assert c.get("Pod", "cpu-only")["spec"]["nodeName"]
    c.delete("Pod", "cpu-only")  # frees cpu and a pod slot: NodeResourcesFit's event, not DRA's
    c.wait()
    c.advance(30)
    assert calls[0] == 1
    assert not c.get("Pod", "waiting")["spec"].get("nodeName")


def test_waiting_pod_is_retried_when_a_claim_is_deallocated(monkeypatch):
    c, calls = _full_cluster_with_waiting_pod(monkeypatch)
    freed = c.get("Pod", "busy-2")["spec"]["nodeName"]
    c.delete("Pod", "busy-2")
    c.wait()
    assert calls[0] == 2
    assert c.get("Pod", "waiting")["spec"]["nodeName"] == freed


def test_waiting_pod_is_retried_when_a_slice_appears(monkeypatch):
    c, calls = _full_cluster_with_waiting_pod(monkeypatch)
    existing = next(s for s in c.list("ResourceSlice") if s["spec"]["driver"] == "gpu.nvidia.com")
    extra = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": "extra-gpu"},
             "spec": {"driver": "gpu.nvidia.com", "nodeName": existing["spec"]["nodeName"],
                      "pool": {"name": "extra", "generation": 1, "resourceSliceCount": 1},
                      "devices": [{**existing["spec"]["devices"][0], "name": "gpu-9"}]}}
    c.apply(extra)
    c.wait()
    assert calls[0] == 2
    placed = c.placements().rows
    assert [(r["node"], r["pool"], r["device"]) for r in placed if r["pod"] == "waiting"] == \
        [(existing["spec"]["nodeName"], "extra", "gpu-9")]


def test_only_the_first_pod_of_a_shape_is_retried_while_they_keep_failing(monkeypatch):
    c = connect("sim", fleet(1), progress=False)  # 2 GPUs
    c.apply([TEMPLATE] + [gpu_pod(f"busy-{i}") for i in range(2)])
    c.wait()
    c.apply([gpu_pod(f"w-{i}") for i in range(5)])
    c.wait()
    sched = c.sim.scheduler
    tried: list[str] = []
    original = sched.attempt
    monkeypatch.setattr(sched, "attempt", lambda pod: tried.append(pod["metadata"]["name"]) or original(pod))
    c.delete("Pod", "busy-0")  # one GPU free: w-0 gets it, w-1 finds nothing, w-2.. wait
    c.wait()
    assert tried == ["w-0", "w-1"]
    assert c.get("Pod", "w-0")["spec"]["nodeName"] == "n-0"
    assert all(not c.get("Pod", f"w-{i}")["spec"].get("nodeName") for i in range(1, 5))


def _filter_calls_for(nodes: int, pods: int) -> tuple[int, int]:
    c = connect("sim", fleet(nodes), progress=False, validate=False)
    c.apply([TEMPLATE] + [gpu_pod(f"p-{i:04d}") for i in range(pods)])
    c.wait()
    bound = sum(1 for p in c.list("Pod") if p["spec"].get("nodeName"))
    return c.sim.scheduler.filter_calls, bound


def test_filter_calls_per_pod_stay_bounded_as_the_fleet_grows():
    """Each node is filtered once per pod shape, then again only when it changed: a pod costs
    about one filter call (the node its predecessor went to), not one per sampled node."""
    pods = 150
    small_calls, small_bound = _filter_calls_for(100, pods)
    big_calls, big_bound = _filter_calls_for(600, pods)
    assert small_bound == big_bound == pods
    # without the per-node memory this would be >= 100 and >= 264 calls per pod (the sample size)
    assert small_calls <= 100 + 2 * pods
    assert big_calls <= 600 + 2 * pods
    assert (big_calls - 600) / pods <= 2 and (small_calls - 100) / pods <= 2


def test_pod_short_of_cpu_is_retried_when_a_bound_pod_goes(monkeypatch):
    prof = {"name": "cpu-4", "kubernetesVersion": "1.37",
            "nodes": [{"name": "n-0", "nodeProfile": "l4-edge", "allocatable": {"cpu": "4"}}]}
    c = connect("sim", prof, progress=False)
    c.apply(plain_pod("big", containers=[{"name": "c", "image": "x", "resources": {"requests": {"cpu": "3"}}}]))
    c.wait()
    calls = _count_attempts(monkeypatch, c.sim.scheduler, "waiting")
    c.apply(plain_pod("waiting", containers=[{"name": "c", "image": "x", "resources": {"requests": {"cpu": "2"}}}]))
    c.wait()
    assert calls[0] == 1
    assert "1 Insufficient cpu" in c.get("Pod", "waiting")["status"]["conditions"][0]["message"]
    c.apply(plain_pod("small"))  # another pod binds: nothing freed
    c.wait()
    assert c.get("Pod", "small")["spec"]["nodeName"] == "n-0"
    assert calls[0] == 1
    c.delete("Pod", "big")  # cpu freed
    c.wait()
    assert calls[0] == 2
    assert c.get("Pod", "waiting")["spec"]["nodeName"] == "n-0"


def test_taint_controller_examines_only_changed_claims(monkeypatch):
    c = connect("sim", fleet(4), progress=False)  # 8 L4
    c.apply([TEMPLATE] + [gpu_pod(f"p-{i}") for i in range(6)])
    c.wait()
    tainted = c.placements().rows[0]
    c.apply({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceTaintRule", "metadata": {"name": "r"},
             "spec": {"deviceSelector": {"pool": tainted["pool"], "device": tainted["device"]},
                      "taint": {"key": "labkit.dev/broken", "effect": "NoExecute"}}})
    taints = c.sim.taints
    examined: list[str] = []
    original = taints._claim_deadlines
    monkeypatch.setattr(taints, "_claim_deadlines",
                        lambda claim, t, now: examined.append(claim["metadata"]["name"]) or original(claim, t, now))
    c.wait()
    # the taint changed: every claim is looked at; the pod on the tainted device is evicted
    assert len({n for n in examined if n.startswith("p-")}) == 6
    with pytest.raises(NotFound):
        c.get("Pod", tainted["pod"])
    examined.clear()
    c.apply(gpu_pod("late"))  # one new claim, allocated and reserved: only it is looked at again
    c.wait()
    assert c.get("Pod", "late")["spec"]["nodeName"]
    assert set(examined) == {c.get("Pod", "late")["status"]["resourceClaimStatuses"][0]["resourceClaimName"]}


def _check_status(shape) -> None:
    """The walk's status bytes say what the kept filter results say."""
    want = bytes(UNKNOWN if r is None else INFEASIBLE if r[0] else FEASIBLE for r in shape.by_index)
    assert bytes(shape.status) == want


def test_kept_verdicts_follow_node_changes():
    """The walk skips nodes whose kept verdict is "feasible"; a node whose devices were taken
    (or freed) since is filtered again and its verdict changes."""
    c = connect("sim", fleet(150), progress=False)  # 150 nodes x 2 L4; 100 feasible nodes per search
    sched = c.sim.scheduler
    names = [n["metadata"]["name"] for n in c.list("Node")]
    two = b.claim_template("two-gpu", requests=[b.request(allocation_mode="ExactCount", count=2)])
    c.apply([TEMPLATE, two, gpu_pod("g0")])
    c.wait()
    att = sched.attempts[c.get("Pod", "g0")["metadata"]["uid"]]
    shape = sched._shapes[att.shape]
    assert att.node == names[0] and sched.next_start_node_index == 100
    assert bytes(shape.status[:100]) == bytes([FEASIBLE]) * 100 and not any(shape.status[100:])
    # both GPUs of nodes 100..104 taken (a search that finds one node walks all 150: start unchanged)
    hogs = [gpu_pod(f"hog-{k}", "two-gpu", nodeSelector={"kubernetes.io/hostname": names[k]}) for k in range(100, 105)]
    for h in hogs:
        c.apply(h)
        c.wait()
        assert c.get("Pod", h["metadata"]["name"])["spec"]["nodeName"]
    assert sched.next_start_node_index == 100
    c.apply(gpu_pod("g1"))
    c.wait()
    att = sched.attempts[c.get("Pod", "g1")["metadata"]["uid"]]
    shape = sched._shapes[att.shape]
    assert list(att.per_node) == names[100:105]
    assert all(r == ["cannot allocate all claims"] for r in att.per_node.values())
    assert att.score_nodes == names[105:150] + names[0:55]  # node 0 (one GPU left) filtered again: still fits
    assert att.node == names[105] and sched.next_start_node_index == 55
    assert bytes(shape.status[100:105]) == bytes([INFEASIBLE]) * 5
    _check_status(shape)
    c.delete("Pod", "hog-100")  # node 100's GPUs are free again
    c.wait()
    sched.next_start_node_index = 100
    c.apply(gpu_pod("g2"))
    c.wait()
    att = sched.attempts[c.get("Pod", "g2")["metadata"]["uid"]]
    shape = sched._shapes[att.shape]
    assert list(att.per_node) == names[101:105]
    assert att.score_nodes[0] == names[100] and att.node == names[100]
    assert shape.status[100] == FEASIBLE
    _check_status(shape)
