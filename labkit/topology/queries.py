"""Questions a learner asks of a topology graph, answered in `nvidia-smi topo -m` terms."""

from __future__ import annotations

import re

import networkx as nx

from fake_gpus.topology import topo_code
from labkit.errors import NotFoundError

DEVICE_KINDS = ("gpu", "nic", "dpu")


class TopologyError(NotFoundError, KeyError):
    """A device or PCIe root the topology does not have (a KeyError, as before, with exit code 3)."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


def _resolve(g: nx.Graph, ref: str) -> str:
    """Accept a graph id (``GPU0``) or a DRA device name (``gpu-0``)."""
    if ref in g:
        return ref
    for n, data in g.nodes(data=True):
        if data.get("device") == ref:
            return n
    raise TopologyError(f"topology {g.graph.get('name', '')}: no device {ref!r} (use GPU0/NIC0 or a slice device name)")


def _name(g: nx.Graph, n: str) -> str:
    return g.nodes[n].get("device") or n


def gpus(g: nx.Graph) -> list[str]:
    return sorted((n for n, d in g.nodes(data=True) if d.get("kind") == "gpu"), key=natural_key)


def natural_key(s: str) -> tuple:
    """Sort key that orders numbers by value: gpu-2 before gpu-10."""
    return tuple(int(p) if p.isdigit() else p for p in re.split(r"(\d+)", s))


def nvlink_islands(g: nx.Graph) -> list[list[str]]:
    """GPUs that reach each other over NVLink (directly or through an NVSwitch fabric), as lists of
    device names, largest island first. A GPU without NVLink is an island of its own."""
    nv = nx.Graph()
    nv.add_nodes_from(gpus(g))
    nv.add_edges_from((a, b) for a, b, d in g.edges(data=True) if d.get("type") == "nvlink")
    islands = []
    for comp in nx.connected_components(nv):
        members = [n for n in comp if g.nodes[n].get("kind") == "gpu"]
        if members:
            islands.append(sorted((_name(g, n) for n in members), key=natural_key))
    return sorted(islands, key=lambda i: (-len(i), natural_key(i[0])))


def devices_under(g: nx.Graph, pcie_root: str) -> list[str]:
    """Device names (GPUs, NICs, and MIG instances of those GPUs) below a PCIe root complex."""
    out = []
    for n, d in g.nodes(data=True):
        kind = d.get("kind")
        root = d.get("pcieRoot") if kind in DEVICE_KINDS else None
        if kind == "mig":
            root = g.nodes[d["parent"]].get("pcieRoot")
        if root == pcie_root:
            out.append(_name(g, n))
    if not out and pcie_root not in g:
        roots = sorted(n for n, d in g.nodes(data=True) if d.get("kind") == "pcieRoot")
        raise TopologyError(f"no PCIe root {pcie_root!r}; roots: {', '.join(roots)}")
    return sorted(out, key=natural_key)


def distance(g: nx.Graph, a: str, b: str) -> str:
    """The `nvidia-smi topo -m` code between two devices: X, NV<n>, PIX, PXB, PHB, NODE or SYS.

    MIG instances are answered for their parent GPU. The rule is fake_gpus.topology.topo_code,
    the one the fake driver's own matrix uses.
    """
    na, nb = (_host(g, _resolve(g, x)) for x in (a, b))
    if na == nb:
        return "X"
    nvlinks = 0
    if g.nodes[na].get("kind") == "gpu" and g.nodes[nb].get("kind") == "gpu":
        nvlinks = _nvlink_links(g, na, nb)
    return topo_code(_placement(g, na), _placement(g, nb), nvlinks)


def _placement(g: nx.Graph, n: str) -> dict[str, object]:
    d = g.nodes[n]
    chain = switch_chain(g, d["pcieSwitch"]) if d.get("pcieSwitch") else []
    return {"numaNode": d.get("numaNode"), "pcieRoot": d.get("pcieRoot"), "switchChain": chain}


def switch_chain(g: nx.Graph, switch: str) -> list[str]:
    """A PCIe switch and the switches above it, nearest first."""
    chain = [switch]
    while switch in g and g.nodes[switch].get("parent") and g.nodes[switch]["parent"] not in chain:
        switch = g.nodes[switch]["parent"]
        chain.append(switch)
    return chain


def _host(g: nx.Graph, n: str) -> str:
    return g.nodes[n]["parent"] if g.nodes[n].get("kind") == "mig" else n


def _nvlink_links(g: nx.Graph, a: str, b: str) -> int:
    if g.has_edge(a, b) and g.edges[a, b].get("type") == "nvlink":
        return int(g.edges[a, b].get("links", 1))
    for fabric in set(g.neighbors(a)) & set(g.neighbors(b)):
        ea, eb = g.edges[a, fabric], g.edges[b, fabric]
        if ea.get("type") == eb.get("type") == "nvlink":
            return int(min(ea.get("links", 1), eb.get("links", 1)))
    return 0


def topo_matrix(g: nx.Graph) -> dict[str, dict[str, str]]:
    """{device: {device: code}} over GPUs then NICs, like `nvidia-smi topo -m`."""
    devices = gpus(g) + sorted((n for n, d in g.nodes(data=True) if d.get("kind") in ("nic", "dpu")), key=natural_key)
    return {a: {b: distance(g, a, b) for b in devices} for a in devices}


def stats(g: nx.Graph) -> dict[str, object]:
    """Counts a CLI or a test can print: nodes/edges by kind, islands, roots."""
    kinds: dict[str, int] = {}
    for _, d in g.nodes(data=True):
        kinds[d.get("kind", "?")] = kinds.get(d.get("kind", "?"), 0) + 1
    edge_types: dict[str, int] = {}
    for _, _, d in g.edges(data=True):
        edge_types[d.get("type", "?")] = edge_types.get(d.get("type", "?"), 0) + 1
    return {"name": g.graph.get("name"), "nodes": g.number_of_nodes(), "edges": g.number_of_edges(),
            "kinds": dict(sorted(kinds.items())), "edgeTypes": dict(sorted(edge_types.items())),
            "nvlinkIslands": nvlink_islands(g) if "cluster" not in g else None}
