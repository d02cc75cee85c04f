"""What a picture of one node is made of, for both pictures of it: the static one (labkit.topology.draw,
matplotlib) and the interactive one (labkit.widgets.topology_view, SVG). One home, so that the two show
the same boxes at the same places in the same colours.

- `layout(g)`: deterministic tiered positions (sockets -> PCIe roots -> switches -> GPUs / NICs);
- `picture_rows(g, pos)`: one row, or one row per CPU socket for a wide node;
- `mig_geometry(g, mig)`: where a MIG instance sits inside its GPU (memory slices);
- `overlay_colour(state, claim_colours)`: the colour of a state (free, in use, ...) or of a claim.
"""

from __future__ import annotations

import networkx as nx

from fake_gpus.catalog import gpu_model
from labkit.topology.queries import natural_key, switch_chain

COLOURS = {
    "socket": "#dfe7fd", "pcieRoot": "#e8f0e3", "pcieSwitch": "#f3f3f3", "gpu": "#ffffff",
    "nic": "#fff4e0", "dpu": "#fde2c8", "nvswitchFabric": "#d9f0e3",
}
STATE_COLOURS = {"free": "#e6f4ea", "in use": "#f6c3c0", "tainted": "#ffd966", "unavailable": "#cccccc",
                 "unhealthy": "#d62728"}
CLAIM_PALETTE = ["#4e79a7", "#f28e2b", "#59a14f", "#b07aa1", "#e15759", "#76b7b2", "#edc948", "#9c755f",
                 "#ff9da7", "#bab0ac"]
#: the height of each tier in layout units, top to bottom
Y = {"socket": 4.0, "pcieRoot": 3.0, "pcieSwitch": 2.0, "gpu": 1.0, "nic": 1.0, "dpu": 1.0, "nvswitchFabric": -0.35}
LEAF_KINDS = ("gpu", "nic", "dpu")
#: a node with more hardware leaves than this is drawn one CPU socket per row (readable at ~900 px)
SPLIT_ABOVE = 8


def _leaf_key(g: nx.Graph, n: str) -> tuple:
    d = g.nodes[n]
    return (d.get("socket", 0), natural_key(str(d.get("pcieRoot", ""))), natural_key(str(d.get("pcieSwitch") or "")),
            0 if d["kind"] == "gpu" else 1, natural_key(n))


def layout(g: nx.Graph) -> dict[str, tuple[float, float]]:
    """Deterministic tiered positions for the hardware nodes of one node graph."""
    leaves = sorted((n for n, d in g.nodes(data=True) if d.get("kind") in LEAF_KINDS), key=lambda n: _leaf_key(g, n))
    pos: dict[str, tuple[float, float]] = {n: (float(i), Y["gpu"]) for i, n in enumerate(leaves)}

    def centre(children: list[str]) -> float:
        xs = [pos[c][0] for c in children if c in pos]
        return sum(xs) / len(xs) if xs else 0.0

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


def overlay_colour(state: str, claim_colours: dict[str, str]) -> str:
    """The colour of an overlay state; a claim (any other value) gets the next palette colour, remembered
    in `claim_colours` (so that the legend lists the claims in the order they were drawn)."""
    if state in STATE_COLOURS:
        return STATE_COLOURS[state]
    if state not in claim_colours:
        claim_colours[state] = CLAIM_PALETTE[len(claim_colours) % len(CLAIM_PALETTE)]
    return claim_colours[state]


def mig_geometry(g: nx.Graph, mig: str) -> tuple[int, int, int]:
    """(placement start, memory slices, slices on the GPU) for a MIG node."""
    d = g.nodes[mig]
    start = int(str(d.get("device", mig)).rsplit("-", 1)[-1])
    parent = g.nodes[d["parent"]]
    try:
        model = gpu_model(parent.get("model"))
        prof = model.mig_profile(str(d.get("profile")))
        return start, prof.memory_slices, model.mig_memory_slices or 8
    except (KeyError, ValueError, TypeError):
        return start, 1, 8


def picture_rows(g: nx.Graph, pos: dict[str, tuple[float, float]]) -> list[tuple[str, float, float]]:
    """(row title, x from, x to) for each row of the picture: one row, or one per CPU socket."""
    leaves = [n for n, d in g.nodes(data=True) if d.get("kind") in LEAF_KINDS and n in pos]
    xs = [pos[n][0] for n in leaves] or [0.0]
    sockets = sorted({g.nodes[n].get("socket", 0) for n in leaves})
    if len(leaves) <= SPLIT_ABOVE or len(sockets) < 2:
        return [("", min(xs), max(xs))]
    rows = []
    for s in sockets:
        own = [pos[n][0] for n in leaves if g.nodes[n].get("socket", 0) == s]
        rows.append((f"CPU socket {s}", min(own), max(own)))
    return rows
