"""Topology of a node profile as plain data, and an `nvidia-smi topo -m`-like matrix.

Connection legend (the one nvidia-smi prints):
  X    self
  SYS  PCIe plus the SMP interconnect between NUMA nodes (QPI/UPI/Infinity Fabric)
  NODE PCIe plus the interconnect between PCIe host bridges within one NUMA node
  PHB  PCIe plus a PCIe host bridge (typically the CPU)
  PXB  multiple PCIe bridges, without crossing a host bridge
  PIX  at most a single PCIe bridge
  NV#  a bonded set of # NVLinks
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fake_gpus.catalog.models import GpuSlot, NicSlot, NodeProfile

# rough per-direction-pair bandwidths (GB/s, bidirectional) for the plain-data links
_PCIE_GBPS = {3: 32, 4: 64, 5: 128}
_SMP_GBPS = 128

Endpoint = GpuSlot | NicSlot


def device_label(d: Endpoint) -> str:
    """Row/column label: `GPU<minor>` or `NIC<index>` (nvidia-smi uses NIC0.. for NICs too)."""
    return f"GPU{d.minor}" if isinstance(d, GpuSlot) else f"NIC{d.index}"


def topo_code(a: Mapping[str, Any], b: Mapping[str, Any], nvlinks: int = 0) -> str:
    """The nvidia-smi topo code between two different devices, from plain placement data.

    ``a``/``b``: ``numaNode``, ``pcieRoot`` and ``switchChain`` (the device's PCIe switch and the
    switches above it, nearest first; empty when the device hangs off the root complex).
    ``nvlinks``: NVLinks between two GPUs (0: none). The one rule behind this module's matrix and
    labkit.topology's ``distance``.
    """
    if nvlinks:
        return f"NV{nvlinks}"
    if a.get("numaNode") != b.get("numaNode"):
        return "SYS"
    if a.get("pcieRoot") != b.get("pcieRoot"):
        return "NODE"
    chain_a, chain_b = list(a.get("switchChain") or ()), list(b.get("switchChain") or ())
    if chain_a and chain_b and chain_a[0] == chain_b[0]:
        return "PIX"
    if set(chain_a) & set(chain_b):
        return "PXB"  # through several PCIe switches, without the host bridge
    return "PHB"


def _placement(profile: NodeProfile, d: Endpoint) -> dict[str, Any]:
    chain = switch_chain(profile, d.pcie_switch) if d.pcie_switch is not None else []
    return {"numaNode": d.numa_node, "pcieRoot": d.pcie_root, "switchChain": chain}


def connection(profile: NodeProfile, a: Endpoint, b: Endpoint) -> str:
    """The nvidia-smi topo code between two devices of one node."""
    if a is b:
        return "X"
    nvlinks = 0
    if (
        isinstance(a, GpuSlot) and isinstance(b, GpuSlot)
        and a.nvlink_domain is not None and a.nvlink_domain == b.nvlink_domain
    ):
        nvlinks = profile.nvlink_domain(a.nvlink_domain)["linksPerGpu"]
    return topo_code(_placement(profile, a), _placement(profile, b), nvlinks)


def switch_chain(profile: NodeProfile, switch: str) -> list[str]:
    """The switch and its upstream switches, nearest first."""
    parents = {w["id"]: w.get("parent") for w in profile.pcie_switches}
    chain = [switch]
    while parents.get(chain[-1]):
        chain.append(parents[chain[-1]])
    return chain


def _devices(profile: NodeProfile) -> list[Endpoint]:
    return [*sorted(profile.gpus, key=lambda g: g.minor), *sorted(profile.nics, key=lambda n: n.index)]


def topology_matrix(profile: NodeProfile) -> dict[str, dict[str, str]]:
    """{row label: {column label: code}} over all GPUs then all NICs."""
    devs = _devices(profile)
    return {device_label(a): {device_label(b): connection(profile, a, b) for b in devs} for a in devs}


def format_topology_matrix(profile: NodeProfile) -> str:
    """Text table in the style of `nvidia-smi topo -m` (with CPU/NUMA affinity columns)."""
    devs = _devices(profile)
    labels = [device_label(d) for d in devs]
    m = topology_matrix(profile)
    width = max([5, *(len(x) for x in labels)]) + 1
    header = " " * width + "".join(lbl.ljust(width) for lbl in labels) + "NUMA Affinity"
    lines = [header.rstrip()]
    for d, lbl in zip(devs, labels):
        cells = "".join(m[lbl][c].ljust(width) for c in labels)
        lines.append((lbl.ljust(width) + cells + str(d.numa_node)).rstrip())
    lines.append("")
    lines.append("Legend:")
    lines += [
        "  X    = Self",
        "  SYS  = Connection traversing PCIe as well as the SMP interconnect between NUMA nodes",
        "  NODE = Connection traversing PCIe as well as the interconnect between PCIe Host Bridges within a NUMA node",
        "  PHB  = Connection traversing PCIe as well as a PCIe Host Bridge (typically the CPU)",
        "  PXB  = Connection traversing multiple PCIe bridges (without traversing the PCIe Host Bridge)",
        "  PIX  = Connection traversing at most a single PCIe bridge",
        "  NV#  = Connection traversing a bonded set of # NVLinks",
    ]
    nic_names = [f"  {device_label(n)}: {n.model.name} ({n.pci_bus_id})" for n in sorted(profile.nics, key=lambda n: n.index)]
    if nic_names:
        lines += ["", "NIC Legend:", *nic_names]
    return "\n".join(lines) + "\n"


def topology_structure(profile: NodeProfile) -> dict[str, Any]:
    """Plain data for graph builders: nodes (sockets, roots, switches, NVSwitch fabrics, devices)
    and links with type and bandwidth (GB/s)."""
    nodes: list[dict[str, Any]] = []
    links: list[dict[str, Any]] = []
    for s in profile.sockets:
        nodes.append({"id": f"socket{s['id']}", "kind": "socket", "numaNode": s["numaNode"]})
    socket_ids = [s["id"] for s in profile.sockets]
    for i, a in enumerate(socket_ids):
        for b in socket_ids[i + 1:]:
            links.append({"a": f"socket{a}", "b": f"socket{b}", "type": "smp", "bandwidthGBps": _SMP_GBPS})
    for r in profile.pcie_roots:
        nodes.append({"id": r["id"], "kind": "pcieRoot", "socket": r["socket"]})
        links.append({"a": f"socket{r['socket']}", "b": r["id"], "type": "pcie", "bandwidthGBps": _PCIE_GBPS[5]})
    for w in profile.pcie_switches:
        nodes.append({"id": w["id"], "kind": "pcieSwitch", "root": w["root"], "parent": w.get("parent")})
        upstream = w.get("parent") or w["root"]
        links.append({"a": upstream, "b": w["id"], "type": "pcie", "bandwidthGBps": _PCIE_GBPS[5]})
    for d in profile.nvlink_domains:
        if d["fabric"] == "nvswitch":
            nodes.append({"id": d["id"], "kind": "nvswitchFabric", **{k: v for k, v in d.items() if k != "id"}})
    for dev in _devices(profile):
        label = device_label(dev)
        upstream = dev.pcie_switch or dev.pcie_root
        gen = dev.model.pcie_generation
        entry: dict[str, Any] = {
            "id": label, "kind": "gpu" if isinstance(dev, GpuSlot) else dev.model.type,
            "model": dev.model.name, "pciBusID": dev.pci_bus_id, "pcieRoot": dev.pcie_root,
            "pcieSwitch": dev.pcie_switch, "numaNode": dev.numa_node, "socket": dev.socket,
        }
        if isinstance(dev, GpuSlot):
            entry["minor"] = dev.minor
            entry["nvlinkDomain"] = dev.nvlink_domain
        else:
            entry["index"] = dev.index
        nodes.append(entry)
        links.append({"a": upstream, "b": label, "type": "pcie", "bandwidthGBps": _PCIE_GBPS.get(gen, 64),
                      "pcieGeneration": gen})
    for d in profile.nvlink_domains:
        members = sorted((g for g in profile.gpus if g.nvlink_domain == d["id"]), key=lambda g: g.minor)
        if d["fabric"] == "nvswitch":
            for g in members:
                links.append({"a": device_label(g), "b": d["id"], "type": "nvlink", "links": d["linksPerGpu"],
                              "generation": d["generation"], "bandwidthGBps": d["bandwidthGBps"]})
        else:
            for i, g in enumerate(members):
                for h in members[i + 1:]:
                    links.append({"a": device_label(g), "b": device_label(h), "type": "nvlink",
                                  "links": d["linksPerGpu"], "generation": d["generation"],
                                  "bandwidthGBps": d["bandwidthGBps"]})
    return {"name": profile.name, "nodes": nodes, "links": links, "matrix": topology_matrix(profile)}
