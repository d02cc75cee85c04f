"""Driver faults on a real kubelet (issue 17.2), the CI-sized run of tests/faultrun.py: 30 claims,
6 pods at a time, the fake driver's plugin SIGKILLed at random moments and inside
NodePrepareResources / NodeUnprepareResources; then a kind node restarted with prepared claims.
`tools/reliability.sh` runs the same code with 200+ claims.

Uses the running kind cluster of profile $LABKIT_FAULTS_PROFILE (default workshop) in
$LABKIT_RUN_DIR when there is one, else starts one and removes it. make test runs this file as a
lane of its own, on its own cluster, beside the e2e (tools/test-lanes.sh): most of its time is spent
waiting for kubelets' retries, so it overlaps the e2e instead of adding to it. A pod whose prepare a
kill failed is tried again at the kubelet's next resync of it: 10-15 s on labkit's kind clusters
(labkit/cluster/backends/kind/config.py KUBELET_CONFIG says why), 60-90 s with the kubelet's default.
"""

from __future__ import annotations

import json

import pytest

from tests import faultrun, kindutil

#: what the runs measured (phase times, per-pod waits, kills), for finding where the lane's time goes
ARTIFACTS = kindutil.ROOT / "test-artifacts" / "kind-faults.json"


def _record(name: str, result: dict) -> None:
    have = json.loads(ARTIFACTS.read_text()) if ARTIFACTS.is_file() else {}
    ARTIFACTS.parent.mkdir(parents=True, exist_ok=True)
    ARTIFACTS.write_text(json.dumps({**have, name: result}, indent=2, sort_keys=True))

pytestmark = [pytest.mark.kind, pytest.mark.kind_faults, pytest.mark.slow]


@pytest.fixture(scope="module")
def kind_cluster():
    ARTIFACTS.unlink(missing_ok=True)  # this run's measurements only
    c = kindutil.cluster()
    yield c
    if not c.attached:
        c.down()


def check_driver_faults(c) -> None:
    """The CI-sized fault run on cluster ``c`` (make test calls it on the e2e's workshop cluster)."""
    r = faultrun.run_faults(c, claims=30, concurrency=6, kills=6, seed=17, delay=1.0)
    _record("driver faults", r)
    assert r["problems"] == []
    assert (r["podsRan"], r["podsWithRightDevices"], r["podsDeleted"]) == (30, 30, 30)
    assert r["podsNotRunningInTime"] == 0 and r["claimsPreparedWithDifferentDevices"] == 0
    assert r["kills"] >= 3 and r["checkpointInconsistent"] == 0
    # honest about where the kills landed: at least one inside a call, read from the killed plugin's log
    assert r["killsInsidePrepare"] + r["killsInsideUnprepare"] >= 1, r["killLog"]
    assert (r["checkpointEntriesLeft"], r["cdiSpecsLeft"]) == (0, 0)


def check_node_restart(c) -> None:
    r = faultrun.node_restart(c, pods=3)
    _record("node restart", r)
    assert r["pluginRegisteredBefore"], r
    assert r["ranBefore"] and r["claimsInCheckpointBefore"] == 3, r
    assert r["cameBack"] and r["samePods"], r
    assert r["sameDevices"], (r["devicesBefore"], r["devicesAfter"])
    assert r["cdiSpecsAfterRestart"] >= 3  # the plugin rewrote them from its checkpoint (/var/run is a tmpfs)
    assert r["checkpointEmptyAfterDelete"]


def test_plugin_killed_during_prepare_and_unprepare_loses_nothing(kind_cluster):
    check_driver_faults(kind_cluster)


def test_node_restart_brings_pods_back_with_the_same_devices(kind_cluster):
    check_node_restart(kind_cluster)


HEALTH_NS = "lk-health"


