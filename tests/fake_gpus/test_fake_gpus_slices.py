"""ResourceSlice schema, MIG modes, counters, limits, per-version layout, determinism, classes."""

from __future__ import annotations

import json
import re
from collections import Counter

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from fake_gpus.catalog import load_node_profile, node_profiles
from fake_gpus.quantity import binary_si, parse_binary_si
from fake_gpus.slices import (
    GPU_DRIVER,
    NIC_DRIVER,
    SliceError,
    build_slices,
    counter_name,
    device_classes,
    semver_from_nvml,
)
from labkit import cel

PROFILES = ["dgx-a100", "dgx-h100", "t4-inference", "l4-edge", "mig-a100", "hgx-h200", "mixed-a100-t4"]
MODES = ["none", "static", "dynamic"]
VERSIONS = ["1.34", "1.35", "1.36", "1.37"]

DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
C_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
SEMVER = re.compile(r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)$")
UUID_RE = r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"


def devices(slices, driver=GPU_DRIVER):
    return [d for s in slices if s["spec"]["driver"] == driver for d in s["spec"].get("devices", [])]


def counter_sets(slices):
    return {cs["name"]: cs for s in slices for cs in s["spec"].get("sharedCounters", [])}


def check_qualified_name(name: str) -> None:
    if "/" in name:
        domain, ident = name.split("/")
        assert len(domain) <= 63 and DNS_SUBDOMAIN.match(domain), name
    else:
        ident = name
    assert len(ident) <= 32 and C_IDENT.match(ident), name


def check_slice_rules(slices, version):
    """The API-server rules of dra-reference §1.3 / §1.6 that our output must meet."""
    pools: dict[tuple[str, str], list[dict]] = {}
    for s in slices:
        assert s["apiVersion"] == "resource.k8s.io/v1" and s["kind"] == "ResourceSlice"
        name = s["metadata"]["name"]
        assert len(name) <= 253 and DNS_SUBDOMAIN.match(name), name
        spec = s["spec"]
        pools.setdefault((spec["driver"], spec["pool"]["name"]), []).append(s)
        devs = spec.get("devices", [])
        heavy = any("consumesCounters" in d for d in devs)
        assert len(devs) <= (64 if heavy else 128)
        sets = spec.get("sharedCounters", [])
        assert len(sets) <= 8
        if version >= (1, 35):
            assert not (devs and sets), "1.35+: a slice holds devices or sharedCounters, not both"
        else:
            assert sum(len(cs["counters"]) for cs in sets) <= 32
        for cs in sets:
            assert DNS_LABEL.match(cs["name"]) and len(cs["counters"]) <= 32
            assert all(DNS_LABEL.match(c) for c in cs["counters"])
        for d in devs:
            assert len(d["name"]) <= 63 and DNS_LABEL.match(d["name"]), d["name"]
            attrs, caps = d.get("attributes", {}), d.get("capacity", {})
            assert len(attrs) + len(caps) <= 32, d["name"]
            for k, v in attrs.items():
                check_qualified_name(k)
                assert len(v) == 1 and next(iter(v)) in {"int", "bool", "string", "version"}
                if "string" in v:
                    assert isinstance(v["string"], str) and len(v["string"]) <= 64
                if "version" in v:
                    assert SEMVER.match(v["version"]), v
                if "int" in v:
                    assert isinstance(v["int"], int) and not isinstance(v["int"], bool)
            for k, v in caps.items():
                check_qualified_name(k)
                assert set(v) == {"value"} and binary_si(parse_binary_si(v["value"])) == v["value"]
            assert len(d.get("consumesCounters", [])) <= 2
    for (_driver, _pool), members in pools.items():
        counts = {m["spec"]["pool"]["resourceSliceCount"] for m in members}
        gens = {m["spec"]["pool"]["generation"] for m in members}
        assert counts == {len(members)} and len(gens) == 1
        names = [d["name"] for m in members for d in m["spec"].get("devices", [])]
        assert len(names) == len(set(names)), "device names unique in the pool"
        sets = {cs["name"]: cs for m in members for cs in m["spec"].get("sharedCounters", [])}
        for m in members:
            for d in m["spec"].get("devices", []):
                for cc in d.get("consumesCounters", []):
                    assert cc["counterSet"] in sets, (d["name"], cc["counterSet"])
                    assert set(cc["counters"]) <= set(sets[cc["counterSet"]]["counters"]), d["name"]


