"""ResourceSlices (resource.k8s.io/v1) for a node profile, in the schema NVIDIA's DRA driver
publishes (dra-reference §5), plus the DeviceClasses NVIDIA installs and a NIC class.

MIG modes:
  none     every GPU is a `gpu-<minor>` device with `memory` capacity.
  static   GPUs with a `migLayout` publish their pre-created MIG devices (no counters); the
           parent GPU is not published. Other GPUs are published whole.
  dynamic  MIG-capable GPUs get one counter set `gpu-<minor>-counter-set`; every (profile,
           placement) is a device consuming its capacities plus its memory slices; the full GPU
           consumes everything (omitted on Ampere, where MIG mode cannot toggle without reset).

Node options (NVIDIA driver flags / feature gates):
  passthrough GPUs (`passthrough: true`, bound to vfio-pci; gate PassthroughSupport) are published
           as `gpu-vfio-<index>` devices of type `vfio` (mig_mode dynamic refused, as NVIDIA
           refuses DynamicMIG with PassthroughSupport). NVIDIA also publishes a vfio twin of each
           nvidia-bound GPU without MIG devices; LabKit does not (one mode per GPU).
  consumableShares (`--consumable-shares`, gate ConsumableShares): GPU and MIG devices get
           `allowMultipleAllocations: true` and a request policy on `memory` (plus a `shares`
           capacity when the value is a number); VFIO devices never do.
"""

from __future__ import annotations

import os
import re
from functools import cache
from typing import Any

from fake_gpus import computedomain, example_driver, naming
from fake_gpus.catalog import MIG_MODES, GpuSlot, MigProfile, NicSlot, NodeProfile, load_node_profile
from fake_gpus.errors import InputError
from fake_gpus.quantity import binary_si, parse_binary_si
from fake_gpus.topology import switch_chain

GPU_DRIVER = "gpu.nvidia.com"
NIC_DRIVER = "nic.fake-gpus.dev"
TOPOLOGY_DOMAIN = "topology.fake-gpus.dev"
STD_DOMAIN = "resource.kubernetes.io"
API_VERSION = "resource.k8s.io/v1"

NVIDIA_VENDOR_ID = "0x10de"
MIB = 1 << 20

MAX_DEVICES = 128
MAX_DEVICES_WITH_COUNTERS = 64
MAX_COUNTER_SETS = 8
MAX_COUNTERS_PER_SLICE_1_34 = 32
OLDEST_VERSION = (1, 34)

_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


class SliceError(InputError, ValueError):
    """Bad arguments to build_slices/device_classes (one-line message)."""


# ------------------------------------------------------------------ helpers


def parse_kubernetes_version(v: str) -> tuple[int, int]:
    m = re.match(r"^v?(\d+)\.(\d+)(\.\d+)?$", str(v).strip())
    if not m:
        raise SliceError(f"kubernetes_version {v!r}: must look like 1.37 or v1.35.2")
    ver = (int(m.group(1)), int(m.group(2)))
    if ver < OLDEST_VERSION:
        raise SliceError(f"kubernetes_version {v!r}: resource.k8s.io/v1 needs Kubernetes 1.34 or newer")
    if ver[0] != 1:
        raise SliceError(f"kubernetes_version {v!r}: no such Kubernetes release; use 1.34 to 1.38")
    return ver


def semver_from_nvml(v: str) -> str:
    """NVML version string re-printed as strict semver: `580.95.05` -> `580.95.5`, `13.0` -> `13.0.0`."""
    parts = str(v).split(".")
    if not 1 <= len(parts) <= 3 or not all(p.isdigit() for p in parts):
        raise SliceError(f"version {v!r}: must be 1-3 dot-separated numbers (e.g. 580.95.05)")
    nums = [int(p) for p in parts] + [0] * (3 - len(parts))
    return ".".join(str(n) for n in nums)


@cache
def counter_name(capacity: str) -> str:
    """Capacity name (camelCase) -> counter name (kebab-case): copyEngines -> copy-engines."""
    s = re.sub(r"([a-z0-9])([A-Z])", r"\1-\2", capacity)
    return re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1-\2", s).lower()


def _check_driver(name: str, what: str) -> None:
    if len(name) > 63 or not _DNS_SUBDOMAIN.match(name):
        raise SliceError(f"{what} {name!r}: must be a DNS subdomain of at most 63 characters (e.g. gpu.nvidia.com)")


