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
"""

from __future__ import annotations

import pytest

from fake_gpus.catalog import node_profiles
from fake_gpus.slices import build_slices

COMMON = {"architecture", "brand", "cudaComputeCapability", "cudaDriverVersion", "driverVersion", "productName",
          "resource.kubernetes.io/pciBusID", "resource.kubernetes.io/pcieRoot", "type", "addressingMode",
          "resource.kubernetes.io/numaNode"}
NVIDIA_ATTRS = {
    ("gpu", "none"): COMMON | {"uuid"},
    ("gpu", "dynamic"): COMMON | {"uuid"},
    ("mig", "static"): COMMON | {"uuid", "parentUUID", "profile"},
    ("mig", "dynamic"): COMMON | {"parentUUID", "profile"},
}
MIG_CAPS = {"multiprocessors", "copyEngines", "decoders", "encoders", "jpegEngines", "ofaEngines", "memory"}


def devices(profile: str, mode: str, **kw) -> list[dict]:
    return [d for s in build_slices(profile, "node-x", mig_mode=mode, **kw) if s["spec"]["driver"] == "gpu.nvidia.com"
            for d in s["spec"].get("devices", [])]


@pytest.mark.parametrize("profile", [p for p in node_profiles() if not p.startswith("example-")])
@pytest.mark.parametrize("mode", ["none", "static", "dynamic"])
def test_attribute_and_capacity_keys_are_nvidias(profile, mode):
    for d in devices(profile, mode):
        kind = d["attributes"]["type"]["string"]
        published = "dynamic" if "consumesCounters" in d else ("static" if kind == "mig" else "none")
        assert set(d["attributes"]) == NVIDIA_ATTRS[(kind, published)], (profile, mode, d["name"])
        caps = set(d["capacity"])
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
    from labkit.sim.profiles import load_profile

    assert {n: load_profile(n).topology_attributes for n in ("topology-lab", "exp-small", "fleet-1000", "workshop",
                                                              "tiny", "mig-lab")} == {
        "topology-lab": True, "exp-small": True, "fleet-1000": True, "workshop": False, "tiny": False,
        "mig-lab": False}
