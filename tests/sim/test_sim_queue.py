"""The scheduler's failure memory in fleets of 100+ nodes: when a pod frees a node, waiting pods
filter only that node again (not the whole fleet). Placements, start times and the
FailedScheduling messages must be exactly those of forgetting everything on every free."""

from __future__ import annotations

from labkit.experiments import generate, run_policy
from labkit.sim.dra import DraState

FLEET = {"name": "queue-104", "kubernetesVersion": "1.37",
         "nodes": [{"namePrefix": "l4-", "count": 104, "nodeProfile": "l4-edge"}]}


def _run(monkeypatch, forget_everything: bool):
    if forget_everything:  # the pre-existing behaviour: every free makes every failure stale
        monkeypatch.setattr(DraState, "has_cluster_wide_slices", lambda self: True)
    trace = generate(160, seed=3, rate_per_min=240.0)
    run = run_policy(trace, FLEET, "whole-gpu", keep_cluster=True)
    sim = run.cluster.sim
    placed = [(r.name, r.node, r.start, tuple(r.devices)) for r in run.records]
    failed = sorted((e["involvedObject"]["name"], e["message"], e.get("count", 1))
                    for e in sim.list("Event") if e.get("reason") == "FailedScheduling")
    return placed, failed, sim.scheduler


def test_node_level_retries_place_exactly_like_a_full_rescan(monkeypatch):
    placed, failed, sched = _run(monkeypatch, forget_everything=False)
    with monkeypatch.context() as m:
        placed_full, failed_full, sched_full = _run(m, forget_everything=True)
    # the workload really queued pods and freed nodes while they waited
    assert any(start is not None and start > 0 for _, _, start, _ in placed)
    assert failed and sched.epoch > 0
    # ... through the per-node path (the full-rescan run bumped the inventory epoch instead)
    assert sched.inventory_epoch < sched_full.inventory_epoch
    assert placed == placed_full
    assert failed == failed_full
