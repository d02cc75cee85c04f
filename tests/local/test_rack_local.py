"""ComputeDomains on the `local` backend (issue 27, "same answer everywhere"): the real
kube-apiserver, scheduler and controller-manager (DaemonSets, claims), NVIDIA's ComputeDomain CRD,
fake_gpus' ComputeDomain controller and the fake driver's compute-domain plugin over the real
kubelet plugin gRPC API. NVIDIA's channel-injection demo, unchanged, gives the answer the sim gives.
"""

from __future__ import annotations

import pytest

from labkit.cluster import connect
from labkit.cluster.backends.local import LocalCluster
from tests.localutil import need_local_binaries
from tests.paths import TEST_DATA

pytestmark = pytest.mark.local

UP = TEST_DATA / "upstream" / "nvidia-computedomain"
PROFILE = "nvl72-two-trays"
LABEL = "resource.nvidia.com/computeDomain"  # the kind e2e's profile: two trays of one rack


def _outcome(c, demo: str = "channel-injection", timeout: float = 120) -> dict:
    """NVIDIA's demo applied unchanged (its ComputeDomain and Pod share the file's name), what a user
    then sees; kind's e2e (tests/e2e/test_cluster_kind_e2e.py) compares the same dict with the sim's."""
    c.apply(UP / f"{demo}.yaml")
    name, template = f"imex-{demo}", {"channel-injection": "imex-channel-0", "channel-injection-all": "tpl-imex-channels"}[demo]
    assert c.wait(lambda k: (k.get("Pod", name).get("status") or {}).get("phase") == "Running"
                  and (k.get("ComputeDomain", name).get("status") or {}).get("status") == "Ready",
                  timeout=timeout)
    pod = c.get("Pod", name)
    cd = c.get("ComputeDomain", name)
    env = c.pod_env(name)
    node = pod["spec"]["nodeName"]  # kube-scheduler breaks the tie between the two trays at random
    labels = c.get("Node", node)["metadata"]["labels"]
    uid = cd["metadata"]["uid"]
    # `kubectl get computedomaincliques -A` (the driver's namespace: dra-driver-nvidia-gpu on sim, fake-gpus
    # on local and kind); the daemon's pod IP differs between backends
    cliques = [(o["metadata"]["name"].replace(uid, "UID"), o["metadata"]["labels"],
                [(d["nodeName"] == node, d["cliqueID"], d["index"], d["status"]) for d in o.get("daemons") or []])
               for o in c.list("ComputeDomainClique") if o["metadata"]["name"].startswith(uid)]
    # the IMEX daemon's container: CLIQUE_ID and its domain, as the compute-domain plugin's CDI edits give them
    (daemon,) = [p for p in c.list("Pod") if (p["metadata"].get("labels") or {}).get(LABEL) == uid]
    read = getattr(c, "container_env", c.pod_env)  # kind: `kubectl exec env` (pod_env keeps FAKE_*/NVIDIA_* only)
    daemon_env = {k: v.replace(uid, "UID") for k, v in read(daemon["metadata"]["name"], daemon["metadata"]["namespace"]).items()
                  if k == "CLIQUE_ID" or k.startswith("COMPUTE_DOMAIN_")}
    return {"channels": env.get("FAKE_IMEX_CHANNELS"), "daemonNode": daemon["spec"]["nodeName"] == node,
            "daemonEnv": daemon_env, "driver": env.get("FAKE_DRA_DRIVER"),
            "status": cd["status"]["status"], "domainNodes": [n["name"] == node for n in cd["status"]["nodes"]],
            "cliques": [n["cliqueID"] for n in cd["status"]["nodes"]],
            "nodeLabelled": labels.get("resource.nvidia.com/computeDomain") == cd["metadata"]["uid"],
            "finalizers": cd["metadata"]["finalizers"],
            "cliqueObjects": [(n, {k: ("UID" if v == uid else v) for k, v in lab.items()}, ds) for n, lab, ds in cliques],
            "template": sorted(c.get("ResourceClaimTemplate", template)["metadata"]["labels"])}


def test_channel_injection_demos_give_the_same_answer_on_local_as_on_sim():
    """Both of NVIDIA's channel-injection demos, one after the other on one cluster (as on kind), each
    deleted with its domain: the templates, daemons and node labels go, then the domain."""
    need_local_binaries()
    local = LocalCluster()
    local.up(PROFILE)
    try:
        for demo in ("channel-injection", "channel-injection-all"):
            want = _outcome(connect("sim", PROFILE, progress=False), demo)
            got = _outcome(local, demo)
            assert got == want, demo
            assert got["domainNodes"] == [True] and got["nodeLabelled"] and got["daemonNode"]
            assert got["daemonEnv"] == {"CLIQUE_ID": "5f0c9a3e-1d2b-4c6e-8a7f-3b9d2e1c0a01.1", "COMPUTE_DOMAIN_UUID": "UID",
                                        "COMPUTE_DOMAIN_NAME": f"imex-{demo}", "COMPUTE_DOMAIN_NAMESPACE": "default"}
            assert got["channels"] == ("channel0" if demo == "channel-injection"
                                       else ",".join(f"channel{i}" for i in range(2048)))
            daemons = [p for p in local.list("Pod", "fake-gpus") if p["metadata"]["name"].startswith("computedomain-daemon-")]
            assert [p["status"].get("phase") for p in daemons] == ["Running"], demo
            local.delete("Pod", f"imex-{demo}")
            local.delete("ComputeDomain", f"imex-{demo}")
            clique = "5f0c9a3e-1d2b-4c6e-8a7f-3b9d2e1c0a01.1"
            assert got["cliqueObjects"] == [(f"UID.{clique}", {"resource.nvidia.com/computeDomain": "UID",
                                                         "resource.nvidia.com/computeDomain.cliqueID": clique},
                                       [(True, clique, 0, "Ready")])]
            assert local.wait(lambda k: not k.list("ComputeDomain") and not k.list("ResourceClaimTemplate")
                              and not k.list("DaemonSet", "fake-gpus") and not k.list("ComputeDomainClique"),
                              timeout=60), demo
            assert not [n for n in local.list("Node") if "resource.nvidia.com/computeDomain" in n["metadata"]["labels"]]
    finally:
        local.down()
