"""Per device type, the generated attribute and capacity key sets equal what NVIDIA's DRA driver
publishes for the same hardware.

Reference attribute sets: NVIDIA/k8s-dra-driver-gpu tests/bats (commit 22407113, 2026-05-15), the
tests "GPUs: inspect device attributes in resource slice (gpu)" (test_gpu_basic.bats), "StaticMIG:
... (mig)" (test_gpu_mig.bats), "DynMIG: ... (gpu)" and "DynMIG: ... (mig)" (test_gpu_dynmig.bats),
plus `resource.kubernetes.io/numaNode`, which the driver added after that commit (PR #1165,
2026-06) on GPUs and, copied from the parent, on MIG devices (source checked at commit 9593204,
docs/dra-reference.md "Corrections").
Capacities: cmd/gpu-kubelet-plugin (GpuInfo.fullGpuCapacity: memory; CommonCapacitiesMig: six
engine counts + memory; static MIG devices add memorySlice<i>; the DynamicMIG full GPU publishes
the per-dimension maximum over its MIG profiles).
VFIO devices and consumable shares: kubernetes-sigs/dra-driver-nvidia-gpu (the driver's new home)
at 95932046 (2026-08-07), cmd/gpu-kubelet-plugin/deviceinfo.go VfioDeviceInfo.GetDevice and
consumable_shares.go applyConsumableShares (called for GPU and MIG devices, never for VFIO ones).
"""

from __future__ import annotations

import pytest

from fake_gpus.catalog import load_node_profile, node_profiles
from fake_gpus.slices import SliceError, build_slices

COMMON = {"architecture", "brand", "cudaComputeCapability", "cudaDriverVersion", "driverVersion", "productName",
          "resource.kubernetes.io/pciBusID", "resource.kubernetes.io/pcieRoot", "type", "addressingMode",
          "resource.kubernetes.io/numaNode"}
NVIDIA_ATTRS = {
    ("gpu", "none"): COMMON | {"uuid"},
    ("gpu", "dynamic"): COMMON | {"uuid"},
    ("mig", "static"): COMMON | {"uuid", "parentUUID", "profile"},
    ("mig", "dynamic"): COMMON | {"parentUUID", "profile"},
    # a GPU bound to vfio-pci: NVML cannot see it, so only its PCI identity
    ("vfio", "none"): {"type", "uuid", "deviceID", "vendorID", "productName", "iommuFDEnabled",
                       "resource.kubernetes.io/pciBusID", "resource.kubernetes.io/pcieRoot",
                       "resource.kubernetes.io/numaNode"},
}
MIG_CAPS = {"multiprocessors", "copyEngines", "decoders", "encoders", "jpegEngines", "ofaEngines", "memory"}


def devices(profile: str, mode: str, **kw) -> list[dict]:
    return [d for s in build_slices(profile, "node-x", mig_mode=mode, **kw) if s["spec"]["driver"] == "gpu.nvidia.com"
            for d in s["spec"].get("devices", [])]


@pytest.mark.parametrize("profile", [p for p in node_profiles() if not p.startswith("example-")])
@pytest.mark.parametrize("mode", ["none", "static", "dynamic"])
def test_attribute_and_capacity_keys_are_nvidias(profile, mode):
    prof = load_node_profile(profile)
    if mode == "dynamic" and any(g.passthrough for g in prof.gpus):
        # NVIDIA's driver refuses DynamicMIG together with PassthroughSupport
        with pytest.raises(SliceError, match="DynamicMIG is mutually exclusive with PassthroughSupport"):
            devices(profile, mode)
        return
    shares = {"shares"} if prof.consumable_shares.isdigit() else set()
    for d in devices(profile, mode):
        kind = d["attributes"]["type"]["string"]
        published = "dynamic" if "consumesCounters" in d else ("static" if kind == "mig" else "none")
        want = NVIDIA_ATTRS[(kind, published)]
        if prof.fm_partitions and kind in ("gpu", "vfio"):
            # the FabricManagerPartitioning gate: the GPU module's id and, per partition size N holding
            # it, partitionN (cmd/gpu-kubelet-plugin deviceinfo.go)
            module = d["attributes"]["gpuModuleID"]["int"]
            want = want | {"gpuModuleID"} | {f"partition{n}" for n in prof.fm_partitions_of(module)}
        assert set(d["attributes"]) == want, (profile, mode, d["name"])
        caps = set(d["capacity"]) - shares
        if kind == "vfio":
            assert caps == {"addressableMemory"} and "allowMultipleAllocations" not in d
            continue
        assert d.get("allowMultipleAllocations", False) == (prof.consumable_shares != "disabled")
        if kind == "mig":
            slices = {c for c in caps if c.startswith("memorySlice")}
            assert caps - slices == MIG_CAPS
            assert bool(slices) == (published == "static")  # DynamicMIG: slices are counters, not capacity
        elif published == "dynamic":
            assert caps == MIG_CAPS  # the full GPU: maxima over its MIG profiles
        else:
            assert caps == {"memory"}


