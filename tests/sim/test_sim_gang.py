"""Gang scheduling: all-or-nothing for PodGroups (scheduling.k8s.io) and the labkit label form."""

from __future__ import annotations

import pytest

from labkit.cluster import connect
from tests import builders as b

FOUR_GPUS = b.claim_template("four-gpus", requests=[b.request("gpus", allocation_mode="ExactCount", count=4)])


def worker(name, group=None, min_member=None, pod_group=None):
    return b.pod(name, templates={"gpus": "four-gpus"}, container="m", image="x", command=None,
                 labels={"labkit.dev/pod-group": group} if group else None,
                 annotations={"labkit.dev/min-member": str(min_member)} if min_member else None,
                 **({"schedulingGroup": {"podGroupName": pod_group}} if pod_group else {}))


def pod_group(name, min_count):
    return {"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup", "metadata": {"name": name},
            "spec": {"schedulingPolicy": {"gang": {"minCount": min_count}}}}


@pytest.fixture
def tiny():  # one node, 8 GPUs: room for two 4-GPU workers
    with connect("sim", "tiny", progress=False) as c:
        c.apply(FOUR_GPUS)
        yield c


def bound(c):
    return sorted(p["metadata"]["name"] for p in c.list("Pod") if p["spec"].get("nodeName"))


def test_label_gang_that_does_not_fit_binds_nobody(tiny):
    tiny.apply([worker(f"w{i}", group="g", min_member=3) for i in range(3)])
    tiny.wait()
    assert bound(tiny) == []
    assert tiny.list("ResourceClaim") and all("allocation" not in c.get("status", {}) for c in tiny.list("ResourceClaim"))
    msg = tiny.get("Pod", "w0")["status"]["conditions"][0]["message"]
    assert 'pod group "g": only 2 of minCount 3 pods fit; none were bound (all-or-nothing)' in msg
    # a non-gang pod can still use the GPUs the gang left free
    tiny.apply(worker("solo"))
    tiny.wait()
    assert bound(tiny) == ["solo"]


def test_label_gang_that_fits_binds_all(tiny):
    tiny.apply([worker(f"w{i}", group="g", min_member=2) for i in range(2)])
    tiny.wait()
    assert bound(tiny) == ["w0", "w1"]


def test_gang_waits_for_min_member_pods(tiny):
    tiny.apply(worker("w0", group="g", min_member=2))
    tiny.wait()
    assert bound(tiny) == []
    assert "1 of minCount 2 pods exist" in tiny.explain("w0")
    tiny.apply(worker("w1", group="g"))
    tiny.wait()
    assert bound(tiny) == ["w0", "w1"]


def test_podgroup_gang_policy(tiny):
    tiny.apply([pod_group("pg", 3)] + [worker(f"w{i}", pod_group="pg") for i in range(3)])
    tiny.wait()
    assert bound(tiny) == []
    tiny.apply([pod_group("pg2", 2)] + [worker(f"v{i}", pod_group="pg2") for i in range(2)])
    tiny.wait()
    assert bound(tiny) == ["v0", "v1"]


def test_podgroup_must_exist(tiny):
    tiny.apply(worker("w0", pod_group="later"))
    tiny.wait()
    assert bound(tiny) == []
    assert 'waiting for PodGroup "later"' in tiny.explain("w0")
    tiny.apply(pod_group("later", 1))
    tiny.wait()
    assert bound(tiny) == ["w0"]


def test_basic_policy_schedules_pod_by_pod(tiny):
    pg = {"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup", "metadata": {"name": "b"},
          "spec": {"schedulingPolicy": {"basic": {}}}}
    tiny.apply([pg] + [worker(f"w{i}", pod_group="b") for i in range(3)])
    tiny.wait()
    assert bound(tiny) == ["w0", "w1"]