def _s(v: str) -> dict[str, str]:
    return {"string": v}


def _caps(values: dict[str, int]) -> dict[str, dict[str, str]]:
    return {k: {"value": binary_si(v)} for k, v in sorted(values.items())}


def _counters(values: dict[str, int]) -> dict[str, dict[str, str]]:
    return {k: {"value": binary_si(v)} for k, v in sorted(values.items(), key=lambda kv: _counter_key(kv[0]))}


@cache
def _counter_key(name: str) -> tuple[int, str]:
    m = re.match(r"^memory-slice-(\d+)$", name)
    return (1, f"{int(m.group(1)):04d}") if m else (0, name)


def _topology_attrs(profile: NodeProfile, dev: GpuSlot | NicSlot) -> dict[str, dict[str, Any]]:
    """Our topology attributes. `pcieSwitch` names the top-level switch below the root complex
    (the switch complex), so matchAttribute on it groups a GPU with NICs of the same switch tree
    (PIX or PXB in nvidia-smi terms)."""
    attrs: dict[str, dict[str, Any]] = {f"{TOPOLOGY_DOMAIN}/numaNode": {"int": dev.numa_node}}
    if dev.pcie_switch is not None:
        top = switch_chain(profile, dev.pcie_switch)[-1]
        attrs[f"{TOPOLOGY_DOMAIN}/pcieSwitch"] = _s(naming.bounded(top))
    if isinstance(dev, GpuSlot) and dev.nvlink_domain is not None:
        attrs[f"{TOPOLOGY_DOMAIN}/nvlinkDomain"] = _s(naming.bounded(dev.nvlink_domain))
    if isinstance(dev, NicSlot) and profile.compute_domains:
        # rail-optimised fabric of a rack tray: NIC <i> plugs into rail switch <i> (no driver
        # publishes this today; an attribute a NIC driver could publish, issue 27)
        attrs[f"{TOPOLOGY_DOMAIN}/rail"] = {"int": dev.index}
    return attrs


# ------------------------------------------------------------------ devices


