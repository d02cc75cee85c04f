"""The fleet as the experiments see it: per node, its physical GPUs and the devices each publishes.

Built from the same fake_gpus ResourceSlices the sim publishes (one build per node profile and
MIG mode, reused for every node of that kind), so device names match the allocator's results.
`fleet_variant` gives the same hardware with another MIG mode (a policy's partitioning choice).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from functools import lru_cache
from pathlib import Path
from typing import Any

from labkit.api.attributes import plain_value
from labkit.api.quantity import parse_quantity
from labkit.model.profiles import ClusterProfile, load_profile

GPU_DRIVER = "gpu.nvidia.com"
NVLINK_ATTR = "topology.fake-gpus.dev/nvlinkDomain"
GIB = 1024**3
_MIG_G = re.compile(r"^(\d+)g\.")


@dataclass(frozen=True)
class DeviceInfo:
    """One published device: a whole GPU or a MIG device (static or dynamic)."""

    name: str
    gpu: str  # parent physical GPU's device name, e.g. gpu-0
    mem_gib: float
    compute: float  # fraction of the parent GPU (MIG: g/7)
    profile: str = ""  # MIG profile, "" for a whole GPU


@dataclass(frozen=True)
class GpuInfo:
    name: str  # gpu-<minor>
    mem_gib: float
    nvlink: str  # NVLink domain ("" when none)
    whole: bool  # published as a whole GPU in this MIG mode
    static_mig: tuple[DeviceInfo, ...] = ()  # fixed MIG devices (static mode)
    dynamic_mig: bool = False  # partitionable (dynamic MIG) profiles published


@dataclass(frozen=True)
class NodeKind:
    """What every node of one (node profile, MIG mode) publishes."""

    gpus: tuple[GpuInfo, ...]
    devices: dict[str, DeviceInfo] = field(hash=False, compare=False)
    mig_profiles: tuple[tuple[str, float, int], ...] = ()  # (profile, GiB, g) published, smallest first


@dataclass
class Fleet:
    profile: ClusterProfile
    nodes: list[str]
    kind_of: dict[str, NodeKind]

    @property
    def gpu_count(self) -> int:
        return sum(len(self.kind_of[n].gpus) for n in self.nodes)

    @property
    def gpu_mem_gib(self) -> float:
        return sum(g.mem_gib for n in self.nodes for g in self.kind_of[n].gpus)

    def common_gpu_mem_gib(self) -> float:
        """The most common GPU memory size (the Alibaba loader's reference GPU)."""
        counts: dict[float, int] = {}
        for n in self.nodes:
            for g in self.kind_of[n].gpus:
                counts[g.mem_gib] = counts.get(g.mem_gib, 0) + 1
        return max(sorted(counts), key=lambda m: counts[m]) if counts else 80.0

    def min_gpu_mem_gib(self) -> float:
        return min((g.mem_gib for n in self.nodes for g in self.kind_of[n].gpus), default=0.0)

    def mig_profiles(self) -> list[tuple[str, float, int]]:
        seen: dict[str, tuple[str, float, int]] = {}
        for n in self.nodes:
            for p in self.kind_of[n].mig_profiles:
                seen.setdefault(p[0], p)
        return sorted(seen.values(), key=lambda p: (p[1], p[2], p[0]))


def _gib(q: str) -> float:
    return float(parse_quantity(str(q)).value) / GIB


@lru_cache(maxsize=64)
def node_kind(node_profile: str, mig_mode: str | None, kubernetes_version: str = "1.37",
              topology_attributes: bool = False) -> NodeKind:
    # lazy: start-up (labkit --help imports this module; fake_gpus.slices is needed only to build a fleet)
    from fake_gpus.slices import build_slices

    kw: dict[str, Any] = {"kubernetes_version": kubernetes_version, "topology_attributes": topology_attributes}
    if mig_mode:
        kw["mig_mode"] = mig_mode
    slices = build_slices(node_profile, "kind-probe", **kw)
    devs = [d for s in slices if s["spec"].get("driver") == GPU_DRIVER for d in s["spec"].get("devices") or []]
    devices: dict[str, DeviceInfo] = {}
    gpus: dict[str, dict[str, Any]] = {}
    profiles: dict[str, tuple[str, float, int]] = {}
    for d in devs:
        attrs = d.get("attributes") or {}
        typ = plain_value(attrs.get("type"))
        mem = _gib(((d.get("capacity") or {}).get("memory") or {}).get("value", "0"))
        nv = plain_value(attrs.get(NVLINK_ATTR)) or ""
        if typ == "gpu":
            devices[d["name"]] = DeviceInfo(d["name"], d["name"], mem, 1.0)
            g = gpus.setdefault(d["name"], {"mem": mem, "nvlink": nv, "whole": True, "static": [], "dyn": False})
            g.update(mem=mem, whole=True)
        elif typ == "mig":
            parent = d["name"].split("-mig-", 1)[0]
            prof = plain_value(attrs.get("profile")) or ""
            m = _MIG_G.match(prof)
            gslices = int(m.group(1)) if m else 1
            info = DeviceInfo(d["name"], parent, mem, gslices / 7, prof)
            devices[d["name"]] = info
            g = gpus.setdefault(parent, {"mem": 0.0, "nvlink": nv, "whole": False, "static": [], "dyn": False})
            if d.get("consumesCounters"):
                g["dyn"] = True
                if gslices == 7 and not g["whole"]:
                    g["mem"] = max(g["mem"], mem)
            else:
                g["static"].append(info)
                g["mem"] = g["mem"] + mem if not g["whole"] else g["mem"]
            profiles.setdefault(prof, (prof, mem, gslices))
    out = []
    for name in sorted(gpus, key=lambda n: int(n.split("-")[1])):
        g = gpus[name]
        out.append(GpuInfo(name, g["mem"], g["nvlink"], g["whole"], tuple(g["static"]), g["dyn"]))
    return NodeKind(tuple(out), devices, tuple(sorted(profiles.values(), key=lambda p: (p[1], p[2], p[0]))))


def fleet_variant(profile: str | Path | dict | ClusterProfile, mig_mode: str | None = None) -> ClusterProfile:
    """The profile with every node's MIG mode set to `mig_mode` ("none" | "static" | "dynamic"),
    or unchanged for None. Static MIG only changes nodes whose hardware profile has a layout."""
    prof = load_profile(profile)
    if mig_mode is None:
        return prof
    gates = dict(prof.feature_gates)
    if mig_mode == "dynamic":
        gates.setdefault("DRAPartitionableDevices", True)
    return replace(prof, nodes=[replace(n, mig_mode=mig_mode) for n in prof.nodes], feature_gates=gates)


def build_fleet(profile: ClusterProfile) -> Fleet:
    kinds: dict[str, NodeKind] = {}
    for n in profile.nodes:
        kinds[n.name] = node_kind(n.node_profile, n.mig_mode, profile.kubernetes_version, profile.topology_attributes)
    return Fleet(profile, [n.name for n in sorted(profile.nodes, key=lambda s: s.name)], kinds)


#: (name prefix, fake_gpus node profile, nodes): a stand-in for the 1,213 GPU nodes (6,212 GPUs)
#: of cluster-trace-gpu-v2023's openb cluster, built from LabKit's catalog (it has no V100, P100,
#: A10 or G1-G3): 8-GPU nodes 410 (3,280 GPUs), 4-GPU nodes 663 (2,652), 2-GPU nodes 140 (280).
#: 80 GB GPUs are the most common size (4,006), so Alibaba rows map to 80 GiB per whole GPU.
ALIBABA_NODES = (("a100x8-", "dgx-a100", 410), ("a100x4-", "mig-a100", 300),
                 ("a100t4-", "mixed-a100-t4", 363), ("l4x2-", "l4-edge", 140))


def alibaba_fleet(scale: float = 1.0) -> dict:
    """A cluster profile (dict) with the openb cluster's size and GPU-count mix, each node group
    scaled by `scale` (at least one node per group): 1.0 = 1,213 nodes / 6,212 GPUs."""
    if not (isinstance(scale, int | float) and 0 < scale <= 10):
        raise ValueError(f"alibaba-shape fleet scale {scale!r}: give a number in (0, 10], e.g. 0.1")
    nodes = [{"namePrefix": prefix, "count": max(1, round(count * scale)), "nodeProfile": profile}
             for prefix, profile, count in ALIBABA_NODES]
    label = "alibaba-shape" if scale == 1 else f"alibaba-shape-{scale:g}"
    return {"name": label, "kubernetesVersion": "1.37", "topologyAttributes": True,
            "description": f"openb-shaped fleet x{scale:g}: {sum(n['count'] for n in nodes)} nodes", "nodes": nodes}
