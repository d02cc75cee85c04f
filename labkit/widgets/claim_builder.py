"""ClaimBuilder: build a ResourceClaim by pointing and clicking, see the YAML, the matching devices,
and where the allocator would put it.

Every control maps to a field of `labkit.widgets.logic.ClaimSpec`; `builder.spec()` and
`builder.claim()` give the same result as the plain functions. CSS classes (``labkit-*``) are
stable so browser tests can drive it.
"""

from __future__ import annotations

import io
import sys
from typing import Any

import ipywidgets as W

from labkit.api import dump
from labkit.topology import draw_node, node_graph
from labkit.widgets.logic import (
    OPERATORS,
    ClaimSpec,
    Filter,
    Placement,
    RequestSpec,
    allocate_on_cluster,
    build_claim,
    preview,
)
from labkit.widgets.sources import Inventory, guarded

CONSTRAINT_CHOICES = [
    ("none", ""),
    ("same PCIe root (resource.kubernetes.io/pcieRoot)", "resource.kubernetes.io/pcieRoot"),
    ("same physical GPU (gpu.nvidia.com/parentUUID)", "gpu.nvidia.com/parentUUID"),
    ("same NVLink domain (topology.fake-gpus.dev/nvlinkDomain)", "topology.fake-gpus.dev/nvlinkDomain"),
    ("same NUMA node (topology.fake-gpus.dev/numaNode)", "topology.fake-gpus.dev/numaNode"),
]


class FilterRow(W.HBox):
    def __init__(self, names: list[str], on_change, on_remove):
        self.name = W.Combobox(options=names, placeholder="attribute or capacity", layout=W.Layout(width="220px"))
        self.op = W.Dropdown(options=list(OPERATORS), value=">=", layout=W.Layout(width="90px"))
        self.value = W.Text(placeholder="e.g. 40Gi", layout=W.Layout(width="160px"))
        remove = W.Button(description="✕", layout=W.Layout(width="36px"), tooltip="remove filter")
        remove.on_click(lambda _: on_remove(self))  # on_remove is guarded by the builder
        for w in (self.name, self.op, self.value):
            w.observe(lambda _: on_change(), names="value")
        self.name.add_class("labkit-filter-name")
        self.op.add_class("labkit-filter-op")
        self.value.add_class("labkit-filter-value")
        super().__init__([self.name, self.op, self.value, remove])

    def filter(self) -> Filter | None:
        if not self.name.value.strip() or not self.value.value.strip():
            return None
        return Filter(self.name.value.strip(), self.op.value, self.value.value.strip())


class RequestPanel(W.VBox):
    """One request: class, count or All, filters, and an optional fallback (firstAvailable)."""

    def __init__(self, builder: ClaimBuilder, name: str, device_class: str):
        self.builder = builder
        classes = sorted(c["metadata"]["name"] for c in builder.inventory.classes) or [device_class]
        self.req_name = W.Text(value=name, description="request", layout=W.Layout(width="220px"))
        self.device_class = W.Dropdown(options=classes, value=device_class if device_class in classes else classes[0],
                                       description="class", layout=W.Layout(width="330px"))
        self.count = W.BoundedIntText(value=1, min=1, max=32, description="count", layout=W.Layout(width="160px"))
        self.all = W.Checkbox(value=False, description="all matching devices (allocationMode: All)", indent=False,
                              layout=W.Layout(width="auto"))
        self.filters = W.VBox([])
        add = W.Button(description="+ filter", layout=W.Layout(width="90px"))
        add.add_class("labkit-add-filter")
        add.on_click(builder.guard(lambda _: self.add_filter()))
        self.fallback = W.Checkbox(value=False, description="else (firstAvailable):", indent=False,
                                   layout=W.Layout(width="auto"))
        self.fallback_class = W.Dropdown(options=classes, value=self.device_class.value, layout=W.Layout(width="220px"))
        self.fallback_count = W.BoundedIntText(value=2, min=1, max=32, description="count",
                                               layout=W.Layout(width="150px"))
        self.device_class.add_class("labkit-class")
        self.count.add_class("labkit-count")
        for w in (self.req_name, self.device_class, self.count, self.all, self.fallback, self.fallback_class,
                  self.fallback_count):
            w.observe(builder.guard(lambda _: builder.refresh()), names="value")
        wrap = W.Layout(flex_flow="row wrap")  # narrow notebooks: the row wraps instead of cutting labels
        super().__init__([
            W.HBox([self.req_name, self.device_class, self.count, self.all], layout=wrap),
            W.HBox([W.Label("filters (ANDed):"), add]), self.filters,
            W.HBox([self.fallback, self.fallback_class, self.fallback_count], layout=wrap),
        ], layout=W.Layout(border="1px solid #ddd", padding="4px", margin="2px 0"))

    def names(self) -> list[str]:
        attrs, caps = self.builder.inventory.device_names_for_class(self.device_class.value)
        return caps + attrs

    def add_filter(self, name: str = "", op: str = ">=", value: str = "") -> FilterRow:
        row = FilterRow(self.names(), self.builder.guard(self.builder.refresh),
                        self.builder.guard(self.remove_filter))
        row.name.value, row.op.value, row.value.value = name, op, value
        self.filters.children = (*self.filters.children, row)
        self.builder.refresh()
        return row

    def remove_filter(self, row: FilterRow) -> None:
        self.filters.children = tuple(r for r in self.filters.children if r is not row)
        self.builder.refresh()

    def spec(self) -> RequestSpec:
        filters = [f for f in (r.filter() for r in self.filters.children) if f]
        spec = RequestSpec(self.req_name.value.strip() or "req", self.device_class.value, self.count.value,
                           self.all.value, filters)
        if self.fallback.value:
            spec.alternatives = [RequestSpec(f"{spec.name}-fallback", self.fallback_class.value,
                                             self.fallback_count.value)]
        return spec


