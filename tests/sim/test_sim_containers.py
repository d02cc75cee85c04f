"""What each container sees (per-container CDI devices) and the sim lifecycle of upstream
workloads: Jobs complete, unplaceable gangs settle with a reason, failed device preparation shows
ContainerCreating with the driver's message."""

from __future__ import annotations

import json

import pytest

from labkit.cli import main
from labkit.cluster import ClusterError, connect

TWO_REQUESTS = """
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: two}
spec:
  spec:
    devices:
      requests:
      - {name: a, exactly: {deviceClassName: gpu.nvidia.com}}
      - {name: b, exactly: {deviceClassName: gpu.nvidia.com}}
---
apiVersion: v1
kind: Pod
metadata: {name: p}
spec:
  initContainers:
  - {name: init, image: x, resources: {claims: [{name: h}]}}
  containers:
  - {name: ca, image: x, resources: {claims: [{name: g, request: a}, {name: h}]}}
  - {name: cb, image: x, resources: {claims: [{name: g, request: b}]}}
  - {name: none, image: x}
  resourceClaims:
  - {name: g, resourceClaimTemplateName: two}
  - {name: h, resourceClaimTemplateName: two}
"""


def gpus(env: dict[str, str]) -> list[str]:
    return env.get("FAKE_GPU_DEVICES", "").split(",") if env.get("FAKE_GPU_DEVICES") else []


@pytest.fixture
def tiny():
    return connect("sim", "tiny", progress=False)


def test_each_container_sees_exactly_its_requests(tiny):
    tiny.apply(TWO_REQUESTS)
    tiny.wait()
    claims = {c["metadata"]["annotations"]["resource.kubernetes.io/pod-claim-name"]: c for c in tiny.list("ResourceClaim")}
    dev = {(name, r["request"]): r["device"] for name, c in claims.items()
           for r in c["status"]["allocation"]["devices"]["results"]}
    ca, cb = tiny.pod_env("p", container="ca"), tiny.pod_env("p", container="cb")
    assert gpus(ca) == [dev[("g", "a")], dev[("h", "a")], dev[("h", "b")]]  # request a of g, all of h
    assert gpus(cb) == [dev[("g", "b")]]
    assert ca["FAKE_GPU_COUNT"] == "3" and len(ca["NVIDIA_VISIBLE_DEVICES"].split(",")) == 3
    assert gpus(tiny.pod_env("p", container="init")) == [dev[("h", "a")], dev[("h", "b")]]
    assert tiny.pod_env("p", container="none") == {}
    # two claims of the same driver in one container: per-device variables never overwrite each other
    for name in gpus(ca):
        assert ca[f"FAKE_GPU_{name.split('-', 1)[1]}_NAME"] == name
    # no container name: the union over the pod's containers
    assert sorted(gpus(tiny.pod_env("p"))) == sorted(dev.values())
    with pytest.raises(ClusterError, match="no container 'nope'"):
        tiny.pod_env("p", container="nope")


def test_simulate_json_per_container(capsys, tmp_path):
    f = tmp_path / "p.yaml"
    f.write_text(TWO_REQUESTS)
    assert main(["simulate", "-f", str(f), "--profile", "tiny", "-o", "json"]) == 0
    rep = json.loads(capsys.readouterr().out)
    pod = rep["pods"][0]
    assert [c["name"] for c in pod["containers"]] == ["init", "ca", "cb", "none"]
    assert [len(gpus(c["env"])) for c in pod["containers"]] == [2, 3, 1, 0]
    assert [e["reason"] for e in pod["events"]] == ["Scheduled", "Started", "Started", "Started"]


BAD_CONFIG = """
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: bad}
spec:
  devices:
    requests:
    - {name: gpu, exactly: {deviceClassName: gpu.nvidia.com}}
    config:
    - opaque:
        driver: gpu.nvidia.com
        parameters: {apiVersion: resource.nvidia.com/v1beta1, kind: GpuConfig, sharing: {strategy: Magic}}
---
apiVersion: v1
kind: Pod
metadata: {name: p}
spec:
  containers: [{name: c, image: x, resources: {claims: [{name: g}]}}]
  resourceClaims: [{name: g, resourceClaimName: bad}]
"""


def test_failed_preparation_is_container_creating_with_the_drivers_message(capsys, tmp_path):
    f = tmp_path / "bad.yaml"
    f.write_text(BAD_CONFIG)
    assert main(["simulate", "-f", str(f), "--profile", "tiny", "-o", "json"]) == 0
    pod = json.loads(capsys.readouterr().out)["pods"][0]
    assert (pod["phase"], pod["reason"], pod["node"]) == ("Pending", "ContainerCreating", "node-0")
    failed = [e for e in pod["events"] if e["reason"] == "FailedPrepareDynamicResources"]
    assert len(failed) == 1 and failed[0]["type"] == "Warning"
    assert "unknown GPU sharing strategy: Magic" in failed[0]["message"]