def test_mig_devices_carry_the_parents_numa_node_and_topology_is_an_explicit_option():
    """MIG devices repeat the parent GPU's resource.kubernetes.io/numaNode; LabKit's
    topology.fake-gpus.dev/* attributes appear only when the profile asks for them."""
    plain = devices("dgx-h100", "dynamic")
    numa = {d["name"]: d["attributes"]["resource.kubernetes.io/numaNode"]["int"] for d in plain}
    for d in plain:
        if "-mig-" in d["name"]:
            assert numa[d["name"]] == numa[d["name"].split("-mig-", 1)[0]]
    assert len(set(numa.values())) == 2  # a two-socket DGX
    assert not any(k.startswith("topology.") for d in plain for k in d["attributes"])
    topo = devices("dgx-h100", "dynamic", topology_attributes=True)
    extra = {k for d in topo for k in d["attributes"]} - {k for d in plain for k in d["attributes"]}
    assert extra == {"topology.fake-gpus.dev/numaNode", "topology.fake-gpus.dev/pcieSwitch",
                     "topology.fake-gpus.dev/nvlinkDomain"}


def test_cluster_profiles_turn_topology_on_where_lessons_use_it():
    from labkit.model.profiles import load_profile

    assert {n: load_profile(n).topology_attributes for n in ("topology-lab", "exp-small", "fleet-1000", "workshop",
                                                              "tiny", "mig-lab")} == {
        "topology-lab": True, "exp-small": True, "fleet-1000": True, "workshop": False, "tiny": False,
        "mig-lab": False}


@pytest.mark.parametrize("profile, top, default, floor, shares", [
    ("h100-shares", "81559Mi", "0", "0", "4"),
    ("h100-shares-unlimited", "81559Mi", "0", "0", None),
    ("h100-shares-memory", "81559Mi", "81559Mi", "1Mi", None),
])
def test_consumable_shares_request_policies_are_nvidias(profile, top, default, floor, shares):
    """applyConsumableShares: memory in 1Mi steps up to the device's memory; `unlimited` and N
    default to none of it, `memory` to all of it; N adds shares (1 per claim by default)."""
    for d in devices(profile, "none"):
        assert d["allowMultipleAllocations"] is True
        assert d["capacity"]["memory"] == {"value": top, "requestPolicy": {
            "default": default, "validRange": {"min": floor, "max": top, "step": "1Mi"}}}
        if shares:
            assert d["capacity"]["shares"] == {"value": shares, "requestPolicy": {
                "default": "1", "validRange": {"min": "1", "max": shares, "step": "1"}}}
        else:
            assert "shares" not in d["capacity"]
    # MIG devices are shared the same way (static and dynamic alike)
    migs = [d for d in devices(profile, "dynamic") if d["attributes"]["type"]["string"] == "mig"]
    assert migs and all(d["allowMultipleAllocations"] and "requestPolicy" in d["capacity"]["memory"] for d in migs)


def test_vfio_devices_are_named_and_identified_as_nvidias():
    """gpu-vfio-<position among the node's GPUs in PCI order>; uuid = SHA-1 name UUID of the PCI
    address (DNS namespace), the same on every node; deviceID/productName from pci.ids."""
    a, b = devices("passthrough-h100", "none"), build_slices("passthrough-h100", "other-node")
    vfio = [d for d in a if d["attributes"]["type"]["string"] == "vfio"]
    assert [d["name"] for d in a] == ["gpu-0", "gpu-1", "gpu-vfio-2", "gpu-vfio-3"]
    d = vfio[0]["attributes"]
    assert d["uuid"] == {"string": "3ad87ca5-73ee-53bb-9ccc-7af50c7eeae8"}  # uuid5(NAMESPACE_DNS, "0000:9d:00.0")
    assert (d["deviceID"], d["vendorID"], d["productName"], d["iommuFDEnabled"]) == (
        {"string": "0x2330"}, {"string": "0x10de"}, {"string": "GH100 [H100 SXM5 80GB]"}, {"bool": False})
    assert d["resource.kubernetes.io/numaNode"] == {"int": 1}
    assert vfio[0]["capacity"] == {"addressableMemory": {"value": "256Gi"}}
    other = [x for x in b[0]["spec"]["devices"] if x["name"] == "gpu-vfio-2"][0]
    assert other["attributes"]["uuid"] == d["uuid"]
