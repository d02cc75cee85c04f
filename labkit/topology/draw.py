"""A static picture of one node's topology: sockets -> PCIe roots -> switches -> GPUs / NICs,
NVLink drawn apart from PCIe, MIG instances inside their GPU at their memory-slice placement, and
an optional overlay colouring devices by claim / free / in use / tainted.

Positions, rows and colours come from labkit.topology.picture (shared with the interactive
TopologyView: deterministic, no crossings inside a tier); matplotlib only draws.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import networkx as nx

from labkit.fileio import save_figure
from labkit.topology.picture import (
    COLOURS,
    STATE_COLOURS,
    Y,
    layout,
    mig_geometry,
    overlay_colour,
    picture_rows,
)

NVLINK_COLOUR = "#2e7d32"
PCIE_COLOUR = "#8a8a8a"
INCH_PER_LEAF = 1.05


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

    A wide node (more than picture.SPLIT_ABOVE GPUs + NICs on two sockets) is drawn one socket per row, so
    that the picture stays about 1,000 px wide. In a notebook the figure shows inline (the kernel's
    backend is left alone); headless it saves with whatever backend matplotlib picked (Agg).
    """
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D
    from matplotlib.patches import Rectangle

    overlay = dict(overlay or {})
    pos = layout(g)
    rows = picture_rows(g, pos) if ax is None else [("", *_span(pos))]
    widest = max(hi - lo + 1 for _, lo, hi in rows)
    if ax is None:
        fig, axes = plt.subplots(len(rows), 1, figsize=(max(6.5, INCH_PER_LEAF * widest + 0.8), 4.3 * len(rows) + 0.5),
                                 dpi=100, squeeze=False)
        axes = [a[0] for a in axes]
    else:
        fig, axes = ax.figure, [ax]
    claim_colours: dict[str, str] = {}
    for a, (label, lo, hi) in zip(axes, rows):
        _draw_on(a, g, pos, overlay, claim_colours, show_mig, lo - 0.55, hi + 0.55)
        if label:
            a.set_title(label, fontsize=10, loc="left", color="#555")

    handles: list[Any] = [Rectangle((0, 0), 1, 1, fc=c, ec="#333") for c in claim_colours.values()]
    labels = list(claim_colours)
    used_states = sorted({s for s in overlay.values() if s in STATE_COLOURS})
    handles += [Rectangle((0, 0), 1, 1, fc=STATE_COLOURS[s], ec="#333") for s in used_states]
    labels += used_states
    handles += [Line2D([0], [0], color=NVLINK_COLOUR, lw=2.4), Line2D([0], [0], color=PCIE_COLOUR, lw=1.2)]
    labels += ["NVLink", "PCIe"]
    if any(d.get("type") == "smp" for _, _, d in g.edges(data=True)):
        handles.append(Line2D([0], [0], color=SMP_COLOUR, lw=2.2, ls="--"))
        labels.append("CPU-CPU link (SMP / UPI)")
    # one legend for the figure, under the picture, so that it never hides a box
    ncol = min(len(labels), 5)
    fig.suptitle(title or f"{g.graph.get('name')} ({g.graph.get('profile')})", fontsize=13)
    fig.legend(handles, labels, loc="lower center", fontsize=9, frameon=False, ncol=ncol)
    legend_rows = -(-len(labels) // ncol)
    fig.tight_layout(rect=(0, (0.3 + 0.22 * legend_rows) / fig.get_figheight(), 1, 1))
    return fig


def _span(pos: dict[str, tuple[float, float]]) -> tuple[float, float]:
    xs = [p[0] for p in pos.values()] or [0.0]
    return min(xs), max(xs)


SMP_COLOUR = "#4f6bd8"


def _model_label(model: str) -> str:
    """A GPU / NIC model on at most two short lines (A100-SXM4-80GB -> A100 80GB)."""
    short = model.replace("-SXM4", "").replace("-SXM5", "").replace("NVIDIA ", "")
    if len(short) <= 12:
        return short
    head, _, tail = short.partition("-")
    return f"{head}\n{tail}" if tail else short


def _draw_on(ax: Any, g: nx.Graph, pos: dict[str, tuple[float, float]], overlay: dict[str, str],
             claim_colours: dict[str, str], show_mig: str, x_lo: float, x_hi: float) -> None:
    """Draw the whole node on `ax` and show the part between x_lo and x_hi (a row of the picture)."""
    from matplotlib.patches import FancyBboxPatch, Rectangle

    def visible(x: float) -> bool:
        return x_lo <= x <= x_hi

    # PCIe / SMP tree
    for a, b, d in g.edges(data=True):
        if d.get("type") in ("pcie", "smp") and a in pos and b in pos:
            (x1, y1), (x2, y2) = pos[a], pos[b]
            if d.get("type") == "smp":
                ax.plot([x1, x2], [y1 + 0.12, y2 + 0.12], color=SMP_COLOUR, lw=2.2, ls="--", zorder=1)
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
            ax.annotate("", xy=(x2, y2 - 0.3), xytext=(x1, y1 - 0.3), zorder=1, annotation_clip=True,
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
            ax.add_patch(FancyBboxPatch((lo, y - 0.14), hi - lo, 0.28, boxstyle="round,pad=0.02",
                                        fc=COLOURS[kind], ec=NVLINK_COLOUR, lw=1.5, zorder=2))
            shown_lo, shown_hi = max(lo, x_lo), min(hi, x_hi)
            if shown_hi > shown_lo:
                gpus = len(members)
                label = (f"NVSwitch fabric · all {gpus} GPUs · NVLink{d.get('generation', '')} · "
                         f"{d.get('linksPerGpu', '?')} links/GPU")
                ax.text((shown_lo + shown_hi) / 2, y, label, ha="center", va="center", fontsize=9,
                        color="#1b5e20", zorder=3, clip_on=True)
            continue
        if not visible(x):
            continue
        w, h = (0.9, 0.66) if kind in ("gpu", "nic", "dpu") else (0.86, 0.36)
        device = d.get("device")
        fc = COLOURS.get(kind, "#ffffff")
        if device and device in overlay:
            fc = overlay_colour(overlay[device], claim_colours)
        elif d.get("taints"):
            fc = STATE_COLOURS["tainted"]
        ax.add_patch(FancyBboxPatch((x - w / 2, y - h / 2), w, h, boxstyle="round,pad=0.02",
                                    fc=fc, ec="#333333", lw=1.0, zorder=2))
        if kind in ("gpu", "nic", "dpu"):
            top = 0.18 if kind == "gpu" else 0.14
            ax.text(x, y + top, device or n, ha="center", va="center", fontsize=10, weight="bold", zorder=3)
            model = _model_label(str(d.get("model", "") or kind.upper()))
            ax.text(x, y + top - 0.2 - 0.06 * model.count("\n"), model, ha="center", va="center", fontsize=7.5,
                    linespacing=1.0, zorder=3)
        else:
            text = {"socket": f"CPU {n.removeprefix('socket')} · NUMA {d.get('numaNode')}"}.get(kind, str(n))
            ax.text(x, y, text, ha="center", va="center", fontsize=8.5, zorder=3)
    # MIG instances inside their GPU, one column per memory slice
    for n, d in g.nodes(data=True):
        if d.get("kind") != "mig":
            continue
        device = d.get("device", n)
        static = not d.get("consumesCounters")
        if not (show_mig == "all" or device in overlay or (show_mig == "auto" and static)):
            continue
        start, slices, total = mig_geometry(g, n)
        px, py = pos[d["parent"]]
        if not visible(px):
            continue
        left, width = px - 0.43, 0.86 / total
        fc = overlay_colour(overlay[device], claim_colours) if device in overlay else "#c6dbef"
        ax.add_patch(Rectangle((left + start * width, py - 0.31), slices * width, 0.2,
                               fc=fc, ec="#08306b", lw=0.8, zorder=3))
        ax.text(left + (start + slices / 2) * width, py - 0.21, str(d.get("profile", "")).split(".")[0],
                ha="center", va="center", fontsize=6.5, zorder=4)
    ax.set_xlim(x_lo, x_hi)
    ax.set_ylim(-0.6, 4.35)
    ax.axis("off")


def save_png(g: nx.Graph, path: str, overlay: Mapping[str, str] | None = None, **kwargs: Any) -> str:
    import matplotlib.pyplot as plt

    fig = draw_node(g, overlay, **kwargs)
    try:
        save_figure(fig, path, dpi=100)  # whole or not at all: a failed save leaves the old file
    finally:
        plt.close(fig)
    return path
