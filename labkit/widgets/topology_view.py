"""TopologyView: an interactive SVG of a node (anywidget, no CDN): zoom with the wheel, hover for a
device's attributes, click a device to see its attributes and which claim holds it."""

from __future__ import annotations

from html import escape
from typing import Any

import anywidget
import ipywidgets as W
import networkx as nx
import traitlets

from labkit.topology.picture import COLOURS, STATE_COLOURS, layout, mig_geometry, overlay_colour, picture_rows
from labkit.topology.queries import natural_key
from labkit.topology.rack import nvlink_domains
from labkit.widgets.sources import guarded

_ESM = r"""
function render({ model, el }) {
  const NS = "http://www.w3.org/2000/svg";
  const svg = document.createElementNS(NS, "svg");
  svg.classList.add("labkit-topology-svg");
  // the whole node fits the box on open: the viewBox is the drawing's extent, the box keeps its
  // aspect ratio at the notebook's width; wheel zooms, drag pans, double-click fits again
  svg.setAttribute("preserveAspectRatio", "xMidYMid meet");
  svg.style.width = "100%"; svg.style.maxWidth = model.get("graph").width + "px"; svg.style.height = "auto";
  svg.style.display = "block";
  svg.style.border = "1px solid #eee"; svg.style.background = "#fff";
  el.appendChild(svg);
  let scale = 1, tx = 0, ty = 0;
  const root = document.createElementNS(NS, "g");
  svg.appendChild(root);
  const fit = () => {
    const d = model.get("graph");
    svg.setAttribute("viewBox", `0 0 ${d.width} ${d.height}`);
    svg.style.maxWidth = d.width + "px";
  };
  const apply = () => root.setAttribute("transform", `translate(${tx},${ty}) scale(${scale})`);
  svg.addEventListener("wheel", (e) => { e.preventDefault(); scale *= e.deltaY < 0 ? 1.1 : 0.9; apply(); });
  svg.addEventListener("dblclick", () => { scale = 1; tx = 0; ty = 0; apply(); });
  let drag = null;
  svg.addEventListener("mousedown", (e) => { drag = [e.clientX - tx, e.clientY - ty]; });
  svg.addEventListener("mousemove", (e) => { if (drag) { tx = e.clientX - drag[0]; ty = e.clientY - drag[1]; apply(); } });
  window.addEventListener("mouseup", () => { drag = null; });
  function draw() {
    root.innerHTML = "";
    const data = model.get("graph");
    const pos = {};
    for (const n of data.nodes) pos[n.id] = n;
    for (const e of data.edges) {
      const a = pos[e.a], b = pos[e.b];
      if (!a || !b) continue;
      if (e.type === "nvlink" && (a.kind === "nvswitchFabric" || b.kind === "nvswitchFabric")) {
        // straight down from the GPU to the fabric bar
        const gpu = a.kind === "nvswitchFabric" ? b : a, bar = a.kind === "nvswitchFabric" ? a : b;
        const line = document.createElementNS(NS, "line");
        line.setAttribute("x1", gpu.x); line.setAttribute("y1", gpu.y);
        line.setAttribute("x2", gpu.x); line.setAttribute("y2", bar.y);
        line.setAttribute("stroke", "#2e7d32"); line.setAttribute("stroke-width", 3);
        line.classList.add("labkit-edge-nvlink");
        root.appendChild(line);
        continue;
      }
      const line = document.createElementNS(NS, "line");
      line.setAttribute("x1", a.x); line.setAttribute("y1", a.y);
      line.setAttribute("x2", b.x); line.setAttribute("y2", b.y);
      line.setAttribute("stroke", e.type === "nvlink" ? "#2e7d32" : (e.type === "smp" ? "#4f6bd8" : "#999"));
      line.setAttribute("stroke-width", e.type === "nvlink" ? 3 : 1.5);
      if (e.type === "smp") line.setAttribute("stroke-dasharray", "6,4");
      line.classList.add("labkit-edge-" + e.type);
      root.appendChild(line);
    }
    for (const n of data.nodes) {
      const g = document.createElementNS(NS, "g");
      g.classList.add("labkit-node", "labkit-kind-" + n.kind);
      g.setAttribute("data-id", n.id);
      if (n.device) g.setAttribute("data-device", n.device);
      const r = document.createElementNS(NS, "rect");
      r.setAttribute("x", n.x - n.w / 2); r.setAttribute("y", n.y - n.h / 2);
      r.setAttribute("width", n.w); r.setAttribute("height", n.h); r.setAttribute("rx", 5);
      r.setAttribute("fill", n.fill);
      r.setAttribute("stroke", model.get("selected") === n.id ? "#d62728" : "#333");
      r.setAttribute("stroke-width", model.get("selected") === n.id ? 3 : 1);
      g.appendChild(r);
      const t = document.createElementNS(NS, "text");
      t.setAttribute("x", n.x); t.setAttribute("y", n.y + 4); t.setAttribute("text-anchor", "middle");
      t.setAttribute("font-size", n.kind === "mig" ? 10 : 14); t.setAttribute("font-family", "sans-serif");
      t.textContent = n.label;
      g.appendChild(t);
      const title = document.createElementNS(NS, "title");
      title.textContent = n.title;
      g.appendChild(title);
      if (n.clickable) {
        g.style.cursor = "pointer";
        g.addEventListener("click", (e) => { e.stopPropagation(); model.set("selected", n.id); model.save_changes(); });
      }
      root.appendChild(g);
    }
  }
  model.on("change:graph", () => { fit(); draw(); });
  model.on("change:selected", draw);
  fit(); draw(); apply();
}
export default { render };
"""


