"""The sim backend end to end: claim controller, shared claims, deallocation, workloads, filters."""

from __future__ import annotations

import re

import pytest

from labkit.cluster import ClusterError, NotFound, connect
from labkit.cluster.describe import describe
from tests import builders as b

SUFFIX = "[bcdfghjklmnpqrstvwxz2456789]{5}"

TEMPLATE_1GPU = b.claim_template("one-gpu")


def profile(*nodes, gates=None):
    return {"name": "test", "kubernetesVersion": "1.37", "featureGates": gates or {},
            "nodes": [dict(n) for n in nodes]}


@pytest.fixture
def tiny():
    with connect("sim", "tiny", progress=False) as c:
        yield c


def phase(c, name, ns="default"):
    p = c.get("Pod", name, ns)
    return p["spec"].get("nodeName"), p["status"].get("phase")


def test_template_claim_named_like_kubernetes(tiny):
    tiny.apply(TEMPLATE_1GPU)
    tiny.apply(b.pod("trainer", templates="one-gpu"))
    tiny.wait()
    p = tiny.get("Pod", "trainer")
    [status] = p["status"]["resourceClaimStatuses"]
    assert status["name"] == "gpu"
    assert re.fullmatch(f"trainer-gpu-{SUFFIX}", status["resourceClaimName"])
    claim = tiny.get("ResourceClaim", status["resourceClaimName"])
    m = claim["metadata"]
    assert m["generateName"] == "trainer-gpu-"
    assert m["annotations"]["resource.kubernetes.io/pod-claim-name"] == "gpu"
    assert m["ownerReferences"] == [{"apiVersion": "v1", "kind": "Pod", "name": "trainer",
                                     "uid": p["metadata"]["uid"], "controller": True, "blockOwnerDeletion": True}]
    assert m["finalizers"] == ["resource.kubernetes.io/delete-protection"]
    assert claim["status"]["reservedFor"] == [{"resource": "pods", "name": "trainer", "uid": p["metadata"]["uid"]}]
    assert claim["status"]["allocation"]["devices"]["results"][0]["device"] == "gpu-0"
    assert phase(tiny, "trainer") == ("node-0", "Running")
    env = tiny.pod_env("trainer")
    assert env.get("NVIDIA_VISIBLE_DEVICES", "").startswith("GPU-")


def test_template_claim_deleted_with_pod_and_device_freed(tiny):
    tiny.apply(TEMPLATE_1GPU)
    tiny.apply([b.pod(f"p{i}", templates="one-gpu") for i in range(9)])  # 8 GPUs on node-0
    tiny.wait()
    assert phase(tiny, "p8") == (None, "Pending")
    assert "cannot allocate all claims" in tiny.get("Pod", "p8")["status"]["conditions"][0]["message"]
    used = tiny.get("ResourceClaim", tiny.get("Pod", "p0")["status"]["resourceClaimStatuses"][0]["resourceClaimName"])
    tiny.delete("Pod", "p0")
    tiny.wait()
    with pytest.raises(NotFound):
        tiny.get("ResourceClaim", used["metadata"]["name"])
    assert phase(tiny, "p8") == ("node-0", "Running")
    claim8 = tiny.get("ResourceClaim", tiny.get("Pod", "p8")["status"]["resourceClaimStatuses"][0]["resourceClaimName"])
    assert claim8["status"]["allocation"]["devices"]["results"][0]["device"] == \
        used["status"]["allocation"]["devices"]["results"][0]["device"]


