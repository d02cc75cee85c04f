"""fleet-1000 (1,000 nodes, 8,000 GPUs) stays workable. Slow: run with `pytest -m slow`."""

from __future__ import annotations

import pytest

from labkit.cluster import connect

pytestmark = pytest.mark.slow


def test_fleet_fills_every_gpu_samples_like_kube_scheduler_and_reports_the_rest():
    c = connect("sim", "fleet-1000", progress=False)
    names = [n["metadata"]["name"] for n in c.list("Node")]
    assert len(names) == 1000
    n = 8010
    objs = [{"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate", "metadata": {"name": "one-gpu"},
             "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}]}}}}]
    objs += [{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"p-{i:05d}"},
              "spec": {"containers": [{"name": "c", "image": "x"}],
                       "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}]}} for i in range(n)]
    c.apply(objs)
    c.wait()
    pods = {p["metadata"]["name"]: p for p in c.list("Pod")}
    bound = [p for p in pods.values() if p["spec"].get("nodeName")]
    assert len(bound) == 8000
    # 1,000 nodes: kube-scheduler stops after 42 % (420) feasible nodes and scores those; the next
    # pod's search starts behind them
    sched = c.sim.scheduler
    first, second = (sched.attempts[pods[f"p-0000{i}"]["metadata"]["uid"]] for i in (0, 1))
    assert first.score_nodes == names[:420] and second.score_nodes == names[420:840]
    assert pods["p-00000"]["spec"]["nodeName"] == "a100-000"  # equal scores: the first in walk order
    assert pods["p-00001"]["spec"]["nodeName"] in names[420:840]
    assert pods["p-08000"]["status"]["conditions"][0]["message"] == \
        ("0/1000 nodes are available: 1000 cannot allocate all claims. preemption: 0/1000 nodes are "
         "available: 1000 Preemption is not helpful for scheduling.")
    node = pods["p-00003"]["spec"]["nodeName"]
    c.delete("Pod", "p-00003")
    c.wait()
    assert c.get("Pod", "p-08000")["spec"]["nodeName"] == node  # the only free GPU
    assert len(c.placements()) == 8000