class _TopologySvg(anywidget.AnyWidget):
    _esm = _ESM
    graph = traitlets.Dict().tag(sync=True)
    selected = traitlets.Unicode("").tag(sync=True)
    height = traitlets.Int(420).tag(sync=True)


ROW_HEIGHT = 420.0
SX, SY = 110.0, 80.0


def svg_model(g: nx.Graph, overlay: dict[str, str] | None = None, holders: dict[str, str] | None = None
              ) -> dict[str, Any]:
    """The JSON the view draws: pixel positions from the same layout as the static picture, a wide
    node one CPU socket per row (as `draw_node` does), and the drawing's width and height."""
    overlay = overlay or {}
    holders = holders or {}
    if is_fleet(g):
        return _fleet_model(g, overlay, holders)
    pos = layout(g)
    rows = picture_rows(g, pos)

    def row_of(x: float) -> int:
        for i, (_, lo, hi) in enumerate(rows):
            if lo - 0.5 <= x <= hi + 0.5:
                return i
        return 0

    def px(x: float, y: float, row: int | None = None) -> tuple[float, float]:
        r = row_of(x) if row is None else row
        return 60 + (x - rows[r][1]) * SX, 30 + r * ROW_HEIGHT + (4.6 - y) * SY

    claim_colours: dict[str, str] = {}
    nodes = []
    edges: list[dict[str, str]] = []
    for n, d in g.nodes(data=True):
        kind = d.get("kind")
        if n not in pos and kind != "mig":
            continue
        device = d.get("device", "")
        state = overlay.get(device)
        fill = overlay_colour(state, claim_colours) if state else COLOURS.get(kind, "#fff")
        if not state and d.get("taints"):
            fill = STATE_COLOURS["tainted"]
        attrs = d.get("attributes") or {}
        title = "\n".join([f"{device or n} ({kind})"] + [f"{k}: {v}" for k, v in sorted(attrs.items())]
                          + [f"capacity {k}: {v}" for k, v in sorted((d.get("capacity") or {}).items())]
                          + ([f"held by {holders[device]}"] if device in holders else []))
        if kind == "mig":
            if d.get("consumesCounters") and device not in overlay:
                continue
            start, slices, total = mig_geometry(g, n)
            gx, gy = px(*pos[d["parent"]])
            w = 90 / total
            nodes.append({"id": n, "kind": kind, "device": device, "label": str(d.get("profile", "")).split(".")[0],
                          "x": gx - 45 + (start + slices / 2) * w, "y": gy + 14, "w": slices * w - 1, "h": 14,
                          "fill": fill if state else "#c6dbef", "title": title, "clickable": True})
            continue
        if kind == "nvswitchFabric":
            # one bar per row, under that row's GPUs
            members = [m for m in g.neighbors(n) if g.nodes[m].get("kind") == "gpu"]
            for r in sorted({row_of(pos[m][0]) for m in members}):
                mine = [m for m in members if row_of(pos[m][0]) == r]
                xs = [px(*pos[m], r)[0] for m in mine]
                bar = n if len(rows) == 1 else f"{n}@{r}"
                label = f"NVSwitch fabric (all {len(members)} GPUs)"
                nodes.append({"id": bar, "kind": kind, "device": "", "label": label, "x": (min(xs) + max(xs)) / 2,
                              "y": px(0, pos[n][1], r)[1], "w": max(xs) - min(xs) + 100, "h": 26, "fill": fill,
                              "title": title, "clickable": False})
                edges += [{"a": m, "b": bar, "type": "nvlink"} for m in mine]
            continue
        x, y = px(*pos[n])
        big = kind in ("gpu", "nic", "dpu")
        label = device or d.get("label") or n
        if kind == "socket":
            label = f"CPU {n.removeprefix('socket')} · NUMA {d.get('numaNode')}"
        nodes.append({"id": n, "kind": kind, "device": device, "label": label, "x": x, "y": y,
                      "w": 96 if big else 120, "h": 46 if big else 26,
                      "fill": fill, "title": title, "clickable": bool(device) or big})
    fabric = {n for n, d in g.nodes(data=True) if d.get("kind") == "nvswitchFabric"}
    for a, b, d in g.edges(data=True):
        if d.get("type") == "mig" or a in fabric or b in fabric:
            continue
        if d.get("type") == "smp" and len(rows) > 1:
            continue  # the two sockets are in different rows; the legend names the link
        edges.append({"a": a, "b": b, "type": d.get("type", "")})
    width = 120 + max(hi - lo for _, lo, hi in rows) * SX
    height = len(rows) * ROW_HEIGHT + 20
    legend = {kind: COLOURS[kind] for kind in sorted({d.get("kind") for _, d in g.nodes(data=True)}) if kind in COLOURS}
    return {"nodes": nodes, "edges": edges, "width": width, "height": height, "rows": [r[0] for r in rows],
            "claims": claim_colours, "kinds": legend}