def test_shared_claim_reserved_by_both_and_deallocated_after_last(tiny):
    tiny.apply(b.claim("shared"))
    tiny.apply([b.pod("a", claims="shared"), b.pod("b", claims="shared")])
    tiny.wait()
    claim = tiny.get("ResourceClaim", "shared")
    assert [r["name"] for r in claim["status"]["reservedFor"]] == ["a", "b"]
    assert {r["pod"] for r in tiny.placements().rows} == {"a", "b"}
    assert len({r["device"] for r in tiny.placements().rows}) == 1
    tiny.delete("Pod", "a")
    tiny.wait()
    claim = tiny.get("ResourceClaim", "shared")
    assert [r["name"] for r in claim["status"]["reservedFor"]] == ["b"]
    assert claim["status"]["allocation"]
    tiny.delete("Pod", "b")
    tiny.wait()
    claim = tiny.get("ResourceClaim", "shared")
    assert "allocation" not in claim.get("status", {})
    assert "finalizers" not in claim["metadata"]


def test_missing_named_claim_keeps_pod_pending_with_explanation(tiny):
    tiny.apply(b.pod("lonely", claims="nope"))
    tiny.wait()
    assert phase(tiny, "lonely") == (None, "Pending")
    assert 'could not find ResourceClaim "default/nope" (DynamicResources PreEnqueue, Unschedulable)' in tiny.explain("lonely")


def test_deployment_replicaset_pod_names_and_scaling(tiny):
    tiny.apply("""
apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: 3
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec: {containers: [{name: c, image: nginx}]}
""")
    tiny.wait()
    [rs] = tiny.list("ReplicaSet")
    rs_name = rs["metadata"]["name"]
    assert re.fullmatch(r"web-[bcdfghjklmnpqrstvwxz2456789]+", rs_name)
    assert rs["metadata"]["ownerReferences"][0]["name"] == "web"
    pods = tiny.list("Pod")
    assert len(pods) == 3
    for p in pods:
        assert re.fullmatch(f"{rs_name}-{SUFFIX}", p["metadata"]["name"])
        assert p["metadata"]["labels"]["pod-template-hash"] == rs_name.split("-", 1)[1]
        assert p["status"]["phase"] == "Running"
    assert tiny.get("Deployment", "web")["status"]["readyReplicas"] == 3
    d = tiny.get("Deployment", "web")
    tiny.apply({**d, "spec": {**d["spec"], "replicas": 1}})
    tiny.wait()
    assert len(tiny.list("Pod")) == 1


def test_job_pods_succeed_after_duration_and_release_gpus(tiny):
    tiny.apply(TEMPLATE_1GPU)
    tiny.apply("""
apiVersion: batch/v1
kind: Job
metadata: {name: train}
spec:
  completions: 2
  parallelism: 2
  template:
    metadata: {annotations: {labkit.dev/duration: 90s}}
    spec:
      restartPolicy: Never
      containers: [{name: c, image: x, resources: {claims: [{name: gpu}]}}]
      resourceClaims: [{name: gpu, resourceClaimTemplateName: one-gpu}]
""")
    tiny.wait()
    pods = tiny.list("Pod")
    assert len(pods) == 2
    assert all(re.fullmatch(f"train-{SUFFIX}", p["metadata"]["name"]) for p in pods)
    assert all(p["status"]["phase"] == "Running" for p in pods)
    assert len(tiny.list("ResourceClaim")) == 2
    tiny.advance(60)
    assert all(p["status"]["phase"] == "Running" for p in tiny.list("Pod"))
    tiny.advance(31)
    assert all(p["status"]["phase"] == "Succeeded" for p in tiny.list("Pod"))
    assert tiny.list("ResourceClaim") == []  # template claims of finished pods are deleted
    job = tiny.get("Job", "train")
    assert job["status"]["succeeded"] == 2
    assert job["status"]["conditions"][0]["type"] == "Complete"


def test_wait_until_lets_sim_time_pass(tiny):
    tiny.apply(b.pod("short", annotations={"labkit.dev/duration": "5m"}))
    assert tiny.wait(until=lambda c: c.get("Pod", "short")["status"]["phase"] == "Succeeded", timeout=600)
    assert not tiny.wait(until=lambda c: False, timeout=10)


