"""The sim scheduler's per-pod shortcuts give kube-scheduler's answer, also after the state they
depend on changed: score rows shared by nodes in the same state, the Score stage reading the
sampled nodes' rows by runs of node indexes, and the rejected nodes' reasons read on demand.

Each is checked against the same scheduler with the shortcut turned off, pod by pod, while pods
are bound to nodes and deleted again (the nodes' cpu/memory and devices change), on a fleet large
enough for kube-scheduler's sampling (numFeasibleNodesToFind, a rotating start index:
pkg/scheduler/schedule_one.go in kubernetes/kubernetes)."""

from __future__ import annotations

import copy
import random
import re
from operator import itemgetter

import pytest

from labkit.allocator import model, twins
from labkit.cluster import connect
from labkit.sim import dra
from labkit.sim import scheduler as scheduler_module
from labkit.sim.filters import fit_error_message
from labkit.sim.scheduler import FEASIBLE, INFEASIBLE, _picker
from tests import builders as b

TEMPLATE = b.claim_template("one-gpu")
TWO = b.claim_template("two-gpu", requests=[b.request(allocation_mode="ExactCount", count=2)])


def fleet(count: int) -> dict:
    return {"name": f"caches-{count}", "kubernetesVersion": "1.37",
            "nodes": [{"namePrefix": "n-", "count": count, "nodeProfile": "l4-edge"}]}


def gpu_pod(name: str, template: str, cpu: str) -> dict:
    pod = b.pod(name, templates=template, container="c", image="x", command=None)
    pod["spec"]["containers"][0]["resources"] = {"requests": {"cpu": cpu, "memory": "256Mi"}}
    return pod


def _run(plain_rows: bool, monkeypatch: pytest.MonkeyPatch) -> list[tuple]:
    """Pods of three shapes arrive, some go again; per pod: its node, the scored nodes and their
    scores, the rejected nodes and the reasons."""
    if not plain_rows:
        monkeypatch.setattr(scheduler_module, "_plain_rows", lambda pod, claims: False)
    c = connect("sim", fleet(150), progress=False)  # 150 nodes x 2 GPUs: 100 feasible nodes per search
    sched = c.sim.scheduler
    c.apply([TEMPLATE, TWO])
    rng = random.Random(7)
    seen, live = [], []
    for i in range(120):
        name = f"p{i}"
        c.apply(gpu_pod(name, rng.choice(["one-gpu", "one-gpu", "two-gpu"]), rng.choice(["100m", "1", "250m"])))
        c.wait()
        pod = c.get("Pod", name)
        att = sched.attempts[pod["metadata"]["uid"]]
        seen.append((name, pod["spec"].get("nodeName"), att.score_nodes, att.scores, dict(att.per_node),
                     sorted(att.explanations)))
        live.append(name)
        if rng.random() < 0.4:  # a pod goes: its node's cpu, memory and GPUs are free again
            c.delete("Pod", live.pop(rng.randrange(len(live))))
            c.wait()
    monkeypatch.undo()
    return seen


def test_score_rows_shared_by_nodes_in_the_same_state_are_the_rows_of_each_node(monkeypatch):
    with_memo = _run(True, monkeypatch)
    without = _run(False, monkeypatch)
    assert with_memo == without
    assert any(s[4] for s in with_memo)  # some walks passed rejected nodes
    assert len({s[1] for s in with_memo}) > 20  # the pods spread over the fleet


@pytest.mark.parametrize("seed", range(40))
def test_the_score_stage_reads_the_walked_nodes_by_runs_like_index_by_index(seed):
    """_picker reads a per-node list at the walk's feasible indexes: one or two runs (the walk
    wrapped to node 0), with or without rejected nodes in them, or NodeAffinity's subset."""
    rng = random.Random(seed)
    n = rng.randrange(2, 60)
    status = bytearray(rng.choice([FEASIBLE, FEASIBLE, INFEASIBLE] if seed % 2 else [FEASIBLE]) for _ in range(n))
    start, to_find = rng.randrange(n), rng.randrange(1, n + 1)
    feasible, first_segment = [], -1
    for lo, hi in ((start, n), (0, start)):  # as Scheduler._find_feasible walks
        if lo == 0 and start:
            first_segment = len(feasible)
        for k in range(lo, hi):
            if len(feasible) >= to_find:
                break
            if status[k] == FEASIBLE:
                feasible.append(k)
        if len(feasible) >= to_find:
            break
    if len(feasible) < 2:
        return
    seq = [f"node-{i}" for i in range(n)]
    assert _picker(feasible, first_segment)(seq) == list(itemgetter(*feasible)(seq))
    subset = sorted(rng.sample(range(n), 2))  # NodeAffinity's PreFilter: index by index
    assert _picker(subset, scheduler_module._NOT_RUNS)(seq) == [seq[i] for i in subset]


