"""A Filter plugin that fails (a CEL selector's runtime error, which makes kube-scheduler's
allocator abort) stops the attempt with kube-scheduler's message, whether the scheduler walks every
node or only the nodes NodeAffinity's PreFilter names (one code path: Scheduler._filter_at)."""

from __future__ import annotations

import json

import pytest
import yaml

from labkit.cli import main

CLAIM = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": "bad"},
         "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
             "deviceClassName": "gpu.nvidia.com",
             "selectors": [{"cel": {"expression": 'device.attributes["gpu.nvidia.com"].missing == 1'}}]}}]}}}
PINNED = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
    {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["node-0"]}]}]}}}


@pytest.mark.parametrize("affinity", [None, PINNED], ids=["every node", "pinned by matchFields"])
def test_a_failing_filter_plugin_is_reported_as_such(tmp_path, capsys, affinity):
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
           "spec": {"containers": [{"name": "c", "image": "busybox"}],
                    "resourceClaims": [{"name": "gpu", "resourceClaimName": "bad"}]}}
    if affinity:
        pod["spec"]["affinity"] = affinity
    f = tmp_path / "objs.yaml"
    f.write_text(yaml.safe_dump_all([CLAIM, pod]))
    assert main(["simulate", "-f", str(f), "--profile", "tiny", "-o", "json"]) == 0
    (p,) = json.loads(capsys.readouterr().out)["pods"]
    assert p["node"] in (None, "") and p["phase"] == "Pending"
    failed = [e["message"] for e in p["events"] if e["reason"] == "FailedScheduling"]
    assert failed and failed[-1].startswith(
        'running Filter plugin "DynamicResources": claim default/bad: selector #0 on device '
        'gpu.nvidia.com/node-0/gpu-0: CEL runtime error: no such key: missing'), failed