def test_taints_tolerations_and_node_selector():
    nodes = [{"name": "a", "nodeProfile": "t4-inference",
              "taints": [{"key": "gpu", "value": "only", "effect": "NoSchedule"}]},
             {"name": "b", "nodeProfile": "t4-inference", "labels": {"zone": "z1"}}]
    with connect("sim", profile(*nodes), progress=False) as c:
        c.apply([b.pod("free"), b.pod("zoned", nodeSelector={"zone": "z2"}),
                 b.pod("tolerant", node="a", tolerations=[{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}])])
        c.wait()
        assert phase(c, "free") == ("b", "Running")  # a is tainted
        assert phase(c, "tolerant") == ("a", "Running")
        msg = c.get("Pod", "zoned")["status"]["conditions"][0]["message"]
        assert msg == ("0/2 nodes are available: 1 node(s) didn't match Pod's node affinity/selector, "
                       "1 node(s) had untolerated taint(s). preemption: 0/2 nodes are available: "
                       "2 Preemption is not helpful for scheduling.")
        assert c.get("Pod", "zoned")["status"]["conditions"][0]["reason"] == "Unschedulable"
        assert "untolerated taint gpu=only:NoSchedule" in c.explain("zoned")
        ev = [e for e in c.events() if e["reason"] == "FailedScheduling"]
        assert ev and ev[0]["involvedObject"]["name"] == "zoned" and ev[0]["message"] == msg


def test_required_node_affinity():
    nodes = [{"namePrefix": "n-", "count": 2, "nodeProfile": "t4-inference"}]
    aff = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "NotIn", "values": ["n-0"]}]}]}}}
    with connect("sim", profile(*nodes), progress=False) as c:
        c.apply(b.pod("p", affinity=aff))
        c.wait()
        assert phase(c, "p") == ("n-1", "Running")


def test_cpu_and_device_plugin_extended_resources():
    nodes = [{"name": "dp", "nodeProfile": "t4-inference", "allocatable": {"cpu": "4", "example.com/widget": "2"}}]
    with connect("sim", profile(*nodes), progress=False) as c:
        big = {"resources": {"requests": {"cpu": "3"}}}
        w = {"resources": {"limits": {"example.com/widget": "1"}}}
        c.apply([
            b.pod("cpu1", containers=[{"name": "m", "image": "x", **big}]),
            b.pod("cpu2", containers=[{"name": "m", "image": "x", **big}]),
            b.pod("w1", containers=[{"name": "m", "image": "x", **w}]),
            b.pod("w2", containers=[{"name": "m", "image": "x", **w}]),
            b.pod("w3", containers=[{"name": "m", "image": "x", **w}]),
            b.pod("other", containers=[{"name": "m", "image": "x", "resources": {"limits": {"example.com/gizmo": "1"}}}]),
        ])
        c.wait()
        assert phase(c, "cpu1")[0] == "dp"
        assert "Insufficient cpu" in c.get("Pod", "cpu2")["status"]["conditions"][0]["message"]
        assert phase(c, "w1")[0] == "dp" and phase(c, "w2")[0] == "dp"
        assert "1 Insufficient example.com/widget" in c.get("Pod", "w3")["status"]["conditions"][0]["message"]
        assert "Insufficient example.com/gizmo" in c.get("Pod", "other")["status"]["conditions"][0]["message"]
        c.delete("Pod", "w1")
        c.wait()
        assert phase(c, "w3")[0] == "dp"


