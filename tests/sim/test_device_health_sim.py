"""Device health on the sim (issue #43 item 3): `Cluster.inject_health_event` makes the sim's GPU driver
taint a device as NVIDIA's does, the sim's kubelet writes the pods' allocatedResourcesStatus, and
DeviceTaintRules evict (claims' pods and DRA-backed `nvidia.com/gpu` pods alike).

Upstream facts checked here:
- the driver's taints: kubernetes-sigs/dra-driver-nvidia-gpu cmd/gpu-kubelet-plugin/device_health.go
  (healthEventToTaint: `gpu.nvidia.com/xid=<code>` NoSchedule, effect None for the application XIDs;
  `gpu.nvidia.com/gpu-lost` NoSchedule; never NoExecute) and allocatable.go (a newer XID overwrites);
  it logs the event (klog) and records no Kubernetes Event;
- the kubelet's entries: kubernetes pkg/kubelet/cm/dra/manager.go (UpdateAllocatedResourcesStatus):
  `claim:<podClaimName>` or `claim:<podClaimName>/<request>`, one resource per prepared device of the
  claim, resourceID = the device's first CDI device ID, containers without resources.claims skipped,
  the claim's name taken from pod.status.resourceClaimStatuses only; it records no Event either;
- eviction: kubernetes pkg/controller/devicetainteviction/device_taint_eviction.go (DisruptionTarget
  DeletionByDeviceTaintManager, event DeviceTaintManagerEviction "Marking for deletion"); pods using a
  DRA-backed extended resource are evicted since 1.37.2 (CHANGELOG-1.37.md, #142492).
"""

from __future__ import annotations

import re
from types import SimpleNamespace

import pytest

from labkit.cluster import ClusterError, connect
from labkit.cluster.base import Cluster, NotFound
from labkit.errors import EXIT_INPUT, EXIT_NOT_FOUND, exit_code
from tests import builders as b

A100 = 'device.attributes["gpu.nvidia.com"].productName == "NVIDIA A100-SXM4-80GB"'
NODE = "dgx-a100-0"
SLICE = "dgx-a100-0-gpu.nvidia.com-0"


def template(name: str, count: int = 1, tolerations: list[dict] | None = None) -> dict:
    return b.claim_template(name, requests=[b.request(count=count, selectors=[A100], tolerations=tolerations or ())])


def pod_spec(tmpl: str, request: str | None = None) -> dict:
    ref = {"name": "gpu", **({"request": request} if request else {})}
    return {"containers": [{"name": "main", "image": "busybox", "resources": {"claims": [ref]}},
                           {"name": "sidecar", "image": "busybox"}],
            "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": tmpl}]}


def pod(name: str, tmpl: str, request: str | None = None) -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": pod_spec(tmpl, request)}


def job(name: str, tmpl: str) -> dict:
    spec = {**pod_spec(tmpl), "restartPolicy": "Never"}
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name}, "spec": {"template": {"spec": spec}}}


def drain(name: str, device: str | None, pool: str = NODE, value: str = "xid") -> dict:
    sel = {"driver": "gpu.nvidia.com", "pool": pool, **({"device": device} if device else {})}
    return {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceTaintRule", "metadata": {"name": name},
            "spec": {"deviceSelector": sel, "taint": {"key": "labkit.dev/maintenance", "value": value,
                                                        "effect": "NoExecute"}}}


def legacy(name: str, node: str) -> dict:
    return b.pod(name, node=node, containers=[{"name": "main", "image": "busybox",
                                               "resources": {"limits": {"nvidia.com/gpu": "1"}}}])


@pytest.fixture
def cluster():
    with connect("sim", "workshop", progress=False) as c:
        yield c


def devices_of(c, pod_name: str) -> list[str]:
    return sorted(r["device"] for r in c.placements().rows if r["pod"] == pod_name)


def taints(c, device: str, slice_name: str = SLICE) -> list[dict]:
    dev = next(d for d in c.get("ResourceSlice", slice_name, None)["spec"]["devices"] if d["name"] == device)
    return dev.get("taints") or []