@pytest.mark.parametrize("profile", PROFILES)
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("version", VERSIONS)
def test_slices_meet_api_rules(profile, mode, version):
    slices = build_slices(profile, "node-a", mig_mode=mode, kubernetes_version=version)
    check_slice_rules(slices, tuple(int(x) for x in version.split(".")))
    for s in slices:
        assert s["spec"]["nodeName"] == "node-a" and s["spec"]["pool"]["name"] == "node-a"


def test_full_gpu_device_schema():
    slices = build_slices("dgx-a100", "node-a")
    devs = devices(slices)
    assert [d["name"] for d in devs] == [f"gpu-{i}" for i in range(8)]
    d = devs[0]
    a = d["attributes"]
    assert a["type"] == {"string": "gpu"}
    assert re.fullmatch("GPU-" + UUID_RE, a["uuid"]["string"])
    assert a["productName"] == {"string": "NVIDIA A100-SXM4-80GB"}
    assert a["brand"] == {"string": "Nvidia"} and a["architecture"] == {"string": "Ampere"}
    assert a["cudaComputeCapability"] == {"version": "8.0.0"}
    assert a["driverVersion"] == {"version": "580.95.5"}
    assert a["cudaDriverVersion"] == {"version": "13.0.0"}
    assert a["resource.kubernetes.io/pciBusID"] == {"string": "0000:07:00.0"}
    assert a["resource.kubernetes.io/pcieRoot"] == {"string": "pci0000:00"}
    assert a["addressingMode"] == {"string": "HMM"}
    assert a["resource.kubernetes.io/numaNode"] == {"int": 0}
    assert not any(k.startswith("topology.fake-gpus.dev/") for k in a)  # LabKit's own: opt-in
    assert d["capacity"] == {"memory": {"value": "80Gi"}}
    assert "consumesCounters" not in d
    t = devices(build_slices("dgx-a100", "node-a", topology_attributes=True))[0]["attributes"]
    assert t["topology.fake-gpus.dev/numaNode"] == {"int": 0}
    assert t["topology.fake-gpus.dev/pcieSwitch"] == {"string": "plx0"}
    assert t["topology.fake-gpus.dev/nvlinkDomain"] == {"string": "nvswitch-0"}


@pytest.mark.parametrize(("profile", "gpu", "nic", "switch"), [("dgx-a100", "gpu-1", "nic-0", "plx0"),
                                                             ("hgx-h200", "gpu-1", "nic-0", "sw0"),
                                                             ("dgx-h100", "gpu-3", "nic-3", "sw3")])
def test_pcie_switch_attribute_names_the_switch_complex(profile, gpu, nic, switch):
    slices = build_slices(profile, "n", topology_attributes=True)
    g = {d["name"]: d for d in devices(slices)}[gpu]
    n = {d["name"]: d for d in devices(slices, NIC_DRIVER)}[nic]
    key = "topology.fake-gpus.dev/pcieSwitch"
    assert g["attributes"][key] == n["attributes"][key] == {"string": switch}


def test_uuids_deterministic_and_node_specific():
    a = devices(build_slices("dgx-a100", "node-a"))
    b = devices(build_slices("dgx-a100", "node-b"))
    ua = [d["attributes"]["uuid"]["string"] for d in a]
    assert ua == [d["attributes"]["uuid"]["string"] for d in devices(build_slices("dgx-a100", "node-a"))]
    assert not set(ua) & {d["attributes"]["uuid"]["string"] for d in b}
    assert len(set(ua)) == 8


