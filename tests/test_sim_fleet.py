"""fleet-1000 (1,000 nodes, 8,000 GPUs) stays workable. Slow: run with `pytest -m slow`."""

from __future__ import annotations

import pytest

from labkit.cluster import connect

pytestmark = pytest.mark.slow


def test_fleet_fills_nodes_in_name_order_and_reports_the_rest():
    c = connect("sim", "fleet-1000", progress=False)
    assert len(c.list("Node")) == 1000
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
    assert pods["p-00000"]["spec"]["nodeName"] == "a100-000"
    assert pods["p-00008"]["spec"]["nodeName"] == "a100-001"
    assert pods["p-07999"]["spec"]["nodeName"] == "h100-399"
    assert pods["p-08000"]["status"]["conditions"][0]["message"] == \
        ("0/1000 nodes are available: 1000 cannot allocate all claims. preemption: 0/1000 nodes are "
         "available: 1000 Preemption is not helpful for scheduling.")
    c.delete("Pod", "p-00003")
    c.wait()
    assert c.get("Pod", "p-08000")["spec"]["nodeName"] == "a100-000"
    assert len(c.placements()) == 8000