JOB = """
apiVersion: batch/v1
kind: Job
metadata: {name: train}
spec:
  completions: 3
  parallelism: 1
  template:
    spec:
      restartPolicy: Never
      containers: [{name: c, image: x, command: [sleep, "9999"]}]
"""


def test_job_without_annotation_completes_after_the_default_duration(tmp_path, capsys):
    f = tmp_path / "job.yaml"
    f.write_text(JOB)
    assert main(["simulate", "-f", str(f), "--profile", "tiny", "--advance", "179", "-o", "json"]) == 0
    phases = sorted(p["phase"] for p in json.loads(capsys.readouterr().out)["pods"])
    assert phases == ["Running", "Succeeded", "Succeeded"]  # 60 s each, one at a time
    assert main(["simulate", "-f", str(f), "--profile", "tiny", "--advance", "181", "-o", "json"]) == 0
    assert [p["phase"] for p in json.loads(capsys.readouterr().out)["pods"]] == ["Succeeded"] * 3
    c = connect("sim", "tiny", progress=False, default_duration=10)
    c.apply(JOB)
    c.advance(31)
    assert [p["status"]["phase"] for p in c.list("Pod")] == ["Succeeded"] * 3


def test_restart_always_pods_keep_running(tiny):
    tiny.apply("apiVersion: v1\nkind: Pod\nmetadata: {name: web}\nspec:\n  containers: [{name: c, image: x}]\n")
    tiny.advance(3600)
    assert tiny.get("Pod", "web")["status"]["phase"] == "Running"


GANG = """
apiVersion: scheduling.k8s.io/v1alpha2
kind: PodGroup
metadata: {name: big}
spec:
  schedulingPolicy: {gang: {minCount: 3}}
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: four}
spec:
  spec:
    devices:
      requests: [{name: g, exactly: {deviceClassName: gpu.nvidia.com, count: 4}}]
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: big}
spec:
  replicas: 3
  selector: {matchLabels: {app: big}}
  template:
    metadata: {labels: {app: big}}
    spec:
      schedulingGroup: {podGroupName: big}
      containers: [{name: c, image: x, resources: {claims: [{name: g}]}}]
      resourceClaims: [{name: g, resourceClaimTemplateName: four}]
"""


def test_unplaceable_gang_settles_pending_with_a_reason(tmp_path, capsys):
    f = tmp_path / "gang.yaml"
    f.write_text(GANG)  # 3 x 4 GPUs on one 8-GPU node: all-or-nothing, so none
    assert main(["simulate", "-f", str(f), "--profile", "tiny", "-o", "json"]) == 0
    pods = json.loads(capsys.readouterr().out)["pods"]
    assert [(p["phase"], p["reason"]) for p in pods] == [("Pending", "Unschedulable")] * 3
    assert all(any('pod group "big": only 2 of minCount 3 pods fit' in e["message"] for e in p["events"]) for p in pods)


PODGROUP_CLAIM = """
apiVersion: scheduling.k8s.io/v1alpha2
kind: PodGroup
metadata: {name: team}
spec:
  schedulingPolicy: {basic: {}}
  resourceClaims: [{name: gpu, resourceClaimTemplateName: one}]
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: one}
spec:
  spec:
    devices:
      requests: [{name: g, exactly: {deviceClassName: gpu.nvidia.com}}]
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: team}
spec:
  replicas: 3
  selector: {matchLabels: {app: team}}
  template:
    metadata: {labels: {app: team}}
    spec:
      schedulingGroup: {podGroupName: team}
      containers: [{name: c, image: x, resources: {claims: [{name: gpu}]}}]
      resourceClaims: [{name: gpu, resourceClaimTemplateName: one}]
"""


def test_podgroup_claim_is_one_claim_shared_by_the_group(tiny):
    tiny.apply(PODGROUP_CLAIM)
    tiny.wait()
    claims = tiny.list("ResourceClaim")
    assert len(claims) == 1 and claims[0]["metadata"]["ownerReferences"][0]["kind"] == "PodGroup"
    assert claims[0]["status"]["reservedFor"] == [{"apiGroup": "scheduling.k8s.io", "resource": "podgroups",
                                                   "name": "team", "uid": tiny.get("PodGroup", "team")["metadata"]["uid"]}]
    pods = tiny.list("Pod")
    assert [p["status"]["phase"] for p in pods] == ["Running"] * 3
    assert len({tiny.pod_env(p["metadata"]["name"])["NVIDIA_VISIBLE_DEVICES"] for p in pods}) == 1
