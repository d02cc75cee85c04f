"""The sim at fleet scale (issue #46): nodes of one kind are built from one template and share
read-only parts; what a user reads is still each node's own slices, as fake_gpus publishes them,
and objects a caller may change without changing the cluster.

An API server answers every GET with a fresh serialisation of what etcd holds: a client that
edits the object it got changes nothing on the server until it writes it back, and two objects
never share anything (kubernetes staging/src/k8s.io/apiserver/pkg/registry/generic/registry/store.go:
Get decodes from storage into a new object each time; client-go's informers document the same:
staging/src/k8s.io/client-go/tools/cache/shared_informer.go "must not mutate ... objects").
"""

from __future__ import annotations

import pytest
import yaml

from fake_gpus import slices as fake_gpus_slices
from labkit.cluster import connect

pytestmark = pytest.mark.slow  # heavy: `make check` leaves it out, `make test` runs it

# one kind (dgx-a100) under two name prefixes, the second longer; a dynamic-MIG kind (counter
# sets, MIG devices whose parentUUID follows the node); NVL72 trays (GPUs, NICs and the
# compute-domain plugin's slice); a static-MIG kind (MIG uuids: each node built in full); and a
# node kind with fewer nodes than the template's probes
PROFILE = {
    "name": "scale-kinds", "kubernetesVersion": "1.37",
    "nodes": [
        {"namePrefix": "gpu-", "count": 4, "nodeProfile": "dgx-a100"},
        {"namePrefix": "gpu-with-a-much-longer-name-", "count": 2, "nodeProfile": "dgx-a100"},
        {"namePrefix": "dyn-", "count": 4, "nodeProfile": "dgx-h100", "migMode": "dynamic"},
        {"namePrefix": "rack-a-tray-", "count": 5, "nodeProfile": "gb200-nvl72-tray",
         "labels": {"nvidia.com/gpu.clique": "5f0c9a3e-1d2b-4c6e-8a7f-3b9d2e1c0a01.1"}},
        {"namePrefix": "mig-", "count": 4, "nodeProfile": "mig-a100", "migMode": "static"},
        {"name": "control-plane", "nodeProfile": "cpu-control-plane"},
    ],
}

SERVER_FIELDS = ("uid", "resourceVersion", "creationTimestamp", "generation")


def _without_server_fields(obj: dict) -> dict:
    return {**obj, "metadata": {k: v for k, v in obj["metadata"].items() if k not in SERVER_FIELDS}}


def test_every_node_publishes_the_slices_fake_gpus_builds_for_it():
    c = connect("sim", PROFILE, progress=False)
    want = []
    for n in c.list("Node"):
        name = n["metadata"]["name"]
        profile = n["metadata"]["labels"]["fake-gpus.dev/node-profile"]
        mig = n["metadata"]["labels"].get("fake-gpus.dev/mig-mode")
        want += fake_gpus_slices.build_slices(profile, name, mig_mode=mig, kubernetes_version="1.37")
    got = sorted((_without_server_fields(s) for s in c.list("ResourceSlice")), key=lambda s: s["metadata"]["name"])
    assert got == sorted(want, key=lambda s: s["metadata"]["name"])
    uuids = [a["uuid"]["string"] for s in got for d in s["spec"].get("devices", ())
             for a in [d.get("attributes", {})] if "uuid" in a]
    assert len(uuids) == len(set(uuids)) > 0  # every GPU its own


def test_changing_a_slice_a_caller_got_changes_nothing_in_the_cluster():
    c = connect("sim", PROFILE, progress=False)
    everything = yaml.safe_dump(c.list("ResourceSlice"))
    a, b = (c.get("ResourceSlice", f"gpu-{i}-gpu.nvidia.com-0", None) for i in (0, 1))
    before = [c.get("ResourceSlice", f"gpu-{i}-gpu.nvidia.com-0", None) for i in (0, 1)]
    a["spec"]["devices"][0]["attributes"]["productName"]["string"] = "edited"
    a["spec"]["devices"][0]["capacity"]["memory"]["value"] = "1Gi"
    a["spec"]["devices"].pop()
    listed = c.list("ResourceSlice")
    listed[-1]["spec"]["devices"].clear()
    assert [c.get("ResourceSlice", f"gpu-{i}-gpu.nvidia.com-0", None) for i in (0, 1)] == before
    assert b == before[1]
    assert yaml.safe_dump(c.list("ResourceSlice")) == everything


def test_slices_dump_as_yaml_without_aliases():
    c = connect("sim", PROFILE, progress=False)
    text = yaml.safe_dump(c.list("ResourceSlice"))
    assert "&id" not in text and "*id" not in text


def test_an_edited_slice_applied_back_is_stored_and_only_for_its_node():
    c = connect("sim", PROFILE, progress=False)
    s = c.get("ResourceSlice", "gpu-0-gpu.nvidia.com-0", None)
    product = s["spec"]["devices"][0]["attributes"]["productName"]["string"]
    s["spec"]["devices"][0]["attributes"]["productName"]["string"] = "edited"
    c.apply([s])
    devs = {i: c.get("ResourceSlice", f"gpu-{i}-gpu.nvidia.com-0", None)["spec"]["devices"][0] for i in (0, 1)}
    assert devs[0]["attributes"]["productName"]["string"] == "edited"
    assert devs[1]["attributes"]["productName"]["string"] == product != "edited"


