"""ComputeDomains on the `local` backend (issue 27, "same answer everywhere"): the real
kube-apiserver, scheduler and controller-manager (DaemonSets, claims), NVIDIA's ComputeDomain CRD,
fake_gpus' ComputeDomain controller and the fake driver's compute-domain plugin over the real
kubelet plugin gRPC API. NVIDIA's channel-injection demo, unchanged, gives the answer the sim gives.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from labkit.cluster import connect
from labkit.cluster.local import LocalCluster
from tests.localutil import need_local_binaries

pytestmark = pytest.mark.local

UP = Path(__file__).parent / "data" / "upstream" / "nvidia-computedomain"
PROFILE = {"name": "local-nvl72", "kubernetesVersion": "1.37", "nodes": [
    {"namePrefix": "tray-", "count": 2, "nodeProfile": "gb200-nvl72-tray",
     "labels": {"nvidia.com/gpu.clique": "5f0c9a3e-1d2b-4c6e-8a7f-3b9d2e1c0a01.1"}}]}


def _outcome(c) -> dict:
    c.apply(UP / "channel-injection.yaml")
    assert c.wait(lambda k: (k.get("Pod", "imex-channel-injection").get("status") or {}).get("phase") == "Running"
                  and (k.get("ComputeDomain", "imex-channel-injection").get("status") or {}).get("status") == "Ready",
                  timeout=120)
    pod = c.get("Pod", "imex-channel-injection")
    cd = c.get("ComputeDomain", "imex-channel-injection")
    env = c.pod_env("imex-channel-injection")
    node = pod["spec"]["nodeName"]  # kube-scheduler breaks the tie between the two trays at random
    labels = c.get("Node", node)["metadata"]["labels"]
    return {"channels": env.get("FAKE_IMEX_CHANNELS"), "driver": env.get("FAKE_DRA_DRIVER"),
            "status": cd["status"]["status"], "domainNodes": [n["name"] == node for n in cd["status"]["nodes"]],
            "cliques": [n["cliqueID"] for n in cd["status"]["nodes"]],
            "nodeLabelled": labels.get("resource.nvidia.com/computeDomain") == cd["metadata"]["uid"],
            "finalizers": cd["metadata"]["finalizers"],
            "template": sorted(c.get("ResourceClaimTemplate", "imex-channel-0")["metadata"]["labels"])}


def test_channel_injection_demo_gives_the_same_answer_on_local_as_on_sim():
    need_local_binaries()
    sim = connect("sim", PROFILE, progress=False)
    want = _outcome(sim)
    local = LocalCluster()
    local.up(PROFILE)
    try:
        got = _outcome(local)
        assert got == want
        assert got["channels"] == "channel0" and got["domainNodes"] == [True] and got["nodeLabelled"]
        local.delete("Pod", "imex-channel-injection")
        local.delete("ComputeDomain", "imex-channel-injection")
        assert local.wait(lambda k: not k.list("ComputeDomain") and not k.list("ResourceClaimTemplate"), timeout=60)
        assert not [n for n in local.list("Node") if "resource.nvidia.com/computeDomain" in n["metadata"]["labels"]]
    finally:
        local.down()