def test_static_mig_devices():
    slices = build_slices("mig-a100", "node-a")
    devs = devices(slices)
    names = [d["name"] for d in devs]
    assert "gpu-0" not in names and not any(re.fullmatch(r"gpu-\d+", n) for n in names)
    assert names[:7] == [f"gpu-0-mig-1g5gb-19-{i}" for i in range(7)]
    assert "gpu-1-mig-3g20gb-9-0" in names and "gpu-1-mig-2g10gb-14-4" in names
    assert len(devs) == 7 + 3 + 2 + 2
    by_name = {d["name"]: d for d in devs}
    d = by_name["gpu-1-mig-3g20gb-9-0"]
    assert d["attributes"]["type"] == {"string": "mig"}
    assert d["attributes"]["profile"] == {"string": "3g.20gb"}
    assert re.fullmatch("MIG-" + UUID_RE, d["attributes"]["uuid"]["string"])
    parent_uuids = {x["attributes"]["parentUUID"]["string"] for x in devs if x["name"].startswith("gpu-1-")}
    assert len(parent_uuids) == 1 and parent_uuids.pop().startswith("GPU-")
    assert d["capacity"]["multiprocessors"] == {"value": "42"}
    assert d["capacity"]["memory"] == {"value": "19968Mi"}
    assert {k for k in d["capacity"] if k.startswith("memorySlice")} == {f"memorySlice{i}" for i in range(4)}
    # static layouts never overlap memory slices
    for minor in range(4):
        used = Counter(k for x in devs if x["name"].startswith(f"gpu-{minor}-") for k in x["capacity"]
                       if k.startswith("memorySlice"))
        assert used and max(used.values()) == 1


def test_empty_mig_mode_means_profile_default():
    assert build_slices("mig-a100", "n", mig_mode="") == build_slices("mig-a100", "n", mig_mode="static")
    assert build_slices("mig-a100", "n", mig_mode=None) == build_slices("mig-a100", "n")


def test_static_mode_on_profile_without_layout_publishes_whole_gpus():
    assert [d["name"] for d in devices(build_slices("dgx-h100", "n", mig_mode="static"))] == [
        f"gpu-{i}" for i in range(8)]


@pytest.mark.parametrize(("profile", "per_gpu", "full"), [("dgx-a100", 25, False), ("dgx-h100", 26, True),
                                                          ("hgx-h200", 26, True), ("mig-a100", 25, False)])
def test_dynamic_mig_devices_and_counters(profile, per_gpu, full):
    prof = load_node_profile(profile)
    slices = build_slices(prof, "node-a", mig_mode="dynamic")
    devs = devices(slices)
    sets = counter_sets(slices)
    assert len(devs) == per_gpu * len(prof.gpus)
    assert sorted(sets) == sorted(f"gpu-{g.minor}-counter-set" for g in prof.gpus)
    for g in prof.gpus:
        model = g.model
        cs = sets[f"gpu-{g.minor}-counter-set"]["counters"]
        # counter totals = per-dimension maximum over the profiles + one counter per memory slice
        want = {counter_name(k): v for k, v in model.mig_max_capacities().items()}
        want.update({f"memory-slice-{i}": 1 for i in range(8)})
        assert {k: parse_binary_si(v["value"]) for k, v in cs.items()} == want
        mine = [d for d in devs if d["name"] == f"gpu-{g.minor}" or d["name"].startswith(f"gpu-{g.minor}-")]
        assert (f"gpu-{g.minor}" in {d["name"] for d in mine}) == full
        expected_names = {f"gpu-{g.minor}-mig-{p.name.replace('.', '').replace('+', '-')}-{p.gi_profile_id}-{s}"
                          for p in model.mig_profiles for s in p.placements}
        assert {d["name"] for d in mine if "-mig-" in d["name"]} == expected_names
        for d in mine:
            (cc,) = d["consumesCounters"]
            assert cc["counterSet"] == f"gpu-{g.minor}-counter-set"
            used = {k: parse_binary_si(v["value"]) for k, v in cc["counters"].items()}
            assert set(used) <= set(want)
            assert all(used[k] <= want[k] for k in used)
            if "-mig-" in d["name"]:
                assert "uuid" not in d["attributes"]
                prof_name = d["attributes"]["profile"]["string"]
                p = model.mig_profile(prof_name)
                start = int(d["name"].rsplit("-", 1)[1])
                assert {k for k in used if k.startswith("memory-slice-")} == {
                    f"memory-slice-{i}" for i in p.slices_at(start)}
                caps = {k: parse_binary_si(v["value"]) for k, v in d["capacity"].items()}
                assert caps == p.capacities()
            else:
                assert used == want  # the full GPU consumes everything


