"""Typed, immutable views of the catalog data (GPU/NIC models, node profiles).

Everything here is plain data; `fake_gpus.topology.topology_structure(profile)` gives the same
structure as dicts for code that wants to build graphs without importing these classes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from fake_gpus.errors import InputError

MIB = 1 << 20

# capacity name (NVIDIA's camelCase) -> attribute of MigProfile/GpuModel holding the value
CAPACITY_FIELDS: tuple[tuple[str, str], ...] = (
    ("multiprocessors", "multiprocessors"),
    ("copyEngines", "copy_engines"),
    ("decoders", "decoders"),
    ("encoders", "encoders"),
    ("jpegEngines", "jpeg_engines"),
    ("ofaEngines", "ofa_engines"),
)


class CatalogLookupError(InputError, KeyError):
    """A MIG profile, GPU or NVLink domain a model or node profile does not have."""

    def __str__(self) -> str:  # the message, not KeyError's quoted repr
        return str(self.args[0]) if self.args else ""


@dataclass(frozen=True)
class MigProfile:
    """One MIG GPU-instance profile (with its full-size compute instance)."""

    name: str
    gi_profile_id: int
    multiprocessors: int
    copy_engines: int
    decoders: int
    encoders: int
    jpeg_engines: int
    ofa_engines: int
    memory_mib: int
    memory_slices: int
    max_instances: int
    placements: tuple[int, ...]
    memory_verified: bool = True

    @property
    def compute_slices(self) -> int:
        """The N of `Ng.<mem>gb`: compute slices (of 7) the instance takes."""
        return int(self.name.split("g.", 1)[0])

    @property
    def memory_bytes(self) -> int:
        return self.memory_mib * MIB

    def capacities(self) -> dict[str, int]:
        """NVIDIA capacity names -> integer values (memory in bytes)."""
        caps = {cap: getattr(self, attr) for cap, attr in CAPACITY_FIELDS}
        caps["memory"] = self.memory_bytes
        return caps

    def slices_at(self, start: int) -> range:
        """Memory slices a GI of this profile occupies when placed at `start`."""
        return range(start, start + self.memory_slices)


@dataclass(frozen=True)
class GpuModel:
    name: str
    product_name: str
    brand: str
    architecture: str
    cuda_compute_capability: str
    memory_mib: int
    multiprocessors: int
    copy_engines: int
    decoders: int
    encoders: int
    jpeg_engines: int
    ofa_engines: int
    form_factor: str
    pcie_generation: int
    nvlink: dict[str, int] | None = None
    mig_memory_slices: int = 0
    mig_compute_slices: int = 0
    mig_profiles: tuple[MigProfile, ...] = ()
    pci_device_id: str = ""  # "0x2330": what a VFIO device publishes as deviceID
    pci_device_name: str = ""  # the pci.ids name: a VFIO device's productName
    addressable_memory_mib: int = 0  # 64-bit BARs rounded up to a power of two (0 = unknown)

    @property
    def mig_capable(self) -> bool:
        return bool(self.mig_profiles)

    @property
    def memory_bytes(self) -> int:
        return self.memory_mib * MIB

    def mig_profile(self, name: str) -> MigProfile:
        for p in self.mig_profiles:
            if p.name == name:
                return p
        known = ", ".join(p.name for p in self.mig_profiles) or "none (no MIG support)"
        raise CatalogLookupError(f"GPU model {self.name}: unknown MIG profile {name!r}; fix: use one of {known}")

    def mig_max_capacities(self) -> dict[str, int]:
        """Per-dimension maximum over all MIG profiles (what NVIDIA's DynamicMIG mode publishes
        as the full GPU's capacity and uses as counter-set totals)."""
        return dict(self._mig_max)

    @cached_property
    def _mig_max(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for p in self.mig_profiles:
            for k, v in p.capacities().items():
                out[k] = max(out.get(k, 0), v)
        return out


@dataclass(frozen=True)
class NicModel:
    name: str
    product_name: str
    vendor: str
    vendor_id: str
    device_id: str
    type: str
    link_type: str
    link_speed_gbps: int
    ports: int
    pcie_generation: int


@dataclass(frozen=True)
class MigPlacement:
    profile: str
    placement: int


@dataclass(frozen=True)
class GpuSlot:
    """A GPU installed in a node: model plus where it sits."""

    minor: int
    model: GpuModel
    pci_bus_id: str
    pcie_root: str
    pcie_switch: str | None
    socket: int
    numa_node: int
    nvlink_domain: str | None = None
    mig_layout: tuple[MigPlacement, ...] = ()
    passthrough: bool = False  # bound to vfio-pci: published as a VFIO device (PassthroughSupport)
    module_id: int = 0  # NVML's GPU module id (the baseboard slot, 1-based); 0 = not reported


@dataclass(frozen=True)
class NicSlot:
    index: int
    model: NicModel
    pci_bus_id: str
    pcie_root: str
    pcie_switch: str | None
    socket: int
    numa_node: int


@dataclass(frozen=True)
class NodeProfile:
    name: str
    description: str
    mig_mode: str
    driver_version: str
    cuda_driver_version: str
    sockets: tuple[dict[str, int], ...]
    pcie_roots: tuple[dict[str, Any], ...]
    pcie_switches: tuple[dict[str, Any], ...]
    nvlink_domains: tuple[dict[str, Any], ...]
    gpus: tuple[GpuSlot, ...]
    nics: tuple[NicSlot, ...] = ()
    source: str = field(default="", compare=False)
    addressing_mode: str = ""  # NVML's addressing mode (HMM, ATS, None); "" = not supported, not published
    example: Any = None  # an example_driver.ExampleDriverSpec: the node runs dra-example-driver instead
    consumable_shares: str = "disabled"  # the driver's --consumable-shares: disabled, memory, unlimited or N
    iommufd: bool = False  # the host has /dev/iommu (VFIO devices publish iommuFDEnabled)
    compute_domains: bool = False  # NVIDIA's compute-domain kubelet plugin runs here (multi-node NVLink)
    fm_partitions: tuple[tuple[int, tuple[int, ...]], ...] = ()  # Fabric Manager: (partition id, module ids)

    def fm_partitions_of(self, module_id: int) -> dict[int, int]:
        """size -> id of the Fabric Manager partition of that size holding the GPU module (what
        NVIDIA's driver publishes as `partition<size>` under its FabricManagerPartitioning gate)."""
        return {len(mods): pid for pid, mods in self.fm_partitions if module_id in mods}

    def gpu(self, minor: int) -> GpuSlot:
        for g in self.gpus:
            if g.minor == minor:
                return g
        raise CatalogLookupError(f"NodeProfile/{self.name}: no GPU with minor {minor}")

    def nvlink_domain(self, domain_id: str) -> dict[str, Any]:
        for d in self.nvlink_domains:
            if d["id"] == domain_id:
                return d
        raise CatalogLookupError(f"NodeProfile/{self.name}: no NVLink domain {domain_id!r}")

