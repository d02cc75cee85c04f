"""The FGD paper's experiment checked on the real control plane (issue 45): the sim run's placements
applied to `local` (real kube-apiserver, kube-scheduler and kube-controller-manager, the kit's nodes
and fake_gpus plugins, GPUs with DRA consumable capacity) give every task the same node and devices
and the same allocation curve. The full-scale figures (openb:10, 126 nodes) are in
docs/fgd-paper-comparison.md.

Needs the local control-plane binaries: `pytest -m local tests/local/test_experiments_crosscheck_local.py`.
"""

from __future__ import annotations

import pytest

from labkit.experiments.crosscheck import check_on
from labkit.experiments.inflation import run_inflation
from labkit.experiments.openb import openb_fleet
from tests.localutil import ready_local_cluster

pytestmark = [pytest.mark.local, pytest.mark.slow]

EVERY = 80  # 23 nodes (within the local backend's 32), 109 GPUs, 162 arriving tasks


def test_best_fit_on_the_real_scheduler_gives_every_task_the_sims_node_and_devices():
    # kube-scheduler's NodeAffinity (a matchFields metadata.name term pins the pod) and its DRA plugin
    # (structured allocation with consumable capacity: kubernetes/kubernetes
    # staging/src/k8s.io/dynamic-resource-allocation/structured) decide; the sim's answers must be theirs
    run = run_inflation("best-fit", every=EVERY, keep_placements=True)
    with ready_local_cluster(openb_fleet(every=EVERY)) as local:
        res = check_on(local, "best-fit", every=EVERY, run=run)
        assert res["first_difference"] is None, res["first_difference"]
        assert res["equal"] and res["equal_tasks"] == res["tasks"] == len(run["placements"]) > 100
        assert res["alloc_pct"] == run["alloc_pct"]  # from the API server's claims: their consumed shares
        assert [(c["got_node"], c["got_devices"]) for c in res["tasks_checked"]] == [
            (node, sorted(f"gpu-{j}" for j in gpus)) for _, _, node, gpus in run["placements"]]
        assert res["backend"] == "local" and res["cluster"]["cpu_s"] > 0
        assert not local.list("Pod") and not local.list("ResourceClaim")  # cleaned up for the next check