def test_dynamic_counters_exhausted_by_exact_fill():
    """Seven 1g placements + nothing else fit; the 7g profile alone uses every counter exactly."""
    slices = build_slices("dgx-h100", "n", mig_mode="dynamic")
    sets = counter_sets(slices)
    total = {k: parse_binary_si(v["value"]) for k, v in sets["gpu-0-counter-set"]["counters"].items()}
    by = {d["name"]: d for d in devices(slices)}
    seven_g = by["gpu-0-mig-7g80gb-0-0"]["consumesCounters"][0]["counters"]
    assert {k: parse_binary_si(v["value"]) for k, v in seven_g.items()} == total
    used: Counter[str] = Counter()
    for i in range(7):
        for k, v in by[f"gpu-0-mig-1g10gb-19-{i}"]["consumesCounters"][0]["counters"].items():
            used[k] += parse_binary_si(v["value"])
    assert all(used[k] <= total[k] for k in used)
    assert used["memory-slice-7"] == 0


@pytest.mark.parametrize("version", ["1.35", "1.36", "1.37"])
def test_split_layout(version):
    slices = build_slices("dgx-h100", "n", mig_mode="dynamic", kubernetes_version=version)
    gpu = [s for s in slices if s["spec"]["driver"] == GPU_DRIVER]
    assert "sharedCounters" in gpu[0]["spec"] and "devices" not in gpu[0]["spec"]
    assert len(gpu) == 1 + 8
    buses = []
    for s in gpu[1:]:
        names = [d["name"] for d in s["spec"]["devices"]]
        assert names == sorted(names)
        assert len({n.split("-")[1] for n in names}) == 1  # one GPU per slice
        buses.append(s["spec"]["devices"][0]["attributes"]["resource.kubernetes.io/pciBusID"]["string"])
    assert buses == sorted(buses)
    assert [s["metadata"]["name"] for s in gpu] == [f"n-gpu.nvidia.com-{i}" for i in range(9)]
    assert {s["spec"]["pool"]["resourceSliceCount"] for s in gpu} == {9}


def test_combined_layout_1_34():
    slices = build_slices("dgx-h100", "n", mig_mode="dynamic", kubernetes_version="1.34")
    gpu = [s for s in slices if s["spec"]["driver"] == GPU_DRIVER]
    assert len(gpu) == 8
    for s in gpu:
        (cs,) = s["spec"]["sharedCounters"]
        assert all(cc["counterSet"] == cs["name"] for d in s["spec"]["devices"] for cc in d["consumesCounters"])


def test_many_gpus_split_into_more_slices(tmp_path):
    gpus = "\n".join(f"  - {{minor: {i}, model: A100-SXM4-40GB, pciBusID: \"0000:{i + 1:02x}:00.0\", "
                     f"pcieRoot: pci0000:00}}" for i in range(20))
    f = tmp_path / "big.yaml"
    f.write_text(f"name: big\nsockets: [{{id: 0}}]\npcieRoots: [{{id: pci0000:00, socket: 0}}]\ngpus:\n{gpus}\n")
    prof = load_node_profile(str(f))
    dyn = build_slices(prof, "n", mig_mode="dynamic")
    assert sum(1 for s in dyn if "sharedCounters" in s["spec"]) == 3  # 20 sets, 8 per slice
    check_slice_rules(dyn, (1, 37))
    assert len(devices(dyn)) == 20 * 25
    # classic: 20 devices fit into one slice
    assert len(build_slices(prof, "n")) == 1


def test_more_than_128_devices_split_into_two_slices(tmp_path):
    gpus = "\n".join(f"  - {{minor: {i}, model: T4, pciBusID: \"0000:{i + 1:02x}:00.0\", pcieRoot: pci0000:00}}"
                     for i in range(130))
    f = tmp_path / "wide.yaml"
    f.write_text(f"name: wide\nsockets: [{{id: 0}}]\npcieRoots: [{{id: pci0000:00, socket: 0}}]\ngpus:\n{gpus}\n")
    slices = build_slices(load_node_profile(str(f)), "n")
    assert [len(s["spec"]["devices"]) for s in slices] == [128, 2]
    assert {s["spec"]["pool"]["resourceSliceCount"] for s in slices} == {2}
    check_slice_rules(slices, (1, 37))


