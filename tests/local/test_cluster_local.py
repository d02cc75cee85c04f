"""The `local` backend against the real control-plane binaries (kube-apiserver, etcd,
kube-scheduler, kube-controller-manager) and the fake GPU driver's real gRPC plugin.

One cluster is shared by the module (starting one costs seconds); the crash test starts its own.
Skipped only when the binaries are not built and Go is not available to build them.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from labkit.cluster.backends.local import LocalCluster, binaries
from labkit.cluster.backends.local.procs import pid_alive, port_open
from tests.localutil import need_local_binaries

pytestmark = pytest.mark.local

PROFILE = {
    "name": "local-test",
    "kubernetesVersion": "1.37",
    "nodes": [
        {"name": "dgx-0", "nodeProfile": "dgx-a100", "labels": {"pool": "training"}},
        {"name": "t4-0", "nodeProfile": "t4-inference"},
    ],
}
TINY = {"name": "local-tiny", "kubernetesVersion": "1.37",
        "nodes": [{"name": "solo", "nodeProfile": "t4-inference"}]}


@pytest.fixture(scope="module")
def cluster():
    need_local_binaries()
    c = LocalCluster(progress=False)
    c.up(PROFILE)
    print(f"\nlocal cluster up in {c.timings['total']}s: {c.timings}", file=sys.stderr)
    yield c
    c.down()


def _running(c: LocalCluster, *pods: str, ns: str = "default"):
    def ok(_c) -> bool:
        return all((c.get("pods", p, ns).get("status") or {}).get("phase") == "Running" for p in pods)
    return ok


def _pod(name: str, claims: list[dict], node_selector: dict | None = None) -> dict:
    spec: dict = {
        "containers": [{"name": "main", "image": "busybox", "command": ["sleep", "infinity"],
                        "resources": {"claims": [{"name": c["name"]} for c in claims]}}],
        "resourceClaims": claims, "terminationGracePeriodSeconds": 30,
    }
    if node_selector:
        spec["nodeSelector"] = node_selector
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"}, "spec": spec}


def _gpu_claim_spec(count: int = 1, product: str = "A100") -> dict:
    return {"devices": {"requests": [{"name": "gpu", "exactly": {
        "deviceClassName": "gpu.nvidia.com", "count": count,
        "selectors": [{"cel": {"expression":
                               f"device.attributes['gpu.nvidia.com'].productName.contains('{product}')"}}]}}]}}


def test_components_run_with_the_built_version(cluster: LocalCluster) -> None:
    assert "local cluster, profile" in cluster.status()
    st = cluster.status_info()
    names = [c["name"] for c in st["components"]]
    assert names[:4] == ["etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler"]
    assert {"plugin-dgx-0", "plugin-t4-0"} <= set(names)
    assert all(c["running"] for c in st["components"])
    assert all(all(c["portsOpen"]) for c in st["components"])
    assert st["kubernetesVersion"].startswith("v1.37.")
    out = subprocess.run([str(cluster.binaries.bin_dir / "kube-apiserver"), "--version"],
                         capture_output=True, text=True, check=True).stdout
    assert out.strip() == f"Kubernetes {cluster.server_version}"
    # the server says the same
    assert cluster.kube.request("GET", "/version")["gitVersion"] == cluster.server_version


def test_nodes_are_ready_with_profile_labels(cluster: LocalCluster) -> None:
    nodes = {n["metadata"]["name"]: n for n in cluster.list("nodes")}
    assert set(nodes) == {"dgx-0", "t4-0"}
    assert nodes["dgx-0"]["metadata"]["labels"]["pool"] == "training"
    ready = {c["type"]: c["status"] for c in nodes["dgx-0"]["status"]["conditions"]}
    assert ready["Ready"] == "True"
    assert not [t for t in nodes["dgx-0"]["spec"].get("taints", []) if "not-ready" in t["key"]]


def test_heartbeats_renew_the_node_lease(cluster: LocalCluster) -> None:
    path = "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/t4-0"
    first = cluster.kube.request("GET", path)["spec"]["renewTime"]
    assert cluster.wait(lambda c: c.kube.request("GET", path)["spec"]["renewTime"] != first, timeout=60)
    node = cluster.get("nodes", "t4-0", None)
    assert {c["type"]: c["status"] for c in node["status"]["conditions"]}["Ready"] == "True"


@pytest.mark.skipif(not Path("/usr/bin/kubectl").exists() and not shutil.which("kubectl"), reason="no kubectl")
def test_kubectl_sees_the_published_resourceslices(cluster: LocalCluster) -> None:
    kubectl = shutil.which("kubectl") or "/usr/bin/kubectl"
    out = subprocess.run([kubectl, "--kubeconfig", str(cluster.kubeconfig), "get", "resourceslices", "-o", "json"],
                         capture_output=True, text=True, check=True, timeout=60).stdout
    items = json.loads(out)["items"]
    pools = {(s["spec"]["driver"], s["spec"]["pool"]["name"]) for s in items}
    assert ("gpu.nvidia.com", "dgx-0") in pools and ("gpu.nvidia.com", "t4-0") in pools
    dgx_gpus = [d for s in items if s["spec"]["pool"]["name"] == "dgx-0" and s["spec"]["driver"] == "gpu.nvidia.com"
                for d in s["spec"]["devices"]]
    assert len(dgx_gpus) >= 8
    classes = subprocess.run([kubectl, "--kubeconfig", str(cluster.kubeconfig), "get", "deviceclasses", "-o", "name"],
                             capture_output=True, text=True, check=True, timeout=60).stdout
    assert "deviceclass.resource.k8s.io/gpu.nvidia.com" in classes


def test_template_claim_is_allocated_by_the_scheduler_and_pod_runs_with_cdi_env(cluster: LocalCluster) -> None:
    cluster.apply([
        {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
         "metadata": {"name": "one-a100", "namespace": "default"}, "spec": {"spec": _gpu_claim_spec()}},
        _pod("trainer", [{"name": "gpu", "resourceClaimTemplateName": "one-a100"}]),
    ])
    assert cluster.wait(_running(cluster, "trainer"), timeout=120), cluster.explain("trainer")
    pod = cluster.get("pods", "trainer")
    assert pod["spec"]["nodeName"] == "dgx-0"  # only the DGX has A100s
    claim_name = pod["status"]["resourceClaimStatuses"][0]["resourceClaimName"]
    assert claim_name.startswith("trainer-gpu-")
    claim = cluster.get("resourceclaims", claim_name)
    results = claim["status"]["allocation"]["devices"]["results"]
    assert len(results) == 1 and results[0]["pool"] == "dgx-0" and results[0]["driver"] == "gpu.nvidia.com"
    assert [r["uid"] for r in claim["status"]["reservedFor"]] == [pod["metadata"]["uid"]]
    env = cluster.pod_env("trainer")
    assert env["FAKE_DRA_CLAIM"] == f"default/{claim_name}"
    assert env["FAKE_GPU_DEVICES"] == results[0]["device"]
    assert env["FAKE_GPU_0_POOL"] == "dgx-0"
    assert "A100" in env["FAKE_GPU_0_PRODUCT"]
    # the env came from a CDI spec the plugin wrote in the node's CDI dir
    specs = list(cluster.node_dirs("dgx-0")["cdi"].iterdir())
    assert any(claim["metadata"]["uid"] in p.name for p in specs)
    rows = [p for p in cluster.placements() if p.pod == "trainer"]
    assert [(r.node, r.device) for r in rows] == [("dgx-0", results[0]["device"])]

    # deletion: the agent unprepares (CDI spec removed) and finalises; the claim goes with the pod
    cluster.delete("pods", "trainer")
    assert cluster.wait(lambda c: not [p for p in c.list("pods") if p["metadata"]["name"] == "trainer"], timeout=60)
    assert not any(claim["metadata"]["uid"] in p.name for p in cluster.node_dirs("dgx-0")["cdi"].iterdir())
    assert cluster.wait(lambda c: claim_name not in [x["metadata"]["name"] for x in c.list("resourceclaims")],
                        timeout=60)


def test_shared_claim_serves_two_pods_with_the_same_device(cluster: LocalCluster) -> None:
    cluster.apply([
        {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
         "metadata": {"name": "shared-t4", "namespace": "default"}, "spec": _gpu_claim_spec(product="T4")},
        _pod("infer-a", [{"name": "gpu", "resourceClaimName": "shared-t4"}]),
        _pod("infer-b", [{"name": "gpu", "resourceClaimName": "shared-t4"}]),
    ])
    assert cluster.wait(_running(cluster, "infer-a", "infer-b"), timeout=120), cluster.explain("infer-b")
    a, b = cluster.get("pods", "infer-a"), cluster.get("pods", "infer-b")
    assert a["spec"]["nodeName"] == b["spec"]["nodeName"] == "t4-0"
    claim = cluster.get("resourceclaims", "shared-t4")
    assert {r["uid"] for r in claim["status"]["reservedFor"]} == {a["metadata"]["uid"], b["metadata"]["uid"]}
    assert cluster.pod_env("infer-a")["FAKE_GPU_DEVICES"] == cluster.pod_env("infer-b")["FAKE_GPU_DEVICES"]
    # one pod leaves: the claim stays prepared for the other
    cluster.delete("pods", "infer-a")
    assert cluster.wait(lambda c: "infer-a" not in [p["metadata"]["name"] for p in c.list("pods")], timeout=60)
    spec_dir = cluster.node_dirs("t4-0")["cdi"]
    assert any(claim["metadata"]["uid"] in p.name for p in spec_dir.iterdir())
    cluster.delete("pods", "infer-b")
    assert cluster.wait(lambda c: "infer-b" not in [p["metadata"]["name"] for p in c.list("pods")], timeout=60)
    assert not any(claim["metadata"]["uid"] in p.name for p in spec_dir.iterdir())


def test_unplaceable_pod_stays_pending_with_the_schedulers_reason(cluster: LocalCluster) -> None:
    cluster.apply([
        {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
         "metadata": {"name": "nine-a100", "namespace": "default"}, "spec": {"spec": _gpu_claim_spec(count=9)}},
        _pod("greedy", [{"name": "gpu", "resourceClaimTemplateName": "nine-a100"}]),
    ])

    def unschedulable(c) -> bool:
        conds = (c.get("pods", "greedy").get("status") or {}).get("conditions") or []
        return any(x["type"] == "PodScheduled" and x.get("reason") == "Unschedulable" for x in conds)

    assert cluster.wait(unschedulable, timeout=120)
    pod = cluster.get("pods", "greedy")
    assert pod["status"]["phase"] == "Pending" and not pod["spec"].get("nodeName")
    cond = next(x for x in pod["status"]["conditions"] if x["type"] == "PodScheduled")
    assert "cannot allocate all claims" in cond["message"]
    text = cluster.explain("greedy")
    assert "cannot allocate all claims" in text and "greedy" in text
    assert "FailedScheduling" in text
    # labkit's own allocator, run over the live objects (sim format), agrees on every node
    assert "allocator on dgx-0:" in text
    assert "allocator on dgx-0: unsatisfiable" in text and "allocator on t4-0: unsatisfiable" in text
    assert "kube-scheduler says: Unschedulable" in text
    assert any(e.get("reason") == "FailedScheduling" for e in cluster.events())
    cluster.delete("pods", "greedy")


def test_pods_in_a_new_namespace_can_be_created_at_once(cluster: LocalCluster) -> None:
    pod = _pod("nsd", [])
    pod["metadata"]["namespace"] = "team-a"
    out = cluster.apply([{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a"}}, pod])
    assert [o["kind"] for o in out] == ["Namespace", "Pod"]
    assert cluster.wait(_running(cluster, "nsd", ns="team-a"), timeout=60)
    assert cluster.pod_env("nsd", "team-a") == {}
    cluster.delete("pods", "nsd", "team-a")


def test_dra_backed_extended_resource_gets_its_devices_prepared(cluster: LocalCluster) -> None:
    # no device plugin: the gpu.nvidia.com class's extendedResourceName makes the scheduler
    # allocate `nvidia.com/gpu: 2` through DRA; the agent prepares the claim it made
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "legacy", "namespace": "default"},
           "spec": {"nodeSelector": {"kubernetes.io/hostname": "t4-0"}, "containers": [
               {"name": "main", "image": "busybox", "resources": {"limits": {"nvidia.com/gpu": 2}}}]}}
    cluster.apply(pod)
    assert cluster.wait(_running(cluster, "legacy"), timeout=120), cluster.explain("legacy")
    st = cluster.get("pods", "legacy")["status"]["extendedResourceClaimStatus"]
    claim = cluster.get("resourceclaims", st["resourceClaimName"])
    devices = sorted(r["device"] for r in claim["status"]["allocation"]["devices"]["results"])
    assert len(devices) == 2
    env = cluster.pod_env("legacy")
    assert sorted(env["FAKE_GPU_DEVICES"].split(",")) == devices
    cluster.delete("pods", "legacy")
    assert cluster.wait(lambda c: "legacy" not in [p["metadata"]["name"] for p in c.list("pods")], timeout=60)


def test_bad_object_is_a_one_line_cluster_error(cluster: LocalCluster) -> None:
    from labkit.cluster import ClusterError, NotFound

    with pytest.raises(ClusterError) as err:
        cluster.apply({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                       "metadata": {"name": "bad", "namespace": "default"},
                       "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
                           "deviceClassName": "gpu.nvidia.com", "count": -1}}]}}})
    msg = str(err.value)
    assert msg.startswith("ResourceClaim/bad:") and "count" in msg and "\n" not in msg
    with pytest.raises(NotFound):
        cluster.get("pods", "no-such-pod")


def test_older_profile_runs_on_the_newer_binaries_by_emulation(cluster: LocalCluster) -> None:
    assert cluster.kube.resource("devicetaintrules").api_version == "resource.k8s.io/v1"  # GA in 1.37
    if binaries.find("1.36") is not None:
        pytest.skip("exact 1.36 binaries are cached; emulation is not used")
    old = LocalCluster(progress=False).up({**TINY, "name": "local-136", "kubernetesVersion": "1.36"})
    try:
        assert old.emulated_version == "1.36" and old.server_version == cluster.server_version
        version = old.kube.request("GET", "/version")
        assert (version["emulationMajor"], version["emulationMinor"]) == ("1", "36")
        from labkit.cluster.kube import ApiError

        with pytest.raises(ApiError, match="not served"):  # DRADeviceTaintRules: beta, off in 1.36
            old.kube.resource("devicetaintrules")
        old.apply([{"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
                    "metadata": {"name": "one-t4", "namespace": "default"},
                    "spec": {"spec": _gpu_claim_spec(product="T4")}},
                   _pod("p", [{"name": "gpu", "resourceClaimTemplateName": "one-t4"}])])
        assert old.wait(_running(old, "p"), timeout=120), old.explain("p")
        assert old.pod_env("p")["FAKE_GPU_0_POOL"] == "solo"
    finally:
        old.down()


@pytest.mark.parametrize("victim", ["kube-scheduler", "kube-apiserver"])
def test_warm_start_crash_and_down_leave_nothing_behind(victim: str) -> None:
    need_local_binaries()
    t0 = time.monotonic()
    c = LocalCluster(progress=False).up(TINY)
    start = time.monotonic() - t0
    print(f"\nwarm start (1 node): {start:.1f}s {c.timings}", file=sys.stderr)
    state = c.state_dir
    comps = c.components()
    pids = [x.pid for x in comps]
    ports = [p for x in comps for p in x.ports]
    assert all(pid_alive(p) for p in pids) and all(port_open(p) for p in ports)
    crashed = next(x for x in comps if x.name == victim)
    os.kill(crashed.pid, signal.SIGKILL)  # one component crashes mid-run
    crashed.popen.wait(10)
    from labkit.cluster import ClusterError

    with pytest.raises(ClusterError, match=f"{victim} .* exited"):
        c.wait(timeout=5)
    c.down()
    assert not [p for p in pids if pid_alive(p)]
    assert not [p for p in ports if port_open(p)]
    assert state is not None and not state.exists()
    c.down()  # idempotent