def health(c, pod_name: str) -> dict[str, list[dict]]:
    """container -> its allocatedResourcesStatus (absent: no key)."""
    return {cs["name"]: cs["allocatedResourcesStatus"] for cs in c.get("Pod", pod_name)["status"]["containerStatuses"]
            if "allocatedResourcesStatus" in cs}


def started(c, *objs: dict) -> None:
    c.apply(list(objs))
    c.wait()


def test_xid_79_taints_the_device_and_the_kubelet_marks_the_pod_unhealthy(cluster):
    started(cluster, template("two", count=2), pod("train", "two"), legacy("other-node", "t4-0"))
    assert devices_of(cluster, "train") == ["gpu-0", "gpu-1"]
    assert health(cluster, "train") == {}  # no driver streamed health yet: status as before
    events = len(cluster.events())
    other = cluster.get("Pod", "other-node")

    assert cluster.inject_health_event(NODE, "gpu-1", 79) is None

    (taint,) = taints(cluster, "gpu-1")
    assert {k: v for k, v in taint.items() if k != "timeAdded"} == {
        "key": "gpu.nvidia.com/xid", "value": "79", "effect": "NoSchedule"}
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", taint["timeAdded"])  # stamped as the API server does
    assert taints(cluster, "gpu-0") == []
    # one entry for the container that references the claim; none for the sidecar
    st = health(cluster, "train")
    assert list(st) == ["main"]
    (entry,) = st["main"]
    assert entry["name"] == "claim:gpu"
    claim = cluster.get("ResourceClaim", cluster.get("Pod", "train")["status"]["resourceClaimStatuses"][0]
                        ["resourceClaimName"])
    uid = claim["metadata"]["uid"]
    assert entry["resources"] == [
        {"resourceID": f"k8s.gpu.nvidia.com/claim={uid}-gpu-0", "health": "Healthy"},
        {"resourceID": f"k8s.gpu.nvidia.com/claim={uid}-gpu-1", "health": "Unhealthy"}]
    # nothing else: the pod runs on, no Event, the other node's pod untouched
    assert cluster.get("Pod", "train")["status"]["phase"] == "Running"
    assert len(cluster.events()) == events
    assert cluster.get("Pod", "other-node") == other


def test_a_new_pod_avoids_the_tainted_gpu_and_explain_names_the_taint(cluster):
    started(cluster, template("one"), template("eight", count=8))
    cluster.inject_health_event(NODE, "gpu-0", 79)
    started(cluster, pod("a", "one"))
    assert devices_of(cluster, "a") == ["gpu-1"]
    # a pod started after the event on that node gets its health at once
    assert health(cluster, "a")["main"][0]["resources"][0]["health"] == "Healthy"
    started(cluster, pod("all", "eight"))
    text = cluster.explain("all")
    assert "is Pending" in text
    assert "1 is tainted and the request does not tolerate it (taint gpu.nvidia.com/xid=79:NoSchedule not tolerated)" \
        in text


def test_an_application_xid_is_informational_and_a_newer_xid_overwrites(cluster):
    started(cluster, template("one"), pod("a", "one"))
    cluster.inject_health_event(NODE, "gpu-0", 13)
    assert [{k: v for k, v in t.items() if k != "timeAdded"} for t in taints(cluster, "gpu-0")] == [
        {"key": "gpu.nvidia.com/xid", "value": "13", "effect": "None"}]
    assert health(cluster, "a")["main"][0]["resources"][0]["health"] == "Healthy"
    started(cluster, pod("b", "one"))
    assert devices_of(cluster, "b") == ["gpu-1"]  # gpu-0 is a's: effect None does not keep b off, a does
    cluster.delete("Pod", "a")
    cluster.wait()
    started(cluster, pod("c", "one"))
    assert devices_of(cluster, "c") == ["gpu-0"]  # effect None: the scheduler ignores it
    cluster.inject_health_event(NODE, "gpu-0", 48)
    assert [(t["key"], t["value"], t["effect"]) for t in taints(cluster, "gpu-0")] == [
        ("gpu.nvidia.com/xid", "48", "NoSchedule")]
    assert health(cluster, "c")["main"][0]["resources"][0]["health"] == "Unhealthy"
    assert cluster.get("Pod", "c")["status"]["phase"] == "Running"  # the driver never evicts