def test_a_pod_that_fits_nowhere_gets_every_nodes_reasons_in_walk_order():
    c = connect("sim", fleet(120), progress=False)
    c.apply([b.claim_template("three-gpu", requests=[b.request(allocation_mode="ExactCount", count=3)]),
             gpu_pod("big", "three-gpu", "100m")])
    c.wait()
    pod = c.get("Pod", "big")
    att = c.sim.scheduler.attempts[pod["metadata"]["uid"]]
    names = [n["metadata"]["name"] for n in c.list("Node")]
    assert not pod["spec"].get("nodeName")
    assert list(att.per_node) == names  # the walk started at node 0 and passed all 120
    assert set(att.explanations) == set(names)  # each with the allocator's outcome
    assert att.message == fit_error_message(120, att.per_node)
    assert "0/120 nodes are available: 120 cannot allocate all claims" in att.message


def _plain_pod(name: str, cpu: str, **spec: object) -> dict:
    """A pod without claims (cpu/memory only), with extra spec fields (tolerations, nodeSelector)."""
    pod = b.pod(name, container="c", image="x", command=None)
    pod["spec"]["containers"][0]["resources"] = {"requests": {"cpu": cpu, "memory": "256Mi"}}
    pod["spec"].update(spec)
    return pod


def _gpu_slice(c, node: str) -> dict:
    return next(s for s in c.list("ResourceSlice") if s["spec"].get("nodeName") == node
                and s["spec"]["driver"] == "gpu.nvidia.com")


#: selectors that read a GPU attribute whose value differs per node (uuid) and one every node's
#: GPUs share (productName): the twin key's attribute columns (labkit.allocator.model.SliceInfo.column)
BY_UUID = b.claim_template("by-uuid", selectors=['device.attributes["gpu.nvidia.com"].uuid.startsWith("GPU-")'])
BY_PRODUCT = b.claim_template("by-product", selectors=['device.attributes["gpu.nvidia.com"].productName == "NVIDIA L4"'])


def _churn(share: bool, prune: bool = False) -> tuple[list[tuple], int]:
    """Pods of several shapes arrive and go while the nodes' state changes in every way a Filter
    verdict depends on: devices allocated and freed, cpu/memory used, a node tainted and untainted,
    a node relabelled, a DeviceTaintRule added and removed, a slice republished with a device
    less, a node deleted. Per pod: its node and devices, the scored nodes and their scores, the
    rejected nodes and their reasons (and a DynamicResources explanation). ``prune``: the
    scheduler forgets the node states no node holds after every pod (Scheduler._prune_keys)."""
    c = connect("sim", fleet(150), progress=False)
    sched = c.sim.scheduler
    sched.share_verdicts = share
    c.apply([TEMPLATE, TWO, BY_UUID, BY_PRODUCT])
    rng = random.Random(11)
    seen, live = [], []
    taint = [{"key": "maint", "effect": "NoSchedule"}]

    def node_edit(name: str, edit) -> None:
        node = copy.deepcopy(c.get("Node", name))  # the sim hands out its stored Node: edit a copy
        edit(node)
        c.apply(node)

    events = {
        15: lambda: [node_edit(n["metadata"]["name"], lambda node: node["spec"].__setitem__("taints", taint))
                     for n in c.list("Node")[:40:3]],
        30: lambda: node_edit(c.list("Node")[3]["metadata"]["name"], lambda node: node["spec"].pop("taints", None)),
        40: lambda: node_edit(c.list("Node")[7]["metadata"]["name"],
                              lambda node: node["metadata"].setdefault("labels", {}).__setitem__("tier", "gold")),
        50: lambda: c.apply({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceTaintRule", "metadata": {"name": "r"},
                             "spec": {"deviceSelector": {"pool": _gpu_slice(c, c.list("Node")[60]["metadata"]["name"])
                                                         ["spec"]["pool"]["name"]},
                                      "taint": {"key": "labkit.dev/broken", "effect": "NoSchedule"}}}),
        65: lambda: c.delete("DeviceTaintRule", "r"),
        75: lambda: _republish(c, c.list("Node")[90]["metadata"]["name"]),
        90: lambda: c.delete("Node", c.list("Node")[100]["metadata"]["name"]),
    }
    for i in range(130):
        if i in events:
            events[i]()
            c.wait()
        name = f"p{i}"
        kind = rng.choice(["one-gpu", "one-gpu", "two-gpu", "plain", "tolerant", "gold", "by-uuid", "by-product"])
        cpu = rng.choice(["100m", "1", "250m"])
        if kind in ("one-gpu", "two-gpu", "by-uuid", "by-product"):
            c.apply(gpu_pod(name, kind, cpu))
        elif kind == "plain":
            c.apply(_plain_pod(name, cpu))
        elif kind == "tolerant":
            pod = gpu_pod(name, "one-gpu", cpu)
            pod["spec"]["tolerations"] = [{"key": "maint", "operator": "Exists"}]
            c.apply(pod)
        else:
            c.apply(_plain_pod(name, cpu, nodeSelector={"tier": "gold"}))
        c.wait()
        pod = c.get("Pod", name)
        att = sched.attempts[pod["metadata"]["uid"]]
        # the claim an explanation names is the pod's own (shared) or that of the pod whose search
        # is kept for the node (each node's own): the same words otherwise
        explained = next((re.sub(r"default/p\d+-gpu-\w+", "<claim>", str(o.explanation))
                          for o in att.explanations.values() if hasattr(o, "explanation")), None)
        seen.append((name, pod["spec"].get("nodeName"), att.allocations, att.score_nodes, att.scores,
                     dict(att.per_node), sorted(att.explanations), explained, att.message))
        live.append(name)
        if rng.random() < 0.4:  # a pod goes: its node's cpu, memory and GPUs are free again
            c.delete("Pod", live.pop(rng.randrange(len(live))))
            c.wait()
        if prune:
            sched._prune_keys()
    return seen, sched.shared_verdicts