def _health_pod(c, name: str) -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": HEALTH_NS},
            "spec": {"terminationGracePeriodSeconds": 1,
                     "containers": [{"name": "main", "image": c.workload_image, "imagePullPolicy": "IfNotPresent",
                                     "args": ["sleep"], "resources": {"claims": [{"name": "gpu"}]}}],
                     "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "lk-health-gpu"}]}}


def _devices(c, pod: dict) -> list[str]:
    """The devices allocated to the pod's claim (empty until the scheduler allocated it)."""
    names = [s.get("resourceClaimName") for s in pod.get("status", {}).get("resourceClaimStatuses") or []]
    claim = kindutil.obj(c, "ResourceClaim", names[0], HEALTH_NS) if names and names[0] else None
    results = (((claim or {}).get("status") or {}).get("allocation") or {}).get("devices", {}).get("results") or []
    return [r["device"] for r in results]


def test_xid_79_taints_the_device_the_kubelet_reports_it_and_a_taint_rule_evicts_the_pod(kind_cluster):
    """Issue 43 item 3 on a real kubelet: the fake driver's health event (labkit/cluster/kind/health.py) taints
    the device as NVIDIA's driver does (gpu.nvidia.com/xid=79 NoSchedule: kubernetes-sigs/dra-driver-nvidia-gpu
    cmd/gpu-kubelet-plugin/device_health.go), the kubelet writes allocatedResourcesStatus from the plugin's
    DRAResourceHealth stream (kubernetes/kubernetes pkg/kubelet/cm/dra/manager.go, ResourceHealthStatus beta on
    in 1.36+), the scheduler keeps new pods off the device (NoSchedule), and a NoExecute DeviceTaintRule makes the
    device taint eviction controller (pkg/controller/devicetainteviction) evict the pod holding it."""
    c = kind_cluster
    node = c.profile.nodes[0].name
    kindutil.kubectl(c, "create", "namespace", HEALTH_NS, check=False)
    rule = "lk-health-evict"
    device = ""
    try:
        c.apply([{"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
                  "metadata": {"name": "lk-health-gpu", "namespace": HEALTH_NS},
                  "spec": {"spec": {"devices": {"requests": [
                      {"name": "gpu", "exactly": {"deviceClassName": kindutil.DRIVER}}]}}}},
                 _health_pod(c, "holder")])
        held = kindutil.poll(lambda: (p := kindutil.obj(c, "Pod", "holder", HEALTH_NS)) is not None
                             and p.get("status", {}).get("phase") == "Running" and _devices(c, p), 300)
        assert held, kindutil.obj(c, "Pod", "holder", HEALTH_NS)
        (device,) = held
        c.inject_health_event(node, device, 79)
        (sl,) = [s for s in c.list("ResourceSlice") if s["spec"].get("nodeName") == node
                 and s["spec"]["driver"] == kindutil.DRIVER
                 and any(d["name"] == device for d in s["spec"].get("devices") or [])]
        (dev,) = [d for d in sl["spec"]["devices"] if d["name"] == device]
        assert [(t["key"], t.get("value"), t["effect"]) for t in dev["taints"]] == \
            [("gpu.nvidia.com/xid", "79", "NoSchedule")]
        assert dev["taints"][0].get("timeAdded")  # stamped by the API server

        def unhealthy() -> list:
            """The kubelet names the claim ("claim:<podClaimName>") and the device by its CDI device ID."""
            pod = kindutil.obj(c, "Pod", "holder", HEALTH_NS) or {}
            return [r for cs in pod.get("status", {}).get("containerStatuses") or []
                    for s in cs.get("allocatedResourcesStatus") or [] if s.get("name") == "claim:gpu"
                    for r in s.get("resources") or []
                    if (r.get("health"), r.get("message")) == ("Unhealthy", "XID 79 (GPU has fallen off the bus)")]

        assert kindutil.poll(unhealthy, 300), (kindutil.obj(c, "Pod", "holder", HEALTH_NS) or {}).get("status")
        # a new pod asking one GPU does not get the tainted device
        c.apply([_health_pod(c, "newcomer")])
        got = kindutil.poll(lambda: _devices(c, kindutil.obj(c, "Pod", "newcomer", HEALTH_NS) or {}), 300)
        assert got and device not in got, got
        # NVIDIA's driver never evicts; an admin's NoExecute DeviceTaintRule does
        c.apply([{"apiVersion": "resource.k8s.io/v1", "kind": "DeviceTaintRule", "metadata": {"name": rule},
                  "spec": {"deviceSelector": {"driver": kindutil.DRIVER, "pool": sl["spec"]["pool"]["name"],
                                              "device": device},
                           "taint": {"key": "labkit.dev/broken", "value": "xid-79", "effect": "NoExecute"}}}])

        def evicted() -> bool:
            pod = kindutil.obj(c, "Pod", "holder", HEALTH_NS)
            return pod is None or any(cd["type"] == "DisruptionTarget" and cd["status"] == "True"
                                      for cd in pod.get("status", {}).get("conditions") or [])

        assert kindutil.poll(evicted, 300), kindutil.obj(c, "Pod", "holder", HEALTH_NS)
        newcomer = kindutil.obj(c, "Pod", "newcomer", HEALTH_NS)
        assert newcomer is not None and newcomer["metadata"].get("deletionTimestamp") is None
    finally:  # the next tests must see healthy, untainted devices
        kindutil.kubectl(c, "delete", "devicetaintrule", rule, "--ignore-not-found", check=False)
        kindutil.kubectl(c, "delete", "namespace", HEALTH_NS, "--wait=true", "--timeout=300s", check=False,
                         timeout=320)
        if device:
            c.inject_health_event(node, device, kind="repair")
