"""The allocator's search deadline (kube-scheduler's filterTimeout) and the harness's view of it.

No test here depends on how fast the machine is: an already-expired deadline always cuts a search
(it is looked at on the first step), and ``timeout=None`` never cuts.
"""

from __future__ import annotations

from labkit.allocator import Allocator, features_for
from labkit.allocator.core import FILTER_TIMEOUT, TIMEOUT_ERROR
from tests.differential import harness

GPU = "gpu.nvidia.com"


def _inputs(n: int = 12) -> tuple[list[dict], list[dict], dict, list[dict]]:
    cls = [{"metadata": {"name": GPU}, "spec": {"selectors": [
        {"cel": {"expression": f'device.driver == "{GPU}"'}}]}}]
    devices = [{"name": f"gpu-{i}", "attributes": {"index": {"int": i}}} for i in range(n)]
    slices = [{"metadata": {"name": "s1"}, "spec": {
        "driver": GPU, "nodeName": "node-1", "pool": {"name": "node-1", "generation": 1, "resourceSliceCount": 1},
        "devices": devices}}]
    node = {"metadata": {"name": "node-1"}}
    # three devices with one index: impossible, found out only by trying every combination
    claim = {"metadata": {"name": "c1", "namespace": "default"}, "spec": {"devices": {
        "requests": [{"name": "gpu", "exactly": {"deviceClassName": GPU, "allocationMode": "ExactCount", "count": 3}}],
        "constraints": [{"requests": ["gpu"], "matchAttribute": f"{GPU}/index"}]}}}
    return cls, slices, node, [claim]


def test_expired_deadline_gives_the_schedulers_timeout_error():
    cls, slices, node, claims = _inputs()
    out = Allocator(features_for("1.37"), cls, slices, []).allocate(node, claims, timeout=-1.0)
    assert (out.status, out.error, out.allocations) == ("error", TIMEOUT_ERROR, [])
    assert out.explanation is None


def test_no_timeout_searches_to_the_end():
    cls, slices, node, claims = _inputs()
    out = Allocator(features_for("1.35"), cls, slices, []).allocate(node, claims, timeout=None)
    assert out.status == "unsatisfiable" and out.steps > 1


def test_default_timeout_is_the_filter_timeout():
    assert FILTER_TIMEOUT == 10.0
    cls, slices, node, claims = _inputs(3)
    assert Allocator(features_for("1.37"), cls, slices, []).allocate(node, claims).status == "unsatisfiable"


def test_harness_treats_a_labkit_timeout_like_an_oracle_timeout():
    timed_out = {"exit": 2, "output": {"status": "error", "allocations": {}, "error": TIMEOUT_ERROR}}
    other = {"exit": 3, "output": {"status": "unsatisfiable", "allocations": {}, "error": None}}
    assert harness.compare(timed_out, other).kind == "oracle-timeout"
    assert harness.compare(other, timed_out).kind == "labkit-timeout"
    assert harness.compare(other, timed_out).agrees
    assert harness.ORACLE_TIMEOUT == TIMEOUT_ERROR