def _republish(c, node: str) -> None:
    """The node's GPU slice is published again with one device less (a new resourceVersion)."""
    s = copy.deepcopy(_gpu_slice(c, node))
    s["spec"]["devices"] = s["spec"]["devices"][:-1]
    c.sim.store.update(s)


def test_filter_verdicts_shared_by_nodes_in_the_same_state_are_each_nodes_own():
    """A Filter verdict worked out for one node serves every node in the same state (the same
    taints, allocatable and used resources, twin devices in the same use): each pod's node,
    devices, scores and rejection reasons are those of the scheduler filtering every node itself,
    while nodes change under it."""
    shared, hits = _churn(True)
    own, none = _churn(False)
    assert none == 0 and hits > 500  # most verdicts were shared
    assert shared == own
    assert len({s[1] for s in shared if s[1]}) > 20  # the pods spread over the fleet
    assert any(s[5] for s in shared) and any(s[7] for s in shared)  # rejected nodes, explained ones


def test_twin_classes_attribute_columns_and_forgotten_node_states_change_no_verdict(monkeypatch):
    """The shortcuts a node's first look takes give each node's own key: its slices' twin facts
    worked out once per class of nodes whose slices are like the same slices
    (labkit.allocator.twins.node_twin's classes), an attribute column read from the slice it is
    like unless its values differ (SliceInfo.like_differ), the devices in use looked up only in
    pools something was allocated from, the node object's part of its state as a tuple; and node
    states no node holds forgotten after every pod. Compared with each worked out per node."""
    kept, hits = _churn(True, prune=True)
    monkeypatch.setattr(dra, "node_twin", lambda own, features, classes=None: twins.node_twin(own, features))
    monkeypatch.setattr(dra, "in_use", lambda twin, state, counts=None: twins.in_use(twin, state))
    monkeypatch.setattr(model, "_find_like", lambda info: None)  # no slice is like another: every column its own
    monkeypatch.setattr(scheduler_module, "_static_key", lambda node: scheduler_module.json.dumps(
        [(node.get("spec") or {}).get("unschedulable"), (node.get("spec") or {}).get("taints"),
         (node.get("status") or {}).get("allocatable")], sort_keys=True, default=str))
    own, own_hits = _churn(True)
    monkeypatch.undo()
    assert kept == own
    assert hits > 500 and own_hits > 500
    assert len({s[1] for s in kept if s[1]}) > 20  # the pods spread over the fleet