def is_fleet(g: nx.Graph) -> bool:
    """A graph of several nodes (labkit.topology.rack.fleet_graph, cluster_graph), not one node's."""
    return any(d.get("kind") in ("node", "nvlinkDomain") for _, d in g.nodes(data=True))


#: the fleet view: one column per NVLink domain (rack), one row per node (tray), a box per GPU
FLEET_GPU_W, FLEET_ROW_H, FLEET_LABEL_W = 74.0, 40.0, 110.0


def _fleet_model(g: nx.Graph, overlay: dict[str, str], holders: dict[str, str]) -> dict[str, Any]:
    """What `draw_racks` draws, as the view's model: a column per NVLink domain with its bar on top,
    a row per node with its GPUs, each GPU coloured by the claim (or state) the overlay gives for
    `<node>/<device>` (labkit.topology.rack.placement). Nodes outside any domain: a last column."""
    domains = dict(nvlink_domains(g))
    inside = {n for members in domains.values() for n in members}
    rest = sorted((n for n, d in g.nodes(data=True) if d.get("kind") == "node" and n not in inside), key=natural_key)
    if rest:
        domains[""] = rest
    gpus = {node: sorted((n for n in g if str(n).startswith(f"{node}/") and g.nodes[n].get("kind") == "gpu"),
                         key=natural_key) for members in domains.values() for node in members}
    per_row = max((len(v) for v in gpus.values()), default=1) or 1
    col_w = FLEET_LABEL_W + per_row * FLEET_GPU_W + 40
    claim_colours: dict[str, str] = {}
    nodes: list[dict[str, Any]] = []
    edges: list[dict[str, str]] = []
    for col, (clique, members) in enumerate(domains.items()):
        x0 = 20 + col * col_w
        bar = f"nvlink-domain/{clique}" if clique else "no-nvlink-domain"
        label = f"NVLink domain {clique[-8:]} ({len(members)} nodes)" if clique else "no NVLink domain"
        nodes.append({"id": bar, "kind": "nvlinkDomain", "device": "", "label": label, "x": x0 + col_w / 2 - 20,
                      "y": 30, "w": col_w - 40, "h": 26, "fill": "#d9f0e3" if clique else "#eeeeee",
                      "title": f"NVLink domain {clique}" if clique else "nodes without a clique", "clickable": False})
        for row, node in enumerate(members):
            y = 80 + row * FLEET_ROW_H
            nodes.append({"id": node, "kind": "node", "device": "", "label": node, "x": x0 + FLEET_LABEL_W / 2,
                          "y": y, "w": FLEET_LABEL_W - 10, "h": 30, "fill": "#f3f3f3",
                          "title": f"{node} ({g.nodes[node].get('profile', '')})", "clickable": False})
            for i, gpu in enumerate(gpus[node]):
                d = g.nodes[gpu]
                device = d.get("device") or str(gpu).split("/", 1)[1]
                key = f"{node}/{device}"
                state = overlay.get(key)
                fill = overlay_colour(state, claim_colours) if state else COLOURS["gpu"]
                attrs = d.get("attributes") or {}
                title = "\n".join([f"{key} (gpu)"] + [f"{k}: {v}" for k, v in sorted(attrs.items())]
                                  + ([f"held by {holders[key]}"] if key in holders else []))
                nodes.append({"id": gpu, "kind": "gpu", "device": device, "label": device.removeprefix("gpu-"),
                              "x": x0 + FLEET_LABEL_W + (i + 0.5) * FLEET_GPU_W, "y": y, "w": FLEET_GPU_W - 8,
                              "h": 30, "fill": fill, "title": title, "clickable": True})
    rows = max((len(m) for m in domains.values()), default=0)
    return {"nodes": nodes, "edges": edges, "width": 40 + len(domains) * col_w, "height": 100 + rows * FLEET_ROW_H,
            "rows": [], "claims": claim_colours, "kinds": {"gpu": COLOURS["gpu"]}}


