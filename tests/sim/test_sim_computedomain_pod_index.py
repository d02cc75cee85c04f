"""The ComputeDomain controller retries a workload pod whose channel claim waits for the domain's
daemon (the plugin refuses "current node not ready in ComputeDomain" until the daemon is Ready,
and the kubelet retries). It finds those pods through an index of pods by node that it builds from
the store the first time it needs it and keeps from the watch afterwards: pods bound before the
index existed, and pods bound, deleted and bound again after, must all be found
(kubernetes-sigs/dra-driver-nvidia-gpu, cmd/compute-domain-kubelet-plugin: the prepare of a
channel claim fails until the node's IMEX daemon is ready; the kubelet retries it)."""

from __future__ import annotations

from labkit.cluster.backends import connect
from tests.paths import TEST_DATA

DEMO = TEST_DATA / "upstream" / "nvidia-computedomain" / "channel-injection.yaml"
NAME = "imex-channel-injection"


def _plain_pod(name: str) -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"containers": [{"name": "c", "image": "busybox"}]}}


def _runs_after_a_refusal(c) -> str:
    pod = c.get("Pod", NAME)
    assert pod["status"]["phase"] == "Running", pod["status"]
    msgs = [e["message"] for e in c.list("Event") if e["involvedObject"]["name"] == NAME and e["type"] == "Warning"]
    assert any("current node not ready in ComputeDomain" in m for m in msgs), msgs
    return pod["spec"]["nodeName"]


def test_a_waiting_channel_pod_is_retried_whether_bound_before_or_after_the_index_is_built():
    c = connect("sim", "nvl72-rack", progress=False)
    c.apply([_plain_pod("before-1"), _plain_pod("before-2")])  # bound while no domain exists
    c.wait()
    assert all(p["spec"].get("nodeName") for p in c.list("Pod"))
    c.apply(DEMO)
    c.wait()
    first = _runs_after_a_refusal(c)
    # the pods go, others come and go, and the demo runs again on an index kept from the watch
    c.delete("Pod", NAME)
    c.delete("ComputeDomain", NAME)
    c.delete("Pod", "before-1")
    c.wait()
    c.apply([_plain_pod("after-1")])
    c.wait()
    for e in c.list("Event"):
        if e["involvedObject"]["name"] == NAME:
            c.delete("Event", e["metadata"]["name"])
    c.apply(DEMO)
    c.wait()
    assert _runs_after_a_refusal(c).startswith("rack-") and first.startswith("rack-")
    assert c.get("ComputeDomain", NAME)["status"]["status"] == "Ready"