def test_gpu_lost_and_unmonitored(cluster):
    cluster.inject_health_event("t4-1", "gpu-2", kind="gpu-lost")
    cluster.inject_health_event("t4-1", "gpu-3", kind="unmonitored")
    assert taints(cluster, "gpu-2", "t4-1-gpu.nvidia.com-0")[0]["key"] == "gpu.nvidia.com/gpu-lost"
    assert taints(cluster, "gpu-2", "t4-1-gpu.nvidia.com-0")[0]["effect"] == "NoSchedule"
    assert [(t["key"], t["effect"]) for t in taints(cluster, "gpu-3", "t4-1-gpu.nvidia.com-0")] == [
        ("gpu.nvidia.com/unmonitored", "None")]


def test_unmonitored_is_unknown_and_a_repair_makes_the_gpu_healthy_and_schedulable_again(cluster):
    """The health follows the device's health taints, the rule the fake plugin on kind streams too
    (fake_gpus.health_events.health_of); `repair` (the GPU replaced) takes them off, an admin's taints stay."""
    started(cluster, template("one"), pod("a", "one"))
    [dev] = devices_of(cluster, "a")
    cluster.inject_health_event(NODE, dev, kind="unmonitored")
    assert [r["health"] for r in health(cluster, "a")["main"][0]["resources"]] == ["Unknown"]
    cluster.inject_health_event(NODE, dev, 79)
    assert [r["health"] for r in health(cluster, "a")["main"][0]["resources"]] == ["Unhealthy"]
    cluster.inject_health_event(NODE, dev, kind="repair")
    assert taints(cluster, dev, SLICE) == []
    assert [r["health"] for r in health(cluster, "a")["main"][0]["resources"]] == ["Healthy"]
    with pytest.raises(ClusterError, match="a repair carries no xid"):
        cluster.inject_health_event(NODE, dev, 79, kind="repair")


def test_a_request_entry_and_a_named_claim_as_the_kubelet_writes_them(cluster):
    named = b.claim("shared", count=1, selectors=[A100])
    by_name = pod("by-name", "unused")
    by_name["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimName": "shared"}]
    started(cluster, template("one"), pod("req", "one", request="gpu"), named, by_name)
    cluster.inject_health_event(NODE, devices_of(cluster, "req")[0], 79)
    assert [e["name"] for e in health(cluster, "req")["main"]] == ["claim:gpu/gpu"]
    assert health(cluster, "req")["main"][0]["resources"][0]["health"] == "Unhealthy"
    # the kubelet finds a claim's name in pod.status.resourceClaimStatuses only: a named claim gets no entry
    assert cluster.get("Pod", "by-name")["status"]["phase"] == "Running"
    assert health(cluster, "by-name") == {}


