"""The sim's scheduler and eviction controller at Kubernetes 1.38 (issue 42, item 6).

- A stored claim whose allocation consumes a negative capacity (storable before 1.38: 1.38's API
  server refuses new ones, a cluster upgraded to 1.38 keeps the old ones) makes 1.38's
  DynamicResources PreFilter fail for every pod that needs an allocation:
  ``kubernetes@v1.38.0-beta.0:pkg/scheduler/framework/plugins/dynamicresources/allocateddevices.go``
  (consumedCapacityError; getCapacities adds `` (and %d more claims with invalid consumed
  capacity)``), ``dra_manager.go`` (GatherAllocatedState, only with DRAConsumableCapacity on),
  ``dynamicresources.go`` (PreFilter: ``gather allocation state: %w`` when a claim needs allocating,
  a plugin error, so ``running PreFilter plugin "DynamicResources": ...`` and SchedulerError).
  kubernetes@v1.37.1 has no such check.
- A device toleration with an empty effect tolerates a NoExecute taint in the eviction controller
  (``kubernetes@v1.38.0-beta.0:pkg/controller/devicetainteviction/device_taint_eviction.go``,
  claimEvictionTime; CHANGELOG-1.38 #143376).

The state comes from a workshop sim's dump (its kubelets run 1.37, so the dump is checked by 1.37's
rules) restored for an API server that says 1.38: a control plane upgraded before its nodes.
"""

from __future__ import annotations

import pytest

from labkit.cluster import connect
from labkit.cluster.backends.kubeconfig import KubeconfigCluster
from labkit.cluster.explain_live import explain_pod, explain_pod_doc, restored_sim
from labkit.cluster.snapshot import cluster_state

DRIVER = "gpu.nvidia.com"
#: as stored (defaulted): a dump holds what the API server stored
ONE_GPU = {"devices": {"requests": [{"name": "g", "exactly": {"deviceClassName": DRIVER, "allocationMode": "ExactCount",
                                                             "count": 1}}]}}


def _old_claim(name: str, device: str, consumed: dict) -> list[dict]:
    """A claim allocated on dgx-a100-0 whose result consumes ``consumed``, and the running pod that
    holds it (a claim nobody reserves is deallocated)."""
    holder = f"holder-{name}"
    claim = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
             "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}"},
             "spec": ONE_GPU,
             "status": {"allocation": {
                 "devices": {"results": [{"request": "g", "driver": DRIVER, "pool": "dgx-a100-0",
                                          "device": device, "consumedCapacity": consumed}]},
                 "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
                     {"key": "metadata.name", "operator": "In", "values": ["dgx-a100-0"]}]}]}},
                 "reservedFor": [{"resource": "pods", "name": holder, "uid": f"uid-{holder}"}]}}
    pod = _pod(holder, nodeName="dgx-a100-0", container={"resources": {"claims": [{"name": "g"}]}},
               resourceClaims=[{"name": "g", "resourceClaimName": name}])
    pod["status"] = {"phase": "Running"}
    return [claim, pod]


def _pod(name: str, **spec: object) -> dict:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}"},
            "spec": {"containers": [{"name": "c", "image": "x", **spec.pop("container", {})}], **spec},
            "status": {"phase": "Pending"}}


def _gpu_pod(name: str) -> dict:
    """A pod whose claim (MINE) is not allocated yet."""
    return _pod(name, container={"resources": {"claims": [{"name": "g"}]}},
                resourceClaims=[{"name": "g", "resourceClaimName": "mine"}])


MINE = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"name": "mine", "namespace": "default", "uid": "uid-mine"}, "spec": ONE_GPU}


@pytest.fixture(scope="module")
def base() -> list[dict]:
    return cluster_state(connect("sim", "workshop", progress=False))


class Attached(KubeconfigCluster):
    """What the kubeconfig backend exposes once attached: the server's /version, the feature gates
    its /metrics say (None: the version's defaults), and the dump's objects."""

    def __init__(self, objs: list[dict], server: str, gates: dict[str, bool] | None = None) -> None:
        super().__init__()
        self.objs, self.server_version, self.gates = objs, server, gates

    def list(self, kind, namespace=None):
        return [o for o in self.objs if o["kind"] == kind]

    def get(self, kind, name, namespace="default"):
        return next((o for o in self.list(kind) if o["metadata"]["name"] == name
                     and o["metadata"].get("namespace", namespace) == namespace), None)

    def events(self):
        return []

    def feature_gates(self):
        return dict(self.gates or {})