def test_nic_slices(tmp_path):
    slices = build_slices("dgx-h100", "node-a")
    nic = [s for s in slices if s["spec"]["driver"] == NIC_DRIVER]
    assert len(nic) == 1 and nic[0]["spec"]["pool"] == {"name": "node-a", "generation": 1, "resourceSliceCount": 1}
    devs = nic[0]["spec"]["devices"]
    assert len(devs) == 10
    by = {d["name"]: d for d in devs}
    assert by["nic-0"]["attributes"]["model"] == {"string": "ConnectX-7"}
    assert by["nic-8"]["attributes"]["type"] == {"string": "nic"}  # storage ConnectX-7 (BlueField-3 is DGX B200's)
    assert by["nic-0"]["attributes"]["linkSpeedGbps"] == {"int": 400}
    # NIC 0 shares GPU 0's PCIe root (alignment via matchAttribute on pcieRoot)
    gpu0 = devices(slices)[0]
    assert (by["nic-0"]["attributes"]["resource.kubernetes.io/pcieRoot"]
            == gpu0["attributes"]["resource.kubernetes.io/pcieRoot"])
    assert not [s for s in build_slices("t4-inference", "n") if s["spec"]["driver"] == NIC_DRIVER]
    dpu_profile = tmp_path / "dpu.yaml"
    dpu_profile.write_text("name: dpu\nsockets: [{id: 0, numaNode: 0}]\npcieRoots: [{id: pci0000:00, socket: 0}]\n"
                           "gpus: []\n"
                           "nics: [{index: 0, model: BlueField-3, pciBusID: '0000:29:00.0', pcieRoot: pci0000:00}]\n")
    dpu = [d for s in build_slices(str(dpu_profile), "n") if s["spec"]["driver"] == NIC_DRIVER for d in s["spec"]["devices"]]
    assert dpu[0]["attributes"]["type"] == {"string": "dpu"}
    custom = build_slices("dgx-h100", "n", driver="gpu.example.com", nic_driver="net.example.com")
    assert {s["spec"]["driver"] for s in custom} == {"gpu.example.com", "net.example.com"}


@pytest.mark.parametrize("profile", PROFILES)
def test_deterministic_yaml(profile):
    a = yaml.safe_dump_all(build_slices(profile, "n1", mig_mode="dynamic"), sort_keys=True)
    b = yaml.safe_dump_all(build_slices(profile, "n1", mig_mode="dynamic"), sort_keys=True)
    assert a == b
    json.dumps(build_slices(profile, "n1"))  # plain JSON-serialisable data


def test_bad_arguments():
    with pytest.raises(SliceError, match="mig_mode 'partial'"):
        build_slices("dgx-a100", "n", mig_mode="partial")
    with pytest.raises(SliceError, match="kubernetes_version '1.33'"):
        build_slices("dgx-a100", "n", kubernetes_version="1.33")
    with pytest.raises(SliceError, match="kubernetes_version 'latest'"):
        build_slices("dgx-a100", "n", kubernetes_version="latest")
    with pytest.raises(SliceError, match="node name 'Node_A'"):
        build_slices("dgx-a100", "Node_A")
    with pytest.raises(SliceError, match="driver 'GPU'"):
        build_slices("dgx-a100", "n", driver="GPU")


def test_semver_and_counter_names():
    assert semver_from_nvml("580.95.05") == "580.95.5"
    assert semver_from_nvml("13.0") == "13.0.0"
    assert semver_from_nvml("8.0") == "8.0.0"
    assert counter_name("copyEngines") == "copy-engines"
    assert counter_name("ofaEngines") == "ofa-engines"
    assert counter_name("multiprocessors") == "multiprocessors"


@given(st.integers(min_value=0, max_value=1 << 62))
@settings(max_examples=200, deadline=None)
def test_binary_si_roundtrip(n):
    s = binary_si(n)
    assert parse_binary_si(s) == n
    assert re.fullmatch(r"\d+(Ki|Mi|Gi|Ti|Pi|Ei)?", s)


