"""networkx graphs of a node's hardware: sockets, PCIe roots and switches, GPUs, MIG instances, NICs,
NVLink / NVSwitch links — and of a whole cluster.

Node ids are the labels `nvidia-smi topo -m` uses (``GPU0``, ``NIC3``) plus the fabric ids of the
node profile (``socket0``, ``pci0000:00``, ``plx1``, ``nvswitch-0``). When ResourceSlices are
given, every device node also carries the DRA view: ``device`` (the slice's device name),
``driver``, ``pool`` and its ``attributes`` / ``capacity`` as plain values; MIG devices become
nodes of their own (kind ``mig``) hanging off their parent GPU.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, overload

import networkx as nx

from fake_gpus.catalog import load_node_profile
from fake_gpus.topology import topology_structure
from labkit.api.attributes import plain_attributes
from labkit.cluster.base import Cluster
from labkit.model.profiles import NodeSpec
from labkit.topology.queries import TopologyError, natural_key

#: the tier of each node kind in the drawing, top to bottom
TIERS = {"socket": 0, "pcieRoot": 1, "pcieSwitch": 2, "gpu": 3, "nic": 3, "dpu": 3, "mig": 4, "nvswitchFabric": 5}

PCI_BUS_ID = "resource.kubernetes.io/pciBusID"


def plain_capacity(device: dict[str, Any]) -> dict[str, str]:
    return {name: str((cap or {}).get("value")) for name, cap in (device.get("capacity") or {}).items()}


def _profile(profile: Any) -> Any:
    return load_node_profile(profile) if isinstance(profile, str) else profile


def cluster_node(cluster: Cluster, node: str) -> NodeSpec:
    """The profile entry of `node` in a running cluster; a one-line error naming the nodes there if none."""
    nodes = list(getattr(cluster.profile, "nodes", None) or [])
    for spec in nodes:
        if spec.name == node:
            return spec
    name = getattr(cluster.profile, "name", cluster.profile)
    names = sorted((spec.name for spec in nodes), key=natural_key)
    raise TopologyError(f"cluster {name}: no node {node!r}; its nodes: {', '.join(names) or 'none'}",
                        obj=f"cluster {name}", fix=f"name one of its nodes, e.g. {names[0]!r}" if names else None)


@overload
def node_graph(source: Cluster, slices: str, node_name: None = None) -> nx.Graph: ...
@overload
def node_graph(source: Cluster, slices: None = None, *, node_name: str) -> nx.Graph: ...
@overload
def node_graph(source: Any, slices: Iterable[dict] | None = None, node_name: str | None = None) -> nx.Graph: ...


def node_graph(source: Any, slices: Any = None, node_name: str | None = None) -> nx.Graph:
    """The hardware graph of one node. Two forms:

    - ``node_graph(cluster, "dgx-a100-0")``: a node of a running cluster, by its name: its node
      profile comes from the cluster's profile and its DRA devices from the cluster's own
      ResourceSlices for that node (so static / dynamic MIG, taints ... are what the cluster has).
    - ``node_graph(profile, slices=None, node_name=None)``: a node of the fake_gpus node profile
      `profile` (or its name, ``"dgx-a100"``); `slices` (the node's ResourceSlices) attach DRA device
      names and attributes; without them the slices the fake driver would publish for `node_name`
      are used.
    """
    if isinstance(source, Cluster):
        node = slices if isinstance(slices, str) else node_name
        if not node:
            raise TopologyError("node_graph(cluster, node): name the node to draw", obj="node_graph",
                                fix='e.g. node_graph(cluster, "dgx-a100-0")')
        spec = cluster_node(source, node)
        own = [s for s in source.list("ResourceSlice") if (s.get("spec") or {}).get("nodeName") == node]
        return node_graph(spec.node_profile, own, node)
    profile = _profile(source)
    node_name = node_name or profile.name
    if slices is None:
        # lazy: start-up (labkit --help imports labkit.topology; fake_gpus.slices only when no slices given)
        from fake_gpus.slices import build_slices

        slices = build_slices(profile, node_name)
    structure = topology_structure(profile)
    g = nx.Graph(name=node_name, profile=profile.name)
    for item in structure["nodes"]:
        attrs = {k: v for k, v in item.items() if k != "id"}
        attrs.setdefault("label", item["id"])
        attrs["tier"] = TIERS.get(item["kind"], 5)
        g.add_node(item["id"], **attrs)
    for link in structure["links"]:
        attrs = {k: v for k, v in link.items() if k not in ("a", "b")}
        g.add_edge(link["a"], link["b"], **attrs)
    _attach_slices(g, list(slices), node_name)
    return g


def _attach_slices(g: nx.Graph, slices: list[dict], node_name: str) -> None:
    by_bus: dict[str, str] = {
        data["pciBusID"].lower(): n for n, data in g.nodes(data=True)
        if data.get("kind") in ("gpu", "nic", "dpu") and data.get("pciBusID")
    }
    for s in slices:
        spec = s.get("spec", {})
        if spec.get("nodeName") not in (None, node_name):
            continue  # another node's slice: same PCI addresses, different devices
        driver = spec.get("driver", "")
        pool = (spec.get("pool") or {}).get("name", "")
        for device in spec.get("devices") or []:
            attrs = plain_attributes(device)
            bus = str(attrs.get(PCI_BUS_ID, "")).lower()
            host = by_bus.get(bus)
            if host is None:
                continue
            info = {"device": device["name"], "driver": driver, "pool": pool, "nodeName": node_name,
                    "attributes": attrs, "capacity": plain_capacity(device),
                    "taints": device.get("taints") or [],
                    "consumesCounters": bool(device.get("consumesCounters"))}
            if attrs.get("type") == "mig":
                mig_id = device["name"]
                g.add_node(mig_id, kind="mig", label=str(attrs.get("profile", mig_id)), tier=TIERS["mig"],
                           parent=host, profile=attrs.get("profile"), **info)
                g.add_edge(host, mig_id, type="mig")
            else:
                g.nodes[host].update(info)


def cluster_graph(nodes: Iterable[tuple[str, Any]] | Any, slices: Iterable[dict] | None = None) -> nx.Graph:
    """One graph for a cluster: a ``cluster`` node, one ``node`` per Kubernetes node, and each node's
    hardware graph with ids prefixed ``<node>/``.

    `nodes` is a list of ``(node name, node profile)`` pairs, or a labkit cluster profile.
    """
    if hasattr(nodes, "nodes") and not isinstance(nodes, list):
        pairs = [(n.name, n.node_profile) for n in nodes.nodes]
    else:
        pairs = list(nodes)
    by_node: dict[str, list[dict]] = {}
    for s in slices or []:
        by_node.setdefault(s.get("spec", {}).get("nodeName", ""), []).append(s)
    g = nx.Graph(name="cluster")
    g.add_node("cluster", kind="cluster", label="cluster", tier=-2)
    for name, profile in pairs:
        sub = node_graph(profile, by_node.get(name) if slices is not None else None, node_name=name)
        g.add_node(name, kind="node", label=name, tier=-1, profile=sub.graph["profile"])
        g.add_edge("cluster", name, type="network")
        mapping = {n: f"{name}/{n}" for n in sub.nodes}
        g.update(nx.relabel_nodes(sub, mapping))
        for n, data in sub.nodes(data=True):
            if data.get("kind") == "socket":
                g.add_edge(name, mapping[n], type="host")
            if data.get("kind") == "mig":
                g.nodes[mapping[n]]["parent"] = mapping[data["parent"]]
    return g