def test_a_fleet_converts_the_devices_of_one_node_per_kind_and_each_node_keeps_its_own(monkeypatch):
    """Bring-up converts a slice for the allocator as it arrives (as kube-scheduler's informer
    does: kubernetes pkg/scheduler/framework/plugins/dynamicresources, PR 134105); the sim's nodes
    of one kind differ only in names and uuids, so their devices' CEL conversion is worked out
    once per kind, not per node. Each node's devices are still its own: a selector on a uuid
    finds that node's GPU and no other node's."""
    from labkit.allocator import model, selectors

    checked: list[str] = []
    real = selectors.convertible

    def counting(driver: str, device: dict) -> bool:
        checked.append(device["name"])
        return real(driver, device)

    monkeypatch.setattr(selectors, "convertible", counting)
    monkeypatch.setattr(model, "convertible", counting)
    nodes = 40
    c = connect("sim", {"name": "scale-one-kind", "kubernetesVersion": "1.37",
                        "nodes": [{"namePrefix": "gpu-", "count": nodes, "nodeProfile": "dgx-a100"}]}, progress=False)
    gpus = [d for s in c.list("ResourceSlice") if s["spec"]["driver"] == "gpu.nvidia.com" for d in s["spec"]["devices"]]
    assert len(gpus) == 8 * nodes
    assert len(checked) <= 8 * 4  # the template node and the few nodes built in full to learn it

    dra = c.sim.scheduler.dra
    wanted = c.get("ResourceSlice", "gpu-27-gpu.nvidia.com-0", None)["spec"]["devices"][5]
    uuid = wanted["attributes"]["uuid"]["string"]
    claim = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
             "metadata": {"name": "that-gpu", "namespace": "default"},
             "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
                 "deviceClassName": "gpu.nvidia.com", "allocationMode": "ExactCount", "count": 1,
                 "selectors": [{"cel": {"expression": f'device.attributes["gpu.nvidia.com"].uuid == "{uuid}"'}}]}}]}}}
    found = {}
    for node in c.sim.store.list("Node"):
        out = dra.allocate(node, [claim], timeout=None)
        if out.status == "allocated":
            found[node["metadata"]["name"]] = [(r["pool"], r["device"]) for r in out.allocations[0]["devices"]["results"]]
    assert found == {"gpu-27": [("gpu-27", "gpu-5")]}


def test_each_quantity_text_is_parsed_once_and_pods_still_fit_by_their_exact_requests(monkeypatch):
    """A trace repeats a few request sizes; kube-scheduler decodes a pod's quantities once, when
    its informer decodes the pod (kubernetes staging/src/k8s.io/apimachinery/pkg/api/resource/
    quantity.go: UnmarshalJSON -> ParseQuantity), not in every filter, score or bind. The sim
    parses each quantity text once for the whole run; the values stay exact (1500m and 0.5 fill
    the node's last two CPUs), and NodeResourcesFit still refuses the pod that does not fit
    (pkg/scheduler/framework/plugins/noderesources/fit.go: "Insufficient cpu")."""
    from labkit.sim import resources

    texts: list[str] = []
    real = resources.parse_quantity

    def counting(text: str):  # noqa: ANN202 - the real function's result
        texts.append(text)
        return real(text)

    monkeypatch.setattr(resources, "parse_quantity", counting)

    def pod(name: str, cpu: str) -> dict:
        return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
                "spec": {"nodeSelector": {"kubernetes.io/hostname": "n-0"},
                         "containers": [{"name": "c", "image": "x",
                                         "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}}}]}}

    c = connect("sim", {"name": "parse-once", "kubernetesVersion": "1.37",
                        "nodes": [{"namePrefix": "n-", "count": 3, "nodeProfile": "l4-edge"}]}, progress=False)
    assert c.get("Node", "n-0", None)["status"]["allocatable"]["cpu"] == "64"
    # 31 x 2 + 1500m + 0.5 = the node's 64 CPUs exactly: all of those fit, one millicore more does not
    c.apply([pod(f"two-{i}", "2") for i in range(31)] + [pod("milli", "1500m"), pod("half", "0.5"),
                                                          pod("one-too-many", "1m")])
    c.wait()
    phases = {p["metadata"]["name"]: p["status"]["phase"] for p in c.list("Pod")}
    assert phases.pop("one-too-many") == "Pending"
    assert set(phases.values()) == {"Running"}
    (cond,) = [x for x in c.get("Pod", "one-too-many")["status"]["conditions"] if x["type"] == "PodScheduled"]
    assert "Insufficient cpu" in cond["message"]
    assert len(texts) == len(set(texts)), sorted(t for t in set(texts) if texts.count(t) > 1)