def _scheduled(sim, name: str) -> dict:
    pod = sim.get("Pod", name)
    return next(c for c in pod["status"].get("conditions") or [] if c["type"] == "PodScheduled")


NEGATIVE = ('gather allocation state: claim default/old, device gpu.nvidia.com/dgx-a100-0/gpu-0: '
            'consumed capacity "memory" must not be negative, got -1Gi')


def test_negative_consumed_capacity_fails_prefilter_on_138(base):
    objs = [*base, MINE, *_old_claim("old", "gpu-0", {"memory": "-1Gi"}), _gpu_pod("p")]
    cluster = Attached(objs, "v1.38.0-beta.0")
    verdict = explain_pod_doc(cluster, "p")["verdict"]
    assert verdict["status"] == "Error" and verdict["plugin"] == "DynamicResources"
    assert verdict["extensionPoint"] == "PreFilter"
    assert verdict["message"] == f'running PreFilter plugin "DynamicResources": {NEGATIVE}'
    assert explain_pod(cluster, "p").startswith(f"Pod default/p is Pending: {NEGATIVE} "
                                                "(DynamicResources PreFilter, Error)")
    sim = restored_sim(cluster)
    sim.run()
    cond = _scheduled(sim, "p")
    assert cond["status"] == "False" and cond["reason"] == "SchedulerError"
    assert cond["message"] == f'running PreFilter plugin "DynamicResources": {NEGATIVE}'
    assert [e["message"] for e in sim.list("Event") if e["reason"] == "FailedScheduling"] == [cond["message"]]


def test_pods_that_allocate_nothing_are_not_affected(base):
    """PreFilter gathers the allocated state only when a claim is still to be allocated: a pod
    without claims, or whose claims are all allocated (and reserved for it), is placed."""
    ready = _old_claim("ready", "gpu-1", {"memory": "1Gi"})[0]
    ready["status"]["reservedFor"] = [{"resource": "pods", "name": "uses-ready", "uid": "uid-uses-ready"}]
    objs = [*base, *_old_claim("old", "gpu-0", {"memory": "-1Gi"}), ready,
            _pod("plain"), _pod("uses-ready", container={"resources": {"claims": [{"name": "g"}]}},
                                resourceClaims=[{"name": "g", "resourceClaimName": "ready"}])]
    sim = restored_sim(Attached(objs, "v1.38.0"))
    sim.run()
    assert sim.get("Pod", "plain")["spec"].get("nodeName")
    assert sim.get("Pod", "uses-ready")["spec"]["nodeName"] == "dgx-a100-0"


def test_several_invalid_claims_name_the_first_and_count_the_rest(base):
    """Each claim's first negative value (capacity names sorted); the claims' messages sorted as
    strings, the first shown."""
    objs = [*base, MINE, _gpu_pod("p"),
            *_old_claim("zz", "gpu-2", {"memory": "-5"}),
            *_old_claim("old", "gpu-0", {"zeta": "-1", "memory": "-1Gi", "alpha": "2"}),
            *_old_claim("mid", "gpu-3", {"b": "-1000", "a": "-0.5"})]
    sim = restored_sim(Attached(objs, "v1.38.0-beta.0"))
    sim.run()
    first = ('gather allocation state: claim default/mid, device gpu.nvidia.com/dgx-a100-0/gpu-3: '
             'consumed capacity "a" must not be negative, got -500m')
    assert _scheduled(sim, "p")["message"] == (f'running PreFilter plugin "DynamicResources": {first} '
                                               "(and 2 more claims with invalid consumed capacity)")


def test_deallocating_the_invalid_claim_lets_pods_schedule(base):
    objs = [*base, MINE, *_old_claim("old", "gpu-0", {"memory": "-1Gi"}), _gpu_pod("p")]
    sim = restored_sim(Attached(objs, "v1.38.0-beta.0"))
    sim.run()
    assert _scheduled(sim, "p")["reason"] == "SchedulerError"
    sim.delete("Pod", "holder-old")  # the claim controller then deallocates its claim
    sim.run()
    assert sim.get("Pod", "p")["spec"].get("nodeName")