class ClaimBuilder(W.VBox):
    """Point-and-click ResourceClaims. `ClaimBuilder(cluster)` or `ClaimBuilder(classes=..., slices=...)`."""

    def __init__(self, cluster: Any = None, *, name: str = "my-claim", namespace: str = "default",
                 device_class: str = "gpu.nvidia.com", **lists: Any):
        if sys.platform == "emscripten":
            # the placement picture is drawn on a click, outside a cell, where a browser tab cannot load the
            # drawing library (labkit.browser): load it now, in the cell that makes the builder
            import matplotlib.pyplot  # noqa: F401

        self.inventory = Inventory.of(cluster, **lists)
        self.result = W.HTML(value="")
        self.result.add_class("labkit-result")
        self.claim_name = W.Text(value=name, description="name", layout=W.Layout(width="260px"))
        self.namespace = W.Text(value=namespace, description="namespace", layout=W.Layout(width="260px"))
        self.kind = W.ToggleButtons(options=[("shared ResourceClaim", False), ("template (one per pod)", True)],
                                    value=False, style={"button_width": "auto"})
        self.constraint = W.Dropdown(options=CONSTRAINT_CHOICES, value="", description="constraint",
                                     layout=W.Layout(width="520px"))
        self.requests = W.VBox([])
        add_request = W.Button(description="+ request")
        add_request.on_click(self.guard(lambda _: self.add_request()))
        self.preview_label = W.HTML()
        self.preview_label.add_class("labkit-preview")
        self.yaml_view = W.HTML()
        self.allocate_button = W.Button(description="Allocate", button_style="primary", icon="play")
        self.allocate_button.add_class("labkit-allocate")
        self.allocate_button.on_click(self.guard(lambda _: self.allocate()))
        self.apply_button = W.Button(description="Apply", icon="upload",
                                     disabled=getattr(self.inventory.cluster, "apply", None) is None)
        self.apply_button.add_class("labkit-apply")
        self.apply_button.on_click(self.guard(lambda _: self.apply()))
        # hidden until there is a placement to show (an empty <img> renders as a broken icon)
        self.picture = W.Image(format="png", layout=W.Layout(max_width="100%", display="none"))
        self.last_placement: Placement | None = None
        for w in (self.claim_name, self.namespace, self.kind, self.constraint):
            w.observe(self.guard(lambda _: self.refresh()), names="value")
        self._ready = False
        super().__init__([
            W.HBox([self.claim_name, self.namespace]), self.kind, self.requests, add_request, self.constraint,
            self.preview_label, W.HBox([self.allocate_button, self.apply_button]), self.result, self.picture,
            W.Accordion(children=[self.yaml_view], titles=("YAML",)),
        ])
        self.add_class("labkit-claim-builder")
        self.add_request("gpu", device_class)
        self._ready = True
        self.refresh()

    def guard(self, fn: Any) -> Any:
        """`fn` as a widget callback whose errors show under the buttons instead of being lost."""
        def show(html: str) -> None:
            self.result.value = html

        return guarded(show, fn, lambda: self.inventory.cluster)

    # -- model -------------------------------------------------------------------------------
    def add_request(self, name: str | None = None, device_class: str = "gpu.nvidia.com") -> RequestPanel:
        panel = RequestPanel(self, name or f"req{len(self.requests.children)}", device_class)
        self.requests.children = (*self.requests.children, panel)
        self.refresh()
        return panel

    def spec(self) -> ClaimSpec:
        return ClaimSpec(self.claim_name.value.strip() or "my-claim", self.namespace.value.strip() or "default",
                         [p.spec() for p in self.requests.children], self.constraint.value or None,
                         None, self.kind.value)

    def claim(self) -> dict[str, Any]:
        return build_claim(self.spec())

    # -- actions -----------------------------------------------------------------------------
    def refresh(self) -> None:
        if not getattr(self, "_ready", False):
            return
        from html import escape

        try:
            claim = self.claim()
        except ValueError as exc:
            self.preview_label.value = f"<span style='color:#b00'>{escape(str(exc))}</span>"
            return
        self.yaml_view.value = f"<pre>{escape(dump(claim))}</pre>"
        try:
            counts = preview(claim, self.inventory.classes, self.inventory.slices)
            parts = [f"<b>{escape(r)}</b>: {m} of {t} devices of the class match" for r, (m, t) in counts.items()]
            self.preview_label.value = " · ".join(parts)
        except Exception as exc:  # noqa: BLE001 - CEL errors and unknown classes are shown, not raised
            self.preview_label.value = f"<span style='color:#b00'>{escape(str(exc))}</span>"

    def allocate(self) -> Placement:
        """Run the allocator over the current inventory, show the result and the placement picture."""
        from html import escape

        self.inventory.refresh()
        placement = allocate_on_cluster(self.claim(), self.inventory.classes, self.inventory.slices,
                                        self.inventory.claims, self.inventory.nodes,
                                        kubernetes_version=self.inventory.kubernetes_version)
        self.last_placement = placement
        colour = {"allocated": "#1b5e20", "unsatisfiable": "#8a5300", "error": "#b00020"}[placement.status]
        png = self._picture(placement)  # first: the picture is there when the result line appears
        self.picture.value = png
        self.picture.layout.display = "" if png else "none"
        self.result.value = (f"<pre style='color:{colour}; white-space:pre-wrap' class='labkit-result-text'>"
                             f"{escape(placement.summary)}</pre>")
        return placement

    def _picture(self, placement: Placement) -> bytes:
        if placement.node is None:
            return b""
        node_profile = self.inventory.node_profile(placement.node)
        if node_profile is None:
            return b""
        import matplotlib.pyplot as plt

        slices = [s for s in self.inventory.slices if s["spec"].get("nodeName") == placement.node]
        g = node_graph(node_profile, slices or None, node_name=placement.node)
        who = f"{self.namespace.value}/{self.claim_name.value}"
        overlay = {d: who for d in placement.devices}
        for row_claim in self.inventory.claims:
            alloc = (row_claim.get("status") or {}).get("allocation") or {}
            for r in alloc.get("devices", {}).get("results", []):
                overlay.setdefault(r["device"], "in use")
        fig = draw_node(g, overlay, title=f"{placement.node}: where {who} would go")
        buf = io.BytesIO()
        fig.savefig(buf, format="png", dpi=80)
        plt.close(fig)
        return buf.getvalue()

    def apply(self) -> list[dict]:
        from html import escape

        cluster = self.inventory.cluster
        if cluster is None:
            self.result.value = "<i>no cluster connected: ClaimBuilder(cluster) to apply</i>"
            return []
        objs = cluster.apply(self.claim())
        if hasattr(cluster, "wait"):
            cluster.wait()
        self.inventory.refresh()
        kind = objs[0]["kind"] if objs else "object"
        self.result.value = f"<pre class='labkit-result-text'>applied {escape(kind)} " \
                            f"{escape(self.namespace.value)}/{escape(self.claim_name.value)}</pre>"
        return objs