def test_apply_errors_are_one_line(tiny):
    with pytest.raises(ClusterError, match=r'namespace "team-a" not found; apply a Namespace named team-a first'):
        tiny.apply(b.pod("x", namespace="team-a"))
    with pytest.raises(ClusterError, match='unknown field "cuont"'):
        tiny.apply("""
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: bad}
spec: {devices: {requests: [{name: g, exactly: {deviceClassName: gpu.nvidia.com, cuont: 1}}]}}
""")
    tiny.apply([{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a"}}, b.pod("x", namespace="team-a")])
    tiny.wait()
    assert phase(tiny, "x", "team-a")[1] == "Running"


def test_claim_spec_is_immutable(tiny):
    doc = """
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: c}
spec: {devices: {requests: [{name: g, exactly: {deviceClassName: gpu.nvidia.com, count: %d}}]}}
"""
    tiny.apply(doc % 1)
    tiny.apply(doc % 1)  # unchanged: fine
    with pytest.raises(ClusterError, match="spec: field is immutable"):
        tiny.apply(doc % 2)


def test_dra_backed_extended_resource(tiny):
    """nvidia.com/gpu without a device plugin: the gpu.nvidia.com class (extendedResourceName) serves it."""
    legacy = [b.pod(f"legacy-{i}", containers=[{"name": "m", "image": "x", "resources": {"limits": {"nvidia.com/gpu": "4"}}}])
              for i in range(3)]
    tiny.apply(legacy)
    tiny.wait()
    p0 = tiny.get("Pod", "legacy-0")
    st = p0["status"]["extendedResourceClaimStatus"]
    assert st["requestMappings"] == [{"containerName": "m", "resourceName": "nvidia.com/gpu",
                                      "requestName": "container-0-request-0"}]
    assert re.fullmatch(f"legacy-0-extended-resources-{SUFFIX}", st["resourceClaimName"])
    claim = tiny.get("ResourceClaim", st["resourceClaimName"])
    assert claim["metadata"]["annotations"] == {"resource.kubernetes.io/extended-resource-claim": "true"}
    assert len(claim["status"]["allocation"]["devices"]["results"]) == 4
    assert len(tiny.pod_env("legacy-0")["NVIDIA_VISIBLE_DEVICES"].split(",")) == 4
    # explain and describe name the scheduler's claim and its devices, as for a claim the pod declares
    said = [line for line in tiny.explain("legacy-0").splitlines() if "<extended-resources>" in line]
    assert len(said) == 4 and all(f"({st['resourceClaimName']}): request container-0-request-0 -> gpu.nvidia.com/"
                                  in line for line in said), said
    assert f"<extended-resources> (claim {st['resourceClaimName']}): allocated" in describe(tiny, "Pod", "legacy-0")
    assert phase(tiny, "legacy-2") == (None, "Pending")
    assert tiny.get("Pod", "legacy-2")["status"]["conditions"][0]["message"] == \
        ("0/1 nodes are available: 1 cannot allocate all claims. preemption: 0/1 nodes are available: "
         "1 Preemption is not helpful for scheduling.")
    tiny.delete("Pod", "legacy-0")
    tiny.wait()
    with pytest.raises(NotFound):
        tiny.get("ResourceClaim", st["resourceClaimName"])
    assert phase(tiny, "legacy-2") == ("node-0", "Running")


def test_device_taint_rule_is_honoured(tiny):
    tiny.apply("""
apiVersion: resource.k8s.io/v1
kind: DeviceTaintRule
metadata: {name: broken-gpu0}
spec:
  deviceSelector: {driver: gpu.nvidia.com, pool: node-0, device: gpu-0}
  taint: {key: labkit.dev/broken, value: "true", effect: NoSchedule}
""")
    tiny.apply(TEMPLATE_1GPU)
    tiny.apply(b.pod("p", templates="one-gpu"))
    tiny.wait()
    assert [r["device"] for r in tiny.placements().rows] == ["gpu-1"]


def test_reapplying_a_bound_pod_keeps_it_and_spec_changes_are_refused(tiny):
    tiny.apply(b.pod("p"))
    tiny.wait()
    tiny.apply(b.pod("p", labels={"a": "b"}))
    tiny.wait()
    p = tiny.get("Pod", "p")
    assert p["spec"]["nodeName"] == "node-0" and p["metadata"]["labels"] == {"a": "b"}
    with pytest.raises(ClusterError, match="Pod/p: spec: Forbidden"):
        tiny.apply(b.pod("p", nodeSelector={"x": "y"}))


def test_noexecute_device_taint_evicts_and_deployment_replaces(tiny):
    tiny.apply(TEMPLATE_1GPU)
    tiny.apply("""
apiVersion: apps/v1
kind: Deployment
metadata: {name: infer}
spec:
  replicas: 1
  selector: {matchLabels: {app: infer}}
  template:
    metadata: {labels: {app: infer}}
    spec:
      containers: [{name: c, image: x, resources: {claims: [{name: gpu}]}}]
      resourceClaims: [{name: gpu, resourceClaimTemplateName: one-gpu}]
""")
    tiny.wait()
    [before] = tiny.placements().rows
    assert before["device"] == "gpu-0"
    tiny.apply("""
apiVersion: resource.k8s.io/v1
kind: DeviceTaintRule
metadata: {name: drain-gpu0}
spec:
  deviceSelector: {driver: gpu.nvidia.com, pool: node-0, device: gpu-0}
  taint: {key: labkit.dev/broken, effect: NoExecute}
""")
    tiny.wait()
    [after] = tiny.placements().rows
    assert after["pod"] != before["pod"] and after["device"] == "gpu-1"
    ev = [e for e in tiny.events() if e["reason"] == "DeviceTaintManagerEviction"]
    assert [e["involvedObject"]["name"] for e in ev] == [before["pod"]]
    assert ev[0]["message"] == "Marking for deletion"


def test_a_noexecute_rule_without_a_device_selector_evicts_nothing(tiny):
    """A DeviceTaintRule with no `deviceSelector` matches no device (kubernetes#141998, 1.37.1 on; `{}` matches
    every device), in the eviction controller as in the allocator: the pod stays, a new one is placed."""
    tiny.apply(TEMPLATE_1GPU)
    tiny.apply(b.pod("p", templates="one-gpu"))
    tiny.wait()
    tiny.apply("""
apiVersion: resource.k8s.io/v1
kind: DeviceTaintRule
metadata: {name: no-selector}
spec:
  taint: {key: labkit.dev/broken, effect: NoExecute}
""")
    tiny.apply(b.pod("q", templates="one-gpu"))
    tiny.wait()
    assert sorted(r["pod"] for r in tiny.placements().rows) == ["p", "q"]
    assert not [e for e in tiny.events() if e["reason"] == "DeviceTaintManagerEviction"]


def test_noexecute_toleration_seconds_delay_eviction(tiny):
    tiny.apply(b.claim("c", requests=[b.request("g", tolerations=[
        {"key": "labkit.dev/broken", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 30}])]))
    tiny.apply(b.pod("p", claims="c"))
    tiny.wait()
    tiny.apply({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceTaintRule", "metadata": {"name": "r"},
                "spec": {"deviceSelector": {"device": "gpu-0"}, "taint": {"key": "labkit.dev/broken", "effect": "NoExecute"}}})
    tiny.wait()
    assert phase(tiny, "p") == ("node-0", "Running")
    tiny.advance(29)
    assert phase(tiny, "p") == ("node-0", "Running")
    tiny.advance(2)
    with pytest.raises(NotFound):
        tiny.get("Pod", "p")


def test_on_change_sees_the_pod_lifecycle(tiny):
    seen = []
    tiny.on_change(lambda ev: seen.append((ev.type, ev.object["metadata"]["name"],
                                       ev.object.get("status", {}).get("phase"))), kinds=["pods"])
    tiny.apply(b.pod("w"))
    tiny.wait()
    tiny.delete("Pod", "w")
    assert seen[0] == ("ADDED", "w", "Pending")
    assert ("MODIFIED", "w", "Running") in seen
    assert seen[-1][0] == "DELETED"
    rvs = [int(r) for r in [tiny.get("Node", "node-0", None)["metadata"]["resourceVersion"]]]
    assert rvs[0] > 0