class _GpuView:
    """Everything needed to publish one GPU of one node."""

    def __init__(self, profile: NodeProfile, gpu: GpuSlot, node_name: str, topology: bool = False):
        self.profile, self.gpu, self.node, self.topology = profile, gpu, node_name, topology
        self.uuid = naming.gpu_uuid(node_name, gpu.minor)
        self._common = self._common_attrs()

    def common_attrs(self) -> dict[str, dict[str, Any]]:
        """A fresh copy (callers get independent dicts, so YAML dumps carry no aliases)."""
        return {k: dict(v) for k, v in self._common.items()}

    def _common_attrs(self) -> dict[str, dict[str, Any]]:
        """What NVIDIA's driver publishes on GPUs and their MIG devices alike (GpuInfo.Attributes,
        CommonAttributesMig): addressingMode only where NVML reports one; the standard
        resource.kubernetes.io/numaNode of the GPU (MIG devices: the parent's), which the driver
        publishes since mid-2026 (driver PR #1165; see tests/fake_gpus/test_fake_gpus_nvidia_schema.py)."""
        m, p = self.gpu.model, self.profile
        attrs = {
            "productName": _s(m.product_name),
            "brand": _s(m.brand),
            "architecture": _s(m.architecture),
            "cudaComputeCapability": {"version": semver_from_nvml(m.cuda_compute_capability)},
            "driverVersion": {"version": semver_from_nvml(p.driver_version)},
            "cudaDriverVersion": {"version": semver_from_nvml(p.cuda_driver_version)},
            f"{STD_DOMAIN}/pciBusID": _s(self.gpu.pci_bus_id),
            f"{STD_DOMAIN}/pcieRoot": _s(self.gpu.pcie_root),
            f"{STD_DOMAIN}/numaNode": {"int": self.gpu.numa_node},
        }
        if p.addressing_mode:
            attrs["addressingMode"] = _s(p.addressing_mode)
        if self.topology:
            attrs.update(_topology_attrs(p, self.gpu))
        return attrs

    def fm_attrs(self) -> dict[str, dict[str, Any]]:
        """Fabric Manager attributes (gate FabricManagerPartitioning, GpuInfo.addFabricManagerAttributes):
        gpuModuleID and one partition<size> per FM partition holding the GPU; GPU and VFIO devices."""
        mid = self.gpu.module_id
        if not mid or not self.profile.fm_partitions:
            return {}
        attrs: dict[str, dict[str, Any]] = {"gpuModuleID": {"int": mid}}
        for size, pid in self.profile.fm_partitions_of(mid).items():
            attrs[f"partition{size}"] = {"int": pid}
        return attrs

    def gpu_attrs(self) -> dict[str, dict[str, Any]]:
        attrs = {"type": _s("gpu"), "uuid": _s(self.uuid), **self.common_attrs(), **self.fm_attrs()}
        return dict(sorted(attrs.items()))

    def mig_attrs(self, prof: MigProfile, uuid: str | None) -> dict[str, dict[str, Any]]:
        attrs = {"type": _s("mig"), "parentUUID": _s(self.uuid), "profile": _s(prof.name), **self.common_attrs()}
        if uuid is not None:
            attrs["uuid"] = _s(uuid)
        return dict(sorted(attrs.items()))

    def vfio_device(self, index: int) -> dict[str, Any]:
        """The GPU bound to vfio-pci, as NVIDIA's VfioDeviceInfo.GetDevice publishes it: PCI
        identity and NUMA node only (NVML cannot see the GPU), capacity addressableMemory."""
        m = self.gpu.model
        attrs: dict[str, dict[str, Any]] = {
            "type": _s("vfio"),
            "uuid": _s(naming.vfio_uuid(self.gpu.pci_bus_id)),
            "deviceID": _s(m.pci_device_id),
            "vendorID": _s(NVIDIA_VENDOR_ID),
            "productName": _s(m.pci_device_name),
            "iommuFDEnabled": {"bool": self.profile.iommufd},
            f"{STD_DOMAIN}/pciBusID": _s(self.gpu.pci_bus_id),
            f"{STD_DOMAIN}/pcieRoot": _s(self.gpu.pcie_root),
            f"{STD_DOMAIN}/numaNode": {"int": self.gpu.numa_node},
        }
        if self.topology:
            attrs.update(_topology_attrs(self.profile, self.gpu))
        attrs.update(self.fm_attrs())
        return {
            "name": naming.vfio_device_name(index),
            "attributes": dict(sorted(attrs.items())),
            "capacity": _caps({"addressableMemory": m.addressable_memory_mib * MIB}),
        }

    def classic_gpu(self) -> dict[str, Any]:
        return {
            "name": naming.gpu_device_name(self.gpu.minor),
            "attributes": self.gpu_attrs(),
            "capacity": _caps({"memory": self.gpu.model.memory_bytes}),
        }

    def static_migs(self) -> list[dict[str, Any]]:
        out = []
        for pl in self.gpu.mig_layout:
            prof = self.gpu.model.mig_profile(pl.profile)
            caps = prof.capacities()
            caps.update({f"memorySlice{i}": 1 for i in prof.slices_at(pl.placement)})
            out.append({
                "name": naming.mig_device_name(self.gpu.minor, prof.name, prof.gi_profile_id, pl.placement),
                "attributes": self.mig_attrs(
                    prof, naming.mig_uuid(self.node, self.gpu.minor, prof.gi_profile_id, pl.placement)),
                "capacity": _caps(caps),
            })
        return out

    def counter_totals(self) -> dict[str, int]:
        totals = {counter_name(k): v for k, v in self.gpu.model.mig_max_capacities().items()}
        totals.update({f"memory-slice-{i}": 1 for i in range(self.gpu.model.mig_memory_slices)})
        return totals

    def counter_set(self) -> dict[str, Any]:
        return {"name": naming.counter_set_name(self.gpu.minor), "counters": _counters(self.counter_totals())}

    def dynamic_devices(self) -> list[dict[str, Any]]:
        cs = naming.counter_set_name(self.gpu.minor)
        out = []
        if self.gpu.model.architecture != "Ampere":
            out.append({
                "name": naming.gpu_device_name(self.gpu.minor),
                "attributes": self.gpu_attrs(),
                "capacity": _caps(self.gpu.model.mig_max_capacities()),
                "consumesCounters": [{"counterSet": cs, "counters": _counters(self.counter_totals())}],
            })
        for prof in self.gpu.model.mig_profiles:
            for start in prof.placements:
                used = {counter_name(k): v for k, v in prof.capacities().items()}
                used.update({f"memory-slice-{i}": 1 for i in prof.slices_at(start)})
                out.append({
                    "name": naming.mig_device_name(self.gpu.minor, prof.name, prof.gi_profile_id, start),
                    "attributes": self.mig_attrs(prof, None),
                    "capacity": _caps(prof.capacities()),
                    "consumesCounters": [{"counterSet": cs, "counters": _counters(used)}],
                })
        return out