def test_a_no_execute_rule_evicts_the_job_pod_its_replacement_lands_on_a_healthy_gpu_a_tolerating_pod_stays(cluster):
    started(cluster, template("one"), job("train", "one"))
    (first,) = [p["metadata"]["name"] for p in cluster.list("Pod")]
    assert devices_of(cluster, first) == ["gpu-0"]
    cluster.inject_health_event(NODE, "gpu-0", 79)
    last: dict[str, dict] = {}
    cluster.on_change(lambda ev: last.update({ev.object["metadata"]["name"]: ev.object}), kinds=["Pod"])

    started(cluster, drain("drain", "gpu-0"))

    assert cluster.list("Pod", "default") and first not in [p["metadata"]["name"] for p in cluster.list("Pod")]
    cond = next(c for c in last[first]["status"]["conditions"] if c["type"] == "DisruptionTarget")
    assert (cond["status"], cond["reason"], cond["message"]) == (
        "True", "DeletionByDeviceTaintManager", "Device Taint manager: deleting due to NoExecute taint")
    ev = [e for e in cluster.events() if e["reason"] == "DeviceTaintManagerEviction"]
    assert [(e["involvedObject"]["name"], e["type"], e["message"], e["source"]["component"]) for e in ev] == [
        (first, "Normal", "Marking for deletion", "device-taint-eviction-controller")]
    (second,) = [p["metadata"]["name"] for p in cluster.list("Pod")]
    assert devices_of(cluster, second) == ["gpu-1"]

    tolerations = [{"key": "gpu.nvidia.com/xid", "operator": "Exists"},
                   {"key": "labkit.dev/maintenance", "operator": "Exists", "effect": "NoExecute"}]
    diag = pod("diag", "diag")
    diag["spec"]["nodeSelector"] = {"kubernetes.io/hostname": NODE}
    started(cluster, template("diag", tolerations=tolerations), diag)
    assert devices_of(cluster, "diag") == ["gpu-0"]
    cluster.advance(3600)
    assert cluster.get("Pod", "diag")["status"]["phase"] == "Running"
    assert health(cluster, "diag")["main"][0]["resources"][0]["health"] == "Unhealthy"


def test_a_pod_asking_for_nvidia_com_gpu_is_evicted_like_a_claims_pod_and_shows_no_health(cluster):
    started(cluster, legacy("legacy", "t4-0"), legacy("stays", "t4-1"))
    assert devices_of(cluster, "legacy") == ["gpu-0"]
    cluster.inject_health_event("t4-0", "gpu-0", kind="gpu-lost")
    assert health(cluster, "legacy") == {}  # no resources.claims in the container: the kubelet skips it
    started(cluster, drain("drain-t4", "gpu-0", pool="t4-0"))
    assert [p["metadata"]["name"] for p in cluster.list("Pod")] == ["stays"]
    assert [e["involvedObject"]["name"] for e in cluster.events() if e["reason"] == "DeviceTaintManagerEviction"] \
        == ["legacy"]


@pytest.mark.parametrize("args,kw,kind,message", [
    (("nope", "gpu-0", 79), {}, NotFound, "node 'nope' not found; nodes: dgx-a100-0, t4-0, t4-1"),
    ((NODE, "gpu-9", 79), {}, NotFound, "node dgx-a100-0 has no gpu.nvidia.com device 'gpu-9'; its devices: "
                                        "gpu-0, gpu-1, gpu-2, gpu-3, gpu-4, gpu-5, gpu-6, gpu-7"),
    ((NODE, "nic-0", 79), {}, NotFound, "node dgx-a100-0 has no gpu.nvidia.com device 'nic-0'"),
    ((NODE, "gpu-0", 0), {}, ClusterError, "xid 0: an XID is a positive integer"),
    ((NODE, "gpu-0"), {}, ClusterError, "xid None: an XID is a positive integer"),
    ((NODE, "gpu-0", 79), {"kind": "gpu-lost"}, ClusterError, "a gpu-lost event carries no xid (got 79)"),
    ((NODE, "gpu-0"), {"kind": "fire"}, ClusterError, "health event kind 'fire': use one of xid, gpu-lost, unmonitored"),
])
def test_a_bad_event_is_one_line_naming_it(cluster, args, kw, kind, message):
    with pytest.raises(kind) as err:
        cluster.inject_health_event(*args, **kw)
    text = str(err.value)
    assert message in text and "\n" not in text
    assert exit_code(err.value) == (EXIT_NOT_FOUND if kind is NotFound else EXIT_INPUT)
    assert all(not (d.get("taints")) for s in cluster.list("ResourceSlice") for d in s["spec"]["devices"])


def test_a_backend_without_it_says_so():
    with pytest.raises(ClusterError, match=r"^inject_health_event is not supported on the local backend; "
                                           r"use the sim or kind backend$"):
        Cluster.inject_health_event(SimpleNamespace(backend="local"), NODE, "gpu-0", 79)  # type: ignore[arg-type]
