"""The sim scheduler numbers the node states its shared Filter verdicts are kept for (the same
taints, allocatable and used resources): a long run, in which every pod bound or gone gives its
node a new state, keeps only the numbers some node holds, and places every pod as the scheduler
that filters each node itself does (kube-scheduler filters every node: its sampling and order,
pkg/scheduler/schedule_one.go in kubernetes/kubernetes, are checked by test_sim_sampling.py)."""

from __future__ import annotations

import random

import pytest

from labkit.cluster import connect
from labkit.sim import scheduler as scheduler_module
from tests import builders as b

TEMPLATE = b.claim_template("one-gpu")
KEPT = 16  # the bound this test sets, so that a short run passes it many times
NODES = 6


def _pod(name: str, cpu: str, gpu: bool) -> dict:
    pod = b.pod(name, templates="one-gpu" if gpu else None, container="c", image="x", command=None)
    pod["spec"]["containers"][0]["resources"] = {"requests": {"cpu": cpu, "memory": "64Mi"}}
    return pod


def _run(share: bool) -> tuple[list[tuple], list[int], int, int]:
    """Pods come and go for a long time; per pod: its node, devices, scores and rejections; and
    after each, how many node states the scheduler has numbered."""
    c = connect("sim", {"name": "states", "kubernetesVersion": "1.37",
                        "nodes": [{"namePrefix": "n-", "count": NODES, "nodeProfile": "l4-edge"}]}, progress=False)
    sched = c.sim.scheduler
    sched.share_verdicts = share
    c.apply([TEMPLATE])
    rng = random.Random(5)
    seen, sizes, live = [], [], []
    for i in range(400):
        name = f"p{i}"
        c.apply(_pod(name, rng.choice(["10m", "20m", "30m", "70m"]), rng.random() < 0.3))
        c.wait()
        pod = c.get("Pod", name)
        att = sched.attempts.get(pod["metadata"]["uid"])
        seen.append((name, pod["spec"].get("nodeName"), att and att.allocations, att and att.scores,
                     att and dict(att.per_node)))
        live.append(name)
        while len(live) > 12 or (live and rng.random() < 0.45):  # pods go: their nodes change state again
            c.delete("Pod", live.pop(rng.randrange(len(live))))
            c.wait()
        sizes.append(len(sched._interned_keys))
    return seen, sizes, sched.shared_verdicts, sched._next_key


def test_a_long_run_keeps_only_the_node_states_some_node_holds(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(scheduler_module, "INTERNED_KEYS_KEPT", KEPT, raising=False)
    shared, sizes, hits, numbered = _run(True)
    own, _, none, _ = _run(False)
    assert hits > 100 and none == 0  # verdicts were shared
    assert shared == own  # every pod's node, devices, scores and rejections
    assert len({s[1] for s in shared}) > 1
    assert numbered > 10 * KEPT  # the run numbered many node states ...
    assert max(sizes) <= max(KEPT, 2 * NODES)  # ... and kept few
