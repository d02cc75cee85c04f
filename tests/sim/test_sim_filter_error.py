"""A Filter plugin that fails (a CEL selector's runtime error, which makes kube-scheduler's
allocator abort) stops the attempt with kube-scheduler's message, whether the scheduler walks every
node or only the nodes NodeAffinity's PreFilter names (one code path: Scheduler._filter_at)."""

from __future__ import annotations

import json

import pytest

from labkit.cli import main
from tests import builders as b

CLAIM = b.claim("bad", selectors=['device.attributes["gpu.nvidia.com"].missing == 1'])
PINNED = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
    {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["node-0"]}]}]}}}


@pytest.mark.parametrize("affinity", [None, PINNED], ids=["every node", "pinned by matchFields"])
def test_a_failing_filter_plugin_is_reported_as_such(tmp_path, capsys, affinity):
    pod = b.pod("p", claims="bad", container="c", command=None, **({"affinity": affinity} if affinity else {}))
    f = tmp_path / "objs.yaml"
    f.write_text(b.yaml_docs(CLAIM, pod))
    assert main(["simulate", "-f", str(f), "--profile", "tiny", "-o", "json"]) == 0
    (p,) = json.loads(capsys.readouterr().out)["pods"]
    assert p["node"] in (None, "") and p["phase"] == "Pending"
    failed = [e["message"] for e in p["events"] if e["reason"] == "FailedScheduling"]
    assert failed and failed[-1].startswith(
        'running Filter plugin "DynamicResources": claim default/bad: selector #0 on device '
        'gpu.nvidia.com/node-0/gpu-0: CEL runtime error: no such key: missing'), failed
