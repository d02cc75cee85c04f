"""What the sim keeps of a Filter walk that a nodeSelector pins to a few nodes (the NVL72
ComputeDomain trace: every pod pinned to its rack, so thousands of nodes fail NodeAffinity per
pod). A kept attempt holds the rejected nodes' verdicts by runs of consecutive nodes, one pointer
per node (not a list of names and a tuple per node), and NodeAffinity's rejection is one object
shared by every node; the reasons read back (per_node, reason_counts, the message) are the
same, node for node, in walk order.

Upstream facts checked: a nodeSelector never narrows NodeAffinity's PreFilter (only
matchFields metadata.name does: kubernetes/kubernetes
pkg/scheduler/framework/plugins/nodeaffinity/node_affinity.go, PreFilter), so the walk visits
every node from nextStartNodeIndex (pkg/scheduler/schedule_one.go, findNodesThatPassFilters)
and each rejected one reports "node(s) didn't match Pod's node affinity/selector"
(node_affinity.go, ErrReasonPod)."""

from __future__ import annotations

import copy
import random

from labkit.cluster import connect
from labkit.sim.filters import fit_error_message
from labkit.sim.scheduler import Scheduler
from tests import builders as b

AFFINITY = "node(s) didn't match Pod's node affinity/selector"


def _plain_pod(name: str, **spec: object) -> dict:
    return b.pod(name, container="c", image="x", command=None, **spec)


def test_a_pinned_pods_walk_is_kept_as_runs_and_reads_back_node_for_node():
    c = connect("sim", {"name": "walk-300", "kubernetesVersion": "1.37",
                        "nodes": [{"namePrefix": "n-", "count": 300, "nodeProfile": "l4-edge"}]}, progress=False)
    sched = c.sim.scheduler
    names = [n["metadata"]["name"] for n in c.list("Node")]
    target = names[250]
    for i in range(3):  # the first pod filters node by node, the next ones read the kept verdicts
        c.apply(_plain_pod(f"p{i}", nodeSelector={"kubernetes.io/hostname": target}))
        c.wait()
        pod = c.get("Pod", f"p{i}")
        assert pod["spec"]["nodeName"] == target
        att = sched.attempts[pod["metadata"]["uid"]]
        # the walk from node 0: 0..249 rejected, 250 fits, 251..299 rejected: two runs of one
        # verdict each, the names not copied
        assert [(names_ is sched._names, lo, count, results[0]) for names_, lo, count, results in att.walked] == [
            (True, 0, 250, [AFFINITY]), (True, 251, 49, [AFFINITY])]
        assert sum(len(results) for *_, results in att.walked) == 6  # no list of a result per node
        assert att.reason_counts() == {(AFFINITY,): 299}
        assert list(att.per_node) == names[:250] + names[251:]
        assert all(r == [AFFINITY] for r in att.per_node.values())
        assert att.explanations == {}
        assert not att.walked  # read once, then gone
    # a pod that fits nowhere: the same message as from every node's reasons
    c.apply(_plain_pod("nowhere", nodeSelector={"kubernetes.io/hostname": "no-such-node"}))
    c.wait()
    pod = c.get("Pod", "nowhere")
    att = sched.attempts[pod["metadata"]["uid"]]
    assert not pod["spec"].get("nodeName")
    assert att.message == fit_error_message(300, att.per_node)
    assert att.message.startswith(f"0/300 nodes are available: 300 {AFFINITY}.")


def _pinned_churn(fill: bool, monkeypatch) -> tuple[list[tuple], int]:
    """Pods pinned by nodeSelectors (a label on a third of the nodes, one node's hostname, a label
    no node has) arrive and go while nodes are tainted, cordoned, relabelled: per pod its node,
    scored nodes, the rejected nodes' reasons and explanations, its message."""
    if not fill:  # every node filtered one by one, as before the label index
        monkeypatch.setattr(Scheduler, "_fill_selector_misses", lambda self, pod, shape: None)
    c = connect("sim", {"name": "pinned-150", "kubernetesVersion": "1.37",
                        "nodes": [{"namePrefix": "n-", "count": 150, "nodeProfile": "l4-edge"}]}, progress=False)
    sched = c.sim.scheduler
    names = [n["metadata"]["name"] for n in c.list("Node")]

    def node_edit(name: str, edit) -> None:
        node = copy.deepcopy(c.get("Node", name))  # the sim hands out its stored Node: edit a copy
        edit(node)
        c.apply(node)

    for k in range(0, 150, 3):
        node_edit(names[k], lambda node: node["metadata"]["labels"].__setitem__("tier", "gold"))
    events = {
        10: lambda: [node_edit(names[k], lambda node: node["spec"].__setitem__(
            "taints", [{"key": "maint", "effect": "NoSchedule"}])) for k in range(0, 60, 4)],
        20: lambda: [node_edit(names[k], lambda node: node["spec"].__setitem__("unschedulable", True)) for k in (5, 9, 30)],
        35: lambda: node_edit(names[4], lambda node: node["spec"].pop("taints", None)),
        45: lambda: node_edit(names[10], lambda node: node["metadata"]["labels"].pop("tier", None)),
    }
    rng = random.Random(5)
    seen, live = [], []
    for i in range(70):
        if i in events:
            events[i]()
            c.wait()
        selector = rng.choice([{"tier": "gold"}, {"tier": "gold"}, {"kubernetes.io/hostname": names[rng.randrange(150)]},
                               {"tier": "silver"}, {}])
        pod = _plain_pod(f"p{i}", nodeSelector=selector) if selector else _plain_pod(f"p{i}")
        pod["spec"]["containers"][0]["resources"] = {"requests": {"cpu": rng.choice(["1", "3", "6"])}}
        if rng.random() < 0.3:
            pod["spec"]["tolerations"] = [{"key": "maint", "operator": "Exists"}]
        c.apply(pod)
        c.wait()
        pod = c.get("Pod", f"p{i}")
        att = sched.attempts[pod["metadata"]["uid"]]
        seen.append((pod["spec"].get("nodeName"), att.score_nodes, att.scores, att.reason_counts(),
                     dict(att.per_node), {n: str(e) for n, e in att.explanations.items()}, att.message))
        live.append(f"p{i}")
        if rng.random() < 0.4:
            c.delete("Pod", live.pop(rng.randrange(len(live))))
            c.wait()
    return seen, sched.filter_calls


def test_the_nodes_a_selector_misses_read_back_as_if_each_was_filtered(monkeypatch):
    filled, calls_filled = _pinned_churn(True, monkeypatch)
    one_by_one, calls = _pinned_churn(False, monkeypatch)
    assert filled == one_by_one
    assert calls_filled < calls / 2  # the missed nodes were not filtered one by one
    assert any(s[0] is None for s in filled) and sum(s[0] is not None for s in filled) > 20
    reasons = {r for s in filled for r in s[3]}
    assert {("node(s) were unschedulable",), ("node(s) had untolerated taint(s)",), (AFFINITY,)} <= reasons
