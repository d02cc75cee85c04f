"""Topology across nodes: NVL72 racks (one NVLink domain over 18 trays), fleets of racks, the
network rails between them, and a multi-node job's placement drawn on top.

    g = fleet_graph("nvl72-two-racks")
    nvlink_domains(g)                       # {clique id: [trays]}
    fleet_distance(g, "rack-a-tray-00/GPU0", "rack-a-tray-07/GPU3")   # 'NV18'
    draw_racks(g, placement(cluster))

Which rack a node is in comes from the `nvidia.com/gpu.clique` node label (`<clusterUUID>.<cliqueId>`,
what NVIDIA's compute-domain plugin sets): GPUs of trays with the same clique reach each other over
NVLink through the rack's NVLink switches. The network is rail-optimised: NIC <i> of every node
plugs into rail switch <i>.

Codes across nodes extend `nvidia-smi topo -m` (which only knows one node): `NV<n>` between GPUs
of one NVLink domain (n = NVLinks per GPU), `RAIL` between NICs on the same rail, `NET` for
everything else that crosses the network (other rail: through the spine). Inside a node the
ordinary codes apply (labkit.topology.distance).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import networkx as nx

from labkit.cluster.base import Cluster
from labkit.errors import InputError
from labkit.model.profiles import ClusterProfile, load_profile
from labkit.topology.graph import cluster_graph, cluster_node
from labkit.topology.picture import CLAIM_PALETTE, STATE_COLOURS
from labkit.topology.queries import TopologyError, distance, natural_key

CLIQUE_LABEL = "nvidia.com/gpu.clique"
GPU_DRIVER = "gpu.nvidia.com"
FREE_COLOUR = STATE_COLOURS["free"]
PALETTE = CLAIM_PALETTE[:8]
#: what `placement_overlay` can colour a device by (columns of cluster.placements())
OVERLAY_LABELS = ("pod", "claim")


def fleet_graph(profile: str | ClusterProfile | dict) -> nx.Graph:
    """The cluster graph of a cluster profile plus one `nvlinkDomain` node per clique (every GPU of
    its trays linked to it, the trays' own fabric nodes folded in) and one `rail` node per NIC index."""
    prof = load_profile(profile)
    g = cluster_graph([(n.name, n.node_profile) for n in prof.nodes])
    for spec in prof.nodes:
        clique = spec.labels.get(CLIQUE_LABEL, "")
        g.nodes[spec.name]["clique"] = clique
        if not clique:
            continue
        domain = f"nvlink-domain/{clique}"
        if domain not in g:
            g.add_node(domain, kind="nvlinkDomain", label=f"NVLink domain {clique}", tier=-1, clique=clique)
        fabrics = [n for n in list(g.nodes) if n.startswith(f"{spec.name}/")
                   and g.nodes[n].get("kind") == "nvswitchFabric"]
        for fabric in fabrics:
            for gpu in list(g.neighbors(fabric)):
                data = dict(g.edges[fabric, gpu])
                g.add_edge(gpu, domain, **data)
            g.remove_node(fabric)
    for n, d in list(g.nodes(data=True)):
        if d.get("kind") in ("nic", "dpu") and "/" in n:
            rail = f"rail-{d.get('index', 0)}"
            if rail not in g:
                g.add_node(rail, kind="rail", label=rail, tier=-1)
            g.add_edge(n, rail, type="rail")
    g.graph.update(name=prof.name, profile=prof.name)
    return g


def nvlink_domains(g: nx.Graph) -> dict[str, list[str]]:
    """clique id -> the nodes (trays) whose GPUs share that NVLink domain."""
    out: dict[str, list[str]] = {}
    for n, d in g.nodes(data=True):
        if d.get("kind") == "node" and d.get("clique"):
            out.setdefault(d["clique"], []).append(n)
    return {k: sorted(v, key=natural_key) for k, v in sorted(out.items())}


def _resolve(g: nx.Graph, ref: str) -> str:
    """`node/GPU0` or `node/gpu-0` (the DRA device name)."""
    if ref in g and "/" in ref:
        return ref
    node, _, dev = ref.partition("/")
    for n, d in g.nodes(data=True):
        if n.startswith(f"{node}/") and d.get("device") == dev:
            return n
    raise TopologyError(f"fleet {g.graph.get('name', '')}: no device {ref!r}; use <node>/GPU0 or <node>/gpu-0")


def fleet_distance(g: nx.Graph, a: str, b: str) -> str:
    """The code between two devices anywhere in the fleet (see the module docstring)."""
    na, nb = _resolve(g, a), _resolve(g, b)
    node_a, node_b = na.split("/", 1)[0], nb.split("/", 1)[0]
    da, db = g.nodes[na], g.nodes[nb]
    if na != nb and da.get("kind") == db.get("kind") == "gpu":
        shared = [x for x in set(g.neighbors(na)) & set(g.neighbors(nb)) if g.nodes[x].get("kind") == "nvlinkDomain"]
        if shared:
            return f"NV{min(g.edges[na, shared[0]].get('links', 1), g.edges[nb, shared[0]].get('links', 1))}"
    if node_a == node_b:
        return distance(g.subgraph([n for n in g if n.startswith(f"{node_a}/")]).copy(), na, nb)
    if da.get("kind") in ("nic", "dpu") and db.get("kind") in ("nic", "dpu") and da.get("index") == db.get("index"):
        return "RAIL"
    return "NET"


def fleet_matrix(g: nx.Graph, devices: list[str]) -> dict[str, dict[str, str]]:
    """`nvidia-smi topo -m` over the given devices of several nodes."""
    return {a: {b: fleet_distance(g, a, b) for b in devices} for a in devices}


def format_matrix(matrix: Mapping[str, Mapping[str, str]]) -> str:
    """The matrix as text, columns as wide as the longest device name."""
    names = list(matrix)
    w = max(len(n) for n in names) + 2
    lines = [" " * w + "".join(n.rjust(w) for n in names)]
    lines += [a.ljust(w) + "".join(matrix[a][b].rjust(w) for b in names) for a in names]
    return "\n".join(lines)


def placement(cluster: Any, namespace: str | None = None) -> dict[str, str]:
    """`<node>/<device>` -> who holds it (the pod a claim is reserved for, else the claim), from
    the cluster's allocated ResourceClaims: GPUs only; `draw_racks`' overlay. One node's overlay
    for `draw_node`: `placement_overlay`."""
    out: dict[str, str] = {}
    for claim in cluster.list("ResourceClaim", namespace):
        st = claim.get("status") or {}
        results = ((st.get("allocation") or {}).get("devices") or {}).get("results") or []
        users = [r.get("name", "") for r in st.get("reservedFor") or []]
        owner = users[0] if len(users) == 1 else claim["metadata"]["name"]
        for r in results:
            if r.get("driver") == GPU_DRIVER:
                out[f"{r.get('pool')}/{r.get('device')}"] = owner
    return out


def placement_overlay(cluster: Cluster, node: str, label: str = "pod") -> dict[str, str]:
    """`<device>` -> the pod (or, ``label="claim"``, the claim) that holds it, for one node of a
    running cluster: `draw_node` / `TopologyView`'s overlay, from ``cluster.placements()`` (pods
    that run; every driver's devices, NICs too). A device several pods share shows the last of them.

        g = node_graph(cluster, "dgx-a100-0")
        draw_node(g, placement_overlay(cluster, "dgx-a100-0"))
    """
    if label not in OVERLAY_LABELS:
        raise InputError(f"placement_overlay: label {label!r} is not one of {', '.join(OVERLAY_LABELS)}",
                         obj="placement_overlay", field="label", fix='label="pod" or label="claim"')
    cluster_node(cluster, node)
    return {r["device"]: r[label] for r in cluster.placements().rows if r["node"] == node}


def _job_of(owner: str) -> str:
    """`trainer-7d9f-x2k4q` and `trainer-worker-1` -> `trainer` (pods of one workload, one colour)."""
    base = re.sub(r"-worker-\d+$|-launcher.*$", "", owner)
    return re.sub(r"(-[a-z0-9]{5,10})?-[a-z0-9]{5}$", "", base) if base == owner else base


def draw_racks(g: nx.Graph, overlay: Mapping[str, str] | None = None, *, title: str | None = None,
               by_job: bool = True) -> Any:
    """One column per NVLink domain (rack), one row per tray, one box per GPU, coloured by the pod
    (or, `by_job`, the workload) that holds it. Returns the matplotlib Figure."""
    import matplotlib.pyplot as plt  # lazy: matplotlib only when drawing
    from matplotlib.patches import Rectangle  # lazy: as above

    overlay = dict(overlay or {})
    domains = nvlink_domains(g) or {"": sorted((n for n, d in g.nodes(data=True) if d.get("kind") == "node"),
                                             key=natural_key)}
    rows = max(len(v) for v in domains.values())
    gpus_per = {node: sorted((n for n in g if n.startswith(f"{node}/") and g.nodes[n].get("kind") == "gpu"),
                             key=natural_key) for nodes in domains.values() for node in nodes}
    width = max((len(v) for v in gpus_per.values()), default=1)
    fig, ax = plt.subplots(figsize=(1.2 + 2.6 * len(domains) * width / 4, 0.9 + 0.32 * rows), dpi=100)
    colours: dict[str, str] = {}
    for col, (clique, nodes) in enumerate(domains.items()):
        x0 = col * (width + 2.2)
        ax.text(x0 + width / 2, rows + 0.4, f"NVLink domain {clique[-6:] or '-'}", ha="center", fontsize=9)
        for row, node in enumerate(nodes):
            y = rows - 1 - row
            ax.text(x0 - 0.15, y + 0.4, node.rsplit("-", 1)[-1] if clique else node, ha="right", va="center",
                    fontsize=7)
            for i, gpu in enumerate(gpus_per[node]):
                dev = g.nodes[gpu].get("device", gpu.split("/", 1)[1])
                who = overlay.get(f"{node}/{dev}")
                key = (_job_of(who) if by_job else who) if who else None
                if key is not None and key not in colours:
                    colours[key] = PALETTE[len(colours) % len(PALETTE)]
                ax.add_patch(Rectangle((x0 + i, y), 0.9, 0.8, fc=colours[key] if key else FREE_COLOUR, ec="#333",
                                       lw=0.6))
    ax.set_xlim(-1.6, len(domains) * (width + 2.2) - 1.2)
    ax.set_ylim(-0.4, rows + 1)
    ax.axis("off")
    handles = [Rectangle((0, 0), 1, 1, fc=c, ec="#333") for c in colours.values()]
    handles.append(Rectangle((0, 0), 1, 1, fc=FREE_COLOUR, ec="#333"))
    fig.legend(handles, [*colours, "free"], loc="lower center", ncol=min(len(handles), 5), fontsize=8, frameon=False)
    fig.suptitle(title or f"{g.graph.get('name', 'fleet')}: GPUs by tray and NVLink domain", fontsize=11)
    fig.tight_layout(rect=(0, 0.08, 1, 1))
    return fig