def test_no_check_on_137_or_without_consumable_capacity(base):
    """1.37's scheduler has no such check (the same state places the pod); 1.38's runs only with
    DRAConsumableCapacity on (GA, not locked in 1.38)."""
    objs = [*base, MINE, *_old_claim("old", "gpu-0", {"memory": "-1Gi"}), _gpu_pod("p")]
    placed = {}
    for server, gates in (("v1.37.1", None), ("v1.38.0-beta.0", {"DRAConsumableCapacity": False}),
                          ("v1.38.0-beta.0", None)):
        sim = restored_sim(Attached(objs, server, gates))
        sim.run()
        placed[server, bool(gates)] = sim.get("Pod", "p")["spec"].get("nodeName")
    assert placed == {("v1.37.1", False): "dgx-a100-0", ("v1.38.0-beta.0", True): "dgx-a100-0",
                      ("v1.38.0-beta.0", False): None}


@pytest.mark.parametrize("version, stays", [("1.38", ["tolerant"]), ("1.37", [])])
def test_empty_effect_toleration_tolerates_noexecute_on_138(version, stays):
    """A device toleration without effect covers NoExecute in eviction too on 1.38 (#143376): the pod
    that tolerates the DeviceTaintRule's taint stays, the one that does not is evicted. Up to 1.37 the
    eviction controller counts only tolerations whose effect is NoExecute (kubernetes@v1.37.1
    pkg/controller/devicetainteviction/device_taint_eviction.go claimEvictionTime): both go."""
    c = connect("sim", {"name": "t", "kubernetesVersion": version,
                        "nodes": [{"name": "n0", "nodeProfile": "dgx-a100"}]}, progress=False)
    tol = [{"key": "gpu.example.com/broken", "operator": "Exists"}]  # no effect
    for name, tolerations in (("tolerant", tol), ("plain", None)):
        exactly = {"deviceClassName": DRIVER, "count": 1, **({"tolerations": tolerations} if tolerations else {})}
        c.apply([{"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": name},
                  "spec": {"devices": {"requests": [{"name": "g", "exactly": exactly}]}}},
                 {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
                  "spec": {"containers": [{"name": "c", "image": "x", "resources": {"claims": [{"name": "g"}]}}],
                           "resourceClaims": [{"name": "g", "resourceClaimName": name}]}}])
    c.wait()
    devices = {n: c.get("ResourceClaim", n)["status"]["allocation"]["devices"]["results"][0]["device"]
               for n in ("tolerant", "plain")}
    for n, device in devices.items():
        c.apply({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceTaintRule", "metadata": {"name": f"broken-{n}"},
                 "spec": {"deviceSelector": {"driver": DRIVER, "pool": "n0", "device": device},
                          "taint": {"key": "gpu.example.com/broken", "value": "x", "effect": "NoExecute"}}})
    c.wait()
    assert [p["metadata"]["name"] for p in c.list("Pod")] == stays  # "plain" was evicted
    assert all(p["spec"]["nodeName"] == "n0" for p in c.list("Pod"))


def test_every_matching_toleration_counts_the_smallest_seconds_win():
    """Two tolerations match the NoExecute taint: the shorter tolerationSeconds decides (kubernetes
    claimEvictionTime takes the minimum over every matching toleration; one without seconds would
    tolerate for good)."""
    c = connect("sim", {"name": "t", "nodes": [{"name": "n0", "nodeProfile": "dgx-a100"}]}, progress=False)
    tols = [{"key": "k", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 60},
            {"operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 10}]
    c.apply([{"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": "c"},
              "spec": {"devices": {"requests": [{"name": "g", "exactly": {"deviceClassName": DRIVER,
                                                                           "tolerations": tols}}]}}},
             {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
              "spec": {"containers": [{"name": "c", "image": "x", "resources": {"claims": [{"name": "g"}]}}],
                       "resourceClaims": [{"name": "g", "resourceClaimName": "c"}]}}])
    c.wait()
    device = c.get("ResourceClaim", "c")["status"]["allocation"]["devices"]["results"][0]["device"]
    c.apply({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceTaintRule", "metadata": {"name": "r"},
             "spec": {"deviceSelector": {"driver": DRIVER, "pool": "n0", "device": device},
                      "taint": {"key": "k", "effect": "NoExecute"}}})
    c.wait()
    c.advance(9)
    assert [p["metadata"]["name"] for p in c.list("Pod")] == ["p"]
    c.advance(2)
    assert c.list("Pod") == []