def apply_consumable_shares(device: dict[str, Any], mode: str) -> dict[str, Any]:
    """What NVIDIA's driver does to a GPU or MIG device under --consumable-shares=<mode>
    (applyConsumableShares): multi-allocatable; `memory` rounded down to 1Mi with a request
    policy (mode memory: a claim takes all memory unless it asks for less; unlimited or N: it
    takes none unless it asks); N adds a `shares` capacity of N (a claim takes 1 by default)."""
    if mode == "disabled":
        return device
    device["allowMultipleAllocations"] = True
    mem = (device.get("capacity") or {}).get("memory")
    if mem is None:
        return device
    top = binary_si(parse_binary_si(mem["value"]) // MIB * MIB)
    step = binary_si(MIB)
    floor, default = (step, top) if mode == "memory" else ("0", "0")
    mem["value"] = top
    mem["requestPolicy"] = {"default": default, "validRange": {"min": floor, "max": top, "step": step}}
    if mode.isdigit():
        device["capacity"]["shares"] = {"value": mode, "requestPolicy": {
            "default": "1", "validRange": {"min": "1", "max": mode, "step": "1"}}}
        device["capacity"] = dict(sorted(device["capacity"].items()))
    return device


def _nic_device(profile: NodeProfile, nic: NicSlot, topology: bool = False) -> dict[str, Any]:
    m = nic.model
    attrs: dict[str, dict[str, Any]] = {
        "type": _s(m.type),
        "model": _s(m.name),
        "productName": _s(m.product_name),
        "vendor": _s(m.vendor),
        "vendorID": _s(m.vendor_id),
        "deviceID": _s(m.device_id),
        "linkType": _s(m.link_type),
        "linkSpeedGbps": {"int": m.link_speed_gbps},
        "ports": {"int": m.ports},
        f"{STD_DOMAIN}/pciBusID": _s(nic.pci_bus_id),
        f"{STD_DOMAIN}/pcieRoot": _s(nic.pcie_root),
        f"{STD_DOMAIN}/numaNode": {"int": nic.numa_node},
        **(_topology_attrs(profile, nic) if topology else {}),
    }
    return {
        "name": naming.nic_device_name(nic.index),
        "attributes": dict(sorted(attrs.items())),
        "capacity": _caps({"bandwidthGbps": m.link_speed_gbps}),
    }


# ------------------------------------------------------------------ slices


def _chunks(items: list[Any], size: int) -> list[list[Any]]:
    return [items[i:i + size] for i in range(0, len(items), size)] or [[]]


def _slice(node: str, driver: str, index: int, spec_body: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": API_VERSION,
        "kind": "ResourceSlice",
        "metadata": {"name": naming.slice_name(node, driver, index)},
        "spec": {"driver": driver, "nodeName": node, "pool": {"name": node}, **spec_body},
    }


def _finish_pool(slices: list[dict[str, Any]], generation: int) -> list[dict[str, Any]]:
    for s in slices:
        s["spec"]["pool"] = {"name": s["spec"]["pool"]["name"], "generation": generation,
                             "resourceSliceCount": len(slices)}
    return slices


def _device_limit(devices: list[dict[str, Any]]) -> int:
    heavy = any("consumesCounters" in d or "taints" in d for d in devices)
    return MAX_DEVICES_WITH_COUNTERS if heavy else MAX_DEVICES


def _resolve_profile(profile: NodeProfile | str | os.PathLike[str]) -> NodeProfile:
    return profile if isinstance(profile, NodeProfile) else load_node_profile(profile)


def build_gpu_slices(profile: NodeProfile | str, node_name: str, *, mig_mode: str | None = None,
                     driver: str = GPU_DRIVER, kubernetes_version: str = "1.37",
                     generation: int = 1, topology_attributes: bool = False) -> list[dict[str, Any]]:
    """The GPU driver's slices only (see build_slices)."""
    prof = _resolve_profile(profile)
    if not prof.gpus:  # a node without GPUs (a control plane) runs no GPU driver: nothing to publish
        return []
    mode = mig_mode or prof.mig_mode  # None or "" (e.g. an empty MIG_MODE env) = the profile's
    if mode not in MIG_MODES:
        raise SliceError(f"mig_mode {mode!r}: must be one of {', '.join(MIG_MODES)}")
    _check_driver(driver, "driver")
    version = parse_kubernetes_version(kubernetes_version)

    per_gpu: list[tuple[list[dict[str, Any]], list[dict[str, Any]]]] = []  # (counter sets, devices)
    for index, gpu in enumerate(sorted(prof.gpus, key=lambda g: g.pci_bus_id)):
        view = _GpuView(prof, gpu, node_name, topology_attributes)
        if gpu.passthrough:
            if mode == "dynamic":
                # NVIDIA's driver refuses to start: "feature gate DynamicMIG is currently mutually
                # exclusive with PassthroughSupport" (pkg/featuregates ValidateFeatureGates)
                raise SliceError(f"node profile {prof.name}: GPU {gpu.minor} is in passthrough mode: NVIDIA's feature "
                                 "gate DynamicMIG is mutually exclusive with PassthroughSupport; use mig_mode none "
                                 "or static")
            per_gpu.append(([], [view.vfio_device(index)]))
        elif mode == "dynamic" and gpu.model.mig_capable:
            per_gpu.append(([view.counter_set()], sorted(view.dynamic_devices(), key=lambda d: d["name"])))
        elif mode == "static" and gpu.mig_layout:
            per_gpu.append(([], view.static_migs()))
        else:
            per_gpu.append(([], [view.classic_gpu()]))

    for _, devs in per_gpu:
        for d in devs:
            if d["attributes"]["type"]["string"] != "vfio":
                apply_consumable_shares(d, prof.consumable_shares)
    bodies: list[dict[str, Any]] = []
    if not any(cs for cs, _ in per_gpu):
        # classic: all devices in as few slices as the limit allows, in PCI bus order
        devices = [d for _, devs in per_gpu for d in devs]
        bodies = [{"devices": chunk} for chunk in _chunks(devices, _device_limit(devices))]
    elif version >= (1, 35):
        # split: counter sets in their own slice(s), then one device slice per GPU
        sets = [s for cs, _ in per_gpu for s in cs]
        bodies += [{"sharedCounters": chunk} for chunk in _chunks(sets, MAX_COUNTER_SETS)]
        for _, devs in per_gpu:
            bodies += [{"devices": chunk} for chunk in _chunks(devs, _device_limit(devs))]
    else:
        # 1.34 combined: one slice per GPU holding its counter set and its devices
        for cs, devs in per_gpu:
            n_counters = sum(len(s["counters"]) for s in cs)
            if n_counters > MAX_COUNTERS_PER_SLICE_1_34 or len(devs) > MAX_DEVICES_WITH_COUNTERS:
                raise SliceError(
                    f"Kubernetes 1.34 slices hold at most {MAX_COUNTERS_PER_SLICE_1_34} counters and "
                    f"{MAX_DEVICES_WITH_COUNTERS} devices with counters; use kubernetes_version >= 1.35")
            body: dict[str, Any] = {"devices": devs}
            if cs:
                body["sharedCounters"] = cs
            bodies.append(body)
    slices = [_slice(node_name, driver, i, b) for i, b in enumerate(bodies)]
    return _finish_pool(slices, generation)


def build_nic_slices(profile: NodeProfile | str, node_name: str, *, nic_driver: str = NIC_DRIVER,
                     generation: int = 1, topology_attributes: bool = False) -> list[dict[str, Any]]:
    """The NIC driver's slices: one pool named after the node; empty list without NICs."""
    prof = _resolve_profile(profile)
    if not prof.nics:
        return []
    _check_driver(nic_driver, "nic_driver")
    devices = [_nic_device(prof, n, topology_attributes) for n in sorted(prof.nics, key=lambda n: n.pci_bus_id)]
    slices = [_slice(node_name, nic_driver, i, {"devices": c}) for i, c in enumerate(_chunks(devices, MAX_DEVICES))]
    return _finish_pool(slices, generation)


def build_slices(profile: NodeProfile | str, node_name: str, *, mig_mode: str | None = None,
                 driver: str = GPU_DRIVER, nic_driver: str = NIC_DRIVER, kubernetes_version: str = "1.37",
                 generation: int = 1, topology_attributes: bool = False) -> list[dict[str, Any]]:
    """All ResourceSlices the node publishes: the GPU driver's pool, then the NIC driver's pool.

    `profile` is a NodeProfile or a profile name/path; `mig_mode` None or "" = the profile's default.
    GPU and MIG devices carry exactly the attributes NVIDIA's driver publishes;
    `topology_attributes` adds LabKit's own `topology.fake-gpus.dev/*` (numaNode, pcieSwitch,
    nvlinkDomain) to GPUs, MIG devices and NICs, for topology lessons.
    """
    if not isinstance(node_name, str) or not _DNS_SUBDOMAIN.match(node_name) or len(node_name) > 253:
        raise SliceError(f"node name {node_name!r}: must be a DNS subdomain (lower-case, e.g. node-1)")
    if driver == nic_driver:
        raise SliceError(f"nic_driver {nic_driver!r}: must differ from the GPU driver name")
    prof = _resolve_profile(profile)
    if prof.example is not None:  # the node runs dra-example-driver, not NVIDIA's driver
        return example_driver.build_example_slices(prof.example, node_name)
    gpu = build_gpu_slices(prof, node_name, mig_mode=mig_mode, driver=driver, kubernetes_version=kubernetes_version,
                           generation=generation, topology_attributes=topology_attributes)
    nic = build_nic_slices(prof, node_name, nic_driver=nic_driver, generation=generation,
                           topology_attributes=topology_attributes)
    return gpu + nic + build_compute_domain_slices(prof, node_name, generation=generation)


def build_compute_domain_slices(profile: NodeProfile | str, node_name: str, *,
                                generation: int = 1) -> list[dict[str, Any]]:
    """NVIDIA's compute-domain plugin's slice (channel-0, daemon-0) on nodes whose profile says
    `computeDomains: true` (multi-node NVLink trays); empty list elsewhere."""
    prof = _resolve_profile(profile)
    if not prof.compute_domains:
        return []
    return _finish_pool([_slice(node_name, computedomain.DRIVER, 0, {"devices": computedomain.devices()})],
                        generation)


# ------------------------------------------------------------------ device classes


def _class(name: str, expression: str, extended: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"selectors": [{"cel": {"expression": expression}}]}
    if extended:
        spec["extendedResourceName"] = extended
    return {"apiVersion": API_VERSION, "kind": "DeviceClass", "metadata": {"name": name}, "spec": spec}


def device_classes_for(profiles: list[NodeProfile]) -> list[dict[str, Any]]:
    """The DeviceClasses a cluster of these node profiles installs: NVIDIA's (always) plus the
    dra-example-driver's when some node runs it."""
    examples = [p.example for p in profiles if p.example is not None]
    cds = computedomain.device_classes(API_VERSION) if any(p.compute_domains for p in profiles) else []
    return device_classes() + cds + (example_driver.example_device_classes(examples) if examples else [])


def device_classes(driver: str = GPU_DRIVER, nic_driver: str = NIC_DRIVER, *,
                   extended_resource_name: str | None = "nvidia.com/gpu") -> list[dict[str, Any]]:
    """The DeviceClasses NVIDIA's chart installs for the GPU driver (named after the driver as
    NVIDIA does: `gpu.nvidia.com`, `mig.nvidia.com`, `vfio.gpu.nvidia.com`) plus a NIC class."""
    _check_driver(driver, "driver")
    _check_driver(nic_driver, "nic_driver")
    base = driver.split(".", 1)[1] if driver.startswith("gpu.") else driver

    def sel(kind: str) -> str:
        return f"device.driver == '{driver}' && device.attributes['{driver}'].type == '{kind}'"

    return [
        _class(driver, sel("gpu"), extended_resource_name),
        _class(f"mig.{base}", sel("mig")),
        _class(f"vfio.{driver}", sel("vfio")),
        _class(nic_driver, f"device.driver == '{nic_driver}'"),
    ]