def legend_html(model: dict[str, Any]) -> str:
    """The colours of the view, the claims shown and how to zoom: one line under the picture."""
    def swatch(colour: str, text: str, line: bool = False) -> str:
        box = (f"<span style='display:inline-block;width:22px;height:0;border-top:3px solid {colour};"
               "vertical-align:middle'></span>" if line else
               f"<span style='display:inline-block;width:12px;height:12px;background:{colour};"
               "border:1px solid #333;vertical-align:middle'></span>")
        return f"<span style='margin-right:12px;white-space:nowrap'>{box} {escape(text)}</span>"

    names = {"socket": "CPU socket", "pcieRoot": "PCIe root", "pcieSwitch": "PCIe switch", "gpu": "GPU", "nic": "NIC",
             "dpu": "DPU", "nvswitchFabric": "NVSwitch"}
    parts = [swatch(c, f"claim {k}") for k, c in model.get("claims", {}).items()]
    parts += [swatch(c, names.get(k, k)) for k, c in model.get("kinds", {}).items()]
    parts += [swatch("#2e7d32", "NVLink", line=True), swatch("#999", "PCIe", line=True)]
    rows = [r for r in model.get("rows", []) if r]
    layout_note = f" Rows: {', '.join(rows)}." if rows else ""
    hint = ("<i>scroll to zoom · drag to pan · double-click to fit · hover a box for its attributes, "
            f"click it for details.{escape(layout_note)}</i>")
    return f"<div class='labkit-topology-legend' style='font-size:12px;line-height:1.8'>{''.join(parts)}<br>{hint}</div>"


def _claims_in(overlay: dict[str, str] | None) -> dict[str, str]:
    """Overlay entries that name a claim (not a state such as "free" or "tainted")."""
    return {k: v for k, v in (overlay or {}).items() if v not in STATE_COLOURS}


class TopologyView(W.VBox):
    """`TopologyView(node_graph("dgx-a100"), overlay={"gpu-0": "default/train"})`."""

    def __init__(self, g: nx.Graph, overlay: dict[str, str] | None = None, holders: dict[str, str] | None = None,
                 height: int = 430):
        self.g = g
        self.holders = dict(holders) if holders is not None else _claims_in(overlay)
        model = svg_model(g, overlay, self.holders)
        self.svg = _TopologySvg(graph=model, height=height)
        self.legend = W.HTML(legend_html(model))
        self.info = W.HTML("<i>click a device to see its attributes</i>")
        self.info.add_class("labkit-topology-info")
        self.svg.observe(guarded(self._show_error, self._selected), names="selected")
        super().__init__([self.svg, self.legend, self.info])
        self.add_class("labkit-topology")

    def set_overlay(self, overlay: dict[str, str], holders: dict[str, str] | None = None) -> None:
        self.holders = dict(holders) if holders is not None else _claims_in(overlay)
        self.svg.graph = svg_model(self.g, overlay, self.holders)
        self.legend.value = legend_html(self.svg.graph)

    def describe(self, node_id: str) -> str:
        """HTML for one device: its DRA identity, attributes, capacity and holder."""
        d = self.g.nodes[node_id]
        device = d.get("device") or node_id
        node = str(node_id).split("/", 1)[0] if "/" in str(node_id) else ""
        holder = self.holders.get(f"{node}/{device}") or self.holders.get(device, "free")
        rows = [("device", device), ("kind", d.get("kind")), ("driver", d.get("driver", "")),
                ("pool", d.get("pool", "") or node), ("held by", holder)]
        rows += [(k, v) for k, v in sorted((d.get("attributes") or {}).items())]
        rows += [(f"capacity {k}", v) for k, v in sorted((d.get("capacity") or {}).items())]
        body = "".join(f"<tr><td><b>{escape(str(k))}</b></td><td>{escape(str(v))}</td></tr>" for k, v in rows)
        return f"<table>{body}</table>"

    def _show_error(self, html: str) -> None:
        self.info.value = html

    def _selected(self, change: dict[str, Any]) -> None:
        if change["new"] in self.g:
            self.info.value = self.describe(change["new"])
