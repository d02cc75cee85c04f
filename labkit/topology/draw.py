"""A static picture of one node's topology: sockets -> PCIe roots -> switches -> GPUs / NICs,
NVLink drawn apart from PCIe, MIG instances inside their GPU at their memory-slice placement, and
an optional overlay colouring devices by claim / free / in use / tainted.

Positions are computed here (deterministic, no crossings inside a tier); matplotlib only draws.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import networkx as nx

from labkit.topology.queries import _natural

COLOURS = {
    "socket": "#dfe7fd", "pcieRoot": "#e8f0e3", "pcieSwitch": "#f3f3f3", "gpu": "#ffffff",
    "nic": "#fff4e0", "dpu": "#fde2c8", "nvswitchFabric": "#d9f0e3",
}
STATE_COLOURS = {"free": "#e6f4ea", "in use": "#f6c3c0", "tainted": "#ffd966", "unavailable": "#cccccc"}
CLAIM_PALETTE = ["#4e79a7", "#f28e2b", "#59a14f", "#b07aa1", "#e15759", "#76b7b2", "#edc948", "#9c755f",
                 "#ff9da7", "#bab0ac"]
NVLINK_COLOUR = "#2e7d32"
PCIE_COLOUR = "#8a8a8a"
Y = {"socket": 4.0, "pcieRoot": 3.0, "pcieSwitch": 2.0, "gpu": 1.0, "nic": 1.0, "dpu": 1.0, "nvswitchFabric": -0.35}


def _leaf_key(g: nx.Graph, n: str) -> tuple:
    d = g.nodes[n]
    return (d.get("socket", 0), _natural(str(d.get("pcieRoot", ""))), _natural(str(d.get("pcieSwitch") or "")),
            0 if d["kind"] == "gpu" else 1, _natural(n))


def layout(g: nx.Graph) -> dict[str, tuple[float, float]]:
    """Deterministic tiered positions for the hardware nodes of one node graph."""
    leaves = sorted((n for n, d in g.nodes(data=True) if d.get("kind") in ("gpu", "nic", "dpu")),
                    key=lambda n: _leaf_key(g, n))
    pos: dict[str, tuple[float, float]] = {n: (float(i), Y["gpu"]) for i, n in enumerate(leaves)}

    def centre(children: list[str]) -> float:
        xs = [pos[c][0] for c in children if c in pos]
        return sum(xs) / len(xs) if xs else 0.0

    from labkit.topology.queries import switch_chain

    switches = [n for n, d in g.nodes(data=True) if d.get("kind") == "pcieSwitch"]
    depth = {s: len(switch_chain(g, s)) - 1 for s in switches}
    levels = max(depth.values(), default=0) + 1
    # deepest switches first, so a parent switch centres over its child switches
    for s in sorted(switches, key=lambda s: -depth[s]):
        kids = [n for n in leaves if g.nodes[n].get("pcieSwitch") == s]
        kids += [c for c in switches if g.nodes[c].get("parent") == s]
        y = Y["pcieSwitch"] + 0.3 - 0.6 * depth[s] / max(levels - 1, 1) if levels > 1 else Y["pcieSwitch"]
        pos[s] = (centre(kids), y)
    roots = [n for n, d in g.nodes(data=True) if d.get("kind") == "pcieRoot"]
    for r in roots:
        kids = [s for s in switches if g.nodes[s].get("root") == r and not g.nodes[s].get("parent")]
        kids += [n for n in leaves if g.nodes[n].get("pcieRoot") == r and not g.nodes[n].get("pcieSwitch")]
        pos[r] = (centre(kids), Y["pcieRoot"])
    for n, d in g.nodes(data=True):
        if d.get("kind") == "socket":
            sid = int(str(n).removeprefix("socket") or 0)
            pos[n] = (centre([r for r in roots if g.nodes[r].get("socket") == sid]), Y["socket"])
        elif d.get("kind") == "nvswitchFabric":
            members = [m for m in g.neighbors(n) if g.nodes[m].get("kind") == "gpu"]
            pos[n] = (centre(members), Y["nvswitchFabric"])
    return pos


def _overlay_colour(state: str, claim_colours: dict[str, str]) -> str:
    if state in STATE_COLOURS:
        return STATE_COLOURS[state]
    if state not in claim_colours:
        claim_colours[state] = CLAIM_PALETTE[len(claim_colours) % len(CLAIM_PALETTE)]
    return claim_colours[state]


def _mig_geometry(g: nx.Graph, mig: str) -> tuple[int, int, int]:
    """(placement start, memory slices, slices on the GPU) for a MIG node."""
    d = g.nodes[mig]
    start = int(str(d.get("device", mig)).rsplit("-", 1)[-1])
    parent = g.nodes[d["parent"]]
    try:
        from fake_gpus.catalog import gpu_model

        model = gpu_model(parent.get("model"))
        prof = model.mig_profile(str(d.get("profile")))
        return start, prof.memory_slices, model.mig_memory_slices or 8
    except (KeyError, ValueError, TypeError):
        return start, 1, 8


def draw_node(
    g: nx.Graph,
    overlay: Mapping[str, str] | None = None,
    *,
    ax: Any = None,
    title: str | None = None,
    show_mig: str = "auto",
) -> Any:
    """Draw one node graph; returns the matplotlib Figure.

    `overlay` maps device names (``gpu-0``, ``gpu-0-mig-3g40gb-9-0``, ``nic-1``) to a state:
    ``free``, ``in use``, ``tainted``, ``unavailable`` or a claim name (each claim gets a colour).
    MIG instances are drawn when they exist as devices (static MIG) or appear in the overlay
    (dynamic MIG allocations); ``show_mig="all"`` draws every published MIG placement.
    """
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt
    from matplotlib.patches import FancyBboxPatch, Rectangle

    overlay = dict(overlay or {})
    pos = layout(g)
    n_leaves = sum(1 for _, d in g.nodes(data=True) if d.get("kind") in ("gpu", "nic", "dpu"))
    if ax is None:
        fig, ax = plt.subplots(figsize=(max(7.0, 1.25 * n_leaves + 1.5), 5.2), dpi=100)
    else:
        fig = ax.figure
    claim_colours: dict[str, str] = {}

    # PCIe / SMP tree
    for a, b, d in g.edges(data=True):
        if d.get("type") in ("pcie", "smp") and a in pos and b in pos:
            (x1, y1), (x2, y2) = pos[a], pos[b]
            if d.get("type") == "smp":
                ax.plot([x1, x2], [y1 + 0.12, y2 + 0.12], color="#4f6bd8", lw=2.2, ls="--", zorder=1)
                ax.text((x1 + x2) / 2, y1 + 0.3, "SMP / UPI", ha="center", fontsize=7, color="#4f6bd8")
            else:
                ax.plot([x1, x2], [y1, y2], color=PCIE_COLOUR, lw=1.2, zorder=1)
    # NVLink: to a fabric bar, or direct arcs
    for a, b, d in g.edges(data=True):
        if d.get("type") != "nvlink" or a not in pos or b not in pos:
            continue
        (x1, y1), (x2, y2) = pos[a], pos[b]
        kinds = {g.nodes[a].get("kind"), g.nodes[b].get("kind")}
        if "nvswitchFabric" in kinds:
            gx = x1 if g.nodes[a].get("kind") == "gpu" else x2
            ax.plot([gx, gx], [Y["gpu"] - 0.32, Y["nvswitchFabric"] + 0.12], color=NVLINK_COLOUR, lw=2.4, zorder=1)
        else:
            rad = 0.35 if abs(x2 - x1) > 1 else 0.2
            ax.annotate("", xy=(x2, y2 - 0.3), xytext=(x1, y1 - 0.3), zorder=1,
                        arrowprops=dict(arrowstyle="-", color=NVLINK_COLOUR, lw=1.8,
                                        connectionstyle=f"arc3,rad={rad}"))
    # boxes
    for n, d in g.nodes(data=True):
        kind = d.get("kind")
        if n not in pos or kind == "mig":
            continue
        x, y = pos[n]
        if kind == "nvswitchFabric":
            members = [pos[m][0] for m in g.neighbors(n) if g.nodes[m].get("kind") == "gpu"]
            lo, hi = min(members) - 0.45, max(members) + 0.45
            ax.add_patch(FancyBboxPatch((lo, y - 0.12), hi - lo, 0.24, boxstyle="round,pad=0.02",
                                        fc=COLOURS[kind], ec=NVLINK_COLOUR, lw=1.5, zorder=2))
            label = f"NVSwitch fabric · NVLink{d.get('generation', '')} · {d.get('linksPerGpu', '?')} links/GPU"
            ax.text((lo + hi) / 2, y, label, ha="center", va="center", fontsize=8, color="#1b5e20", zorder=3)
            continue
        w, h = (0.9, 0.64) if kind in ("gpu", "nic", "dpu") else (0.8, 0.34)
        device = d.get("device")
        fc = COLOURS.get(kind, "#ffffff")
        if device and device in overlay:
            fc = _overlay_colour(overlay[device], claim_colours)
        elif d.get("taints"):
            fc = STATE_COLOURS["tainted"]
        ax.add_patch(FancyBboxPatch((x - w / 2, y - h / 2), w, h, boxstyle="round,pad=0.02",
                                    fc=fc, ec="#333333", lw=1.0, zorder=2))
        if kind == "gpu":
            model = str(d.get("model", "")).replace("-SXM4", "").replace("-SXM5", "")
            ax.text(x, y + 0.17, device or n, ha="center", va="center", fontsize=8, weight="bold", zorder=3)
            ax.text(x, y + 0.02, model, ha="center", va="center", fontsize=6.5, zorder=3)
        elif kind in ("nic", "dpu"):
            ax.text(x, y + 0.1, device or n, ha="center", va="center", fontsize=8, weight="bold", zorder=3)
            ax.text(x, y - 0.08, str(d.get("model", "NIC")), ha="center", va="center", fontsize=6.5, zorder=3)
        else:
            text = {"socket": f"CPU {n.removeprefix('socket')} · NUMA {d.get('numaNode')}"}.get(kind, str(n))
            ax.text(x, y, text, ha="center", va="center", fontsize=7.5, zorder=3)
    # MIG instances inside their GPU, one column per memory slice
    for n, d in g.nodes(data=True):
        if d.get("kind") != "mig":
            continue
        device = d.get("device", n)
        static = not d.get("consumesCounters")
        if not (show_mig == "all" or device in overlay or (show_mig == "auto" and static)):
            continue
        start, slices, total = _mig_geometry(g, n)
        px, py = pos[d["parent"]]
        left, width = px - 0.42, 0.84 / total
        fc = _overlay_colour(overlay[device], claim_colours) if device in overlay else "#c6dbef"
        ax.add_patch(Rectangle((left + start * width, py - 0.29), slices * width, 0.2,
                               fc=fc, ec="#08306b", lw=0.8, zorder=3))
        ax.text(left + (start + slices / 2) * width, py - 0.19, str(d.get("profile", "")).split(".")[0],
                ha="center", va="center", fontsize=5.5, zorder=4)

    xs = [p[0] for p in pos.values()] or [0.0]
    ax.set_xlim(min(xs) - 0.8, max(xs) + 0.8)
    ax.set_ylim(-0.8, 4.7)
    ax.axis("off")
    handles = [Rectangle((0, 0), 1, 1, fc=c, ec="#333") for c in claim_colours.values()]
    labels = list(claim_colours)
    used_states = sorted({s for s in overlay.values() if s in STATE_COLOURS})
    handles += [Rectangle((0, 0), 1, 1, fc=STATE_COLOURS[s], ec="#333") for s in used_states]
    labels += used_states
    from matplotlib.lines import Line2D

    handles += [Line2D([0], [0], color=NVLINK_COLOUR, lw=2.4), Line2D([0], [0], color=PCIE_COLOUR, lw=1.2)]
    labels += ["NVLink", "PCIe"]
    ax.legend(handles, labels, loc="upper right", fontsize=7, frameon=False, ncol=1)
    ax.set_title(title or f"{g.graph.get('name')} ({g.graph.get('profile')})", fontsize=11)
    fig.tight_layout()
    return fig


def save_png(g: nx.Graph, path: str, overlay: Mapping[str, str] | None = None, **kwargs: Any) -> str:
    import matplotlib.pyplot as plt

    fig = draw_node(g, overlay, **kwargs)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