def test_device_classes():
    classes = {c["metadata"]["name"]: c for c in device_classes()}
    assert set(classes) == {"gpu.nvidia.com", "mig.nvidia.com", "vfio.gpu.nvidia.com", NIC_DRIVER}
    assert classes["gpu.nvidia.com"]["spec"]["extendedResourceName"] == "nvidia.com/gpu"
    assert "extendedResourceName" not in classes["mig.nvidia.com"]["spec"]
    for name, kind in [("gpu.nvidia.com", "gpu"), ("mig.nvidia.com", "mig"), ("vfio.gpu.nvidia.com", "vfio")]:
        (sel,) = classes[name]["spec"]["selectors"]
        assert sel["cel"]["expression"] == (
            f"device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == '{kind}'")
    custom = {c["metadata"]["name"] for c in device_classes("gpu.example.com", "net.example.com")}
    assert custom == {"gpu.example.com", "mig.example.com", "vfio.gpu.example.com", "net.example.com"}


def test_all_packaged_profiles_build():
    for name in node_profiles():
        for mode in MODES:
            if mode == "dynamic" and any(g.passthrough for g in load_node_profile(name).gpus):
                with pytest.raises(SliceError, match="DynamicMIG is mutually exclusive with PassthroughSupport"):
                    build_slices(name, "x", mig_mode=mode)
                continue
            # a node without GPUs (cpu-control-plane) runs no GPU driver and publishes nothing
            assert build_slices(name, "x", mig_mode=mode) or not load_node_profile(name).gpus


@pytest.mark.parametrize(("profile", "mode"), [("mixed-a100-t4", "dynamic"), ("mig-a100", "static"),
                                               ("dgx-h100", "none"), ("dgx-h100", "dynamic")])
def test_device_class_selectors_evaluate_with_labkit_cel(profile, mode):
    slices = build_slices(profile, "n", mig_mode=mode)
    for cls in device_classes():
        prog = cel.compile_selector(cls["spec"]["selectors"][0]["cel"]["expression"])
        for s in slices:
            drv = s["spec"]["driver"]
            for d in s["spec"].get("devices", []):
                got = prog.evaluate(cel.device_input(drv, d))
                kind = d["attributes"]["type"]["string"]
                want = {"gpu.nvidia.com": drv == GPU_DRIVER and kind == "gpu",
                        "mig.nvidia.com": drv == GPU_DRIVER and kind == "mig",
                        "vfio.gpu.nvidia.com": False,
                        NIC_DRIVER: drv == NIC_DRIVER}[cls["metadata"]["name"]]
                assert got == want, (cls["metadata"]["name"], d["name"])


def test_typical_claim_selectors_evaluate_with_labkit_cel():
    slices = build_slices("dgx-h100", "n", mig_mode="dynamic")
    devs = devices(slices)

    def matching(expr, pool=devs):
        prog = cel.compile_selector(expr)
        return sorted(d["name"] for d in pool if prog.evaluate(cel.device_input(GPU_DRIVER, d)))

    migs = [d for d in devs if d["attributes"]["type"]["string"] == "mig"]  # what mig.nvidia.com admits
    assert len(matching("device.attributes['gpu.nvidia.com'].profile == '3g.40gb'", migs)) == 2 * 8
    big = matching("device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('40Gi')) >= 0")
    assert "gpu-0" in big and "gpu-0-mig-7g80gb-0-0" in big and "gpu-0-mig-3g40gb-9-0" not in big
    assert matching("device.attributes['resource.kubernetes.io'].pcieRoot == 'pci0000:97' && "
                    "device.attributes['gpu.nvidia.com'].type == 'gpu'") == ["gpu-4"]  # one GPU per root on a DGX H100
    assert matching("device.attributes['resource.kubernetes.io'].numaNode == 1 && "
                    "device.attributes['gpu.nvidia.com'].type == 'gpu'") == [f"gpu-{i}" for i in range(4, 8)]
    assert len(matching("device.attributes['gpu.nvidia.com'].cudaComputeCapability.isGreaterThan(semver('8.9.0'))")) \
        == len(devs)
